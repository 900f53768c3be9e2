/** Polls `check` until it returns a truthy value or `timeoutMs` passes; returns that value. */
export async function waitFor<T>(check: () => T | Promise<T>, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<NonNullable<T>> {
  const timeout = options.timeoutMs ?? 20_000;
  const interval = options.intervalMs ?? 50;
  const deadline = Date.now() + timeout;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${options.what ?? 'condition'} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
