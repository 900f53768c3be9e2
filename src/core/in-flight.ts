/**
 * Runs `work` on every item of `items`, at most `limit` at a time, in order of start; resolves
 * when all are done, or rejects with the first failure (no new item starts after one; those
 * already running finish on their own). For requests to one peer that answer faster pipelined
 * than one after the other (a round trip each on a busy machine), within what the peer allows.
 */
export async function inFlight<T>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  let failed: unknown = null;
  const lane = async (): Promise<void> => {
    while (failed === null && next < items.length) {
      const i = next++;
      try {
        await work(items[i], i);
      } catch (err) {
        failed ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, lane));
  if (failed !== null) throw failed;
}
