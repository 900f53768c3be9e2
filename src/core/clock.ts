/**
 * Time sources. Stored and sent timestamps use the wall clock (epoch ms); timers, rate budgets and
 * backoff use the monotonic clock so that an NTP step or a manual clock change on the industrial
 * PC cannot stall or flood the uplink.
 */
export interface Clock {
  /** Wall-clock epoch milliseconds (for sample timestamps and records). */
  now(): number;
  /** Monotonic milliseconds (for durations, timers and budgets). Origin is arbitrary. */
  monotonic(): number;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
};

/** Resolves after `ms`, or rejects with the signal's reason as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason ?? new Error('aborted'));
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error('aborted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Like `sleep`, but resolves (instead of rejecting) when the signal aborts. */
export async function sleepUnlessAborted(ms: number, signal?: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, signal);
    return true;
  } catch {
    return false;
  }
}
