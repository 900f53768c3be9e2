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

/**
 * For "nothing happens for N s" checks, where there is no event to wait for: polls `check` for
 * `forMs` and fails at the first falsy answer, naming when. Use only when the absence itself is
 * what the test asserts; otherwise wait for the condition with waitFor.
 */
export async function holdsFor(check: () => unknown | Promise<unknown>, options: { forMs: number; intervalMs?: number; what: string }): Promise<void> {
  const started = Date.now();
  const interval = options.intervalMs ?? 100;
  for (;;) {
    if (!(await check())) throw new Error(`${options.what} stopped holding after ${Date.now() - started} ms (should hold for ${options.forMs} ms)`);
    if (Date.now() - started >= options.forMs) return;
    await new Promise((r) => setTimeout(r, interval));
  }
}

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
