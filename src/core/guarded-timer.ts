/**
 * Timers whose callback can never throw out of the event loop.
 *
 * A callback that throws inside setInterval/setTimeout becomes an uncaught exception and ends the
 * process. Under resource exhaustion even innocent calls throw: `process.memoryUsage()` opens
 * /proc/self/stat and fails with EMFILE when every file descriptor is taken (~1,000
 * idle sockets and the status timer killed the gateway). Housekeeping must survive that: the
 * error goes to `onError` (a throttled log line) and the timer keeps running.
 */
export function guardedInterval(fn: () => unknown, ms: number, onError: (err: unknown) => void): NodeJS.Timeout {
  const timer = setInterval(() => runGuarded(fn, onError), ms);
  timer.unref();
  return timer;
}

/** Runs `fn` (sync or async); a throw or a rejection goes to `onError`, which itself may not throw. */
export function runGuarded(fn: () => unknown, onError: (err: unknown) => void): void {
  const report = (err: unknown) => {
    try {
      onError(err);
    } catch {
      /* a logger that fails under EMFILE must not end the process either */
    }
  };
  try {
    const r = fn();
    if (r && typeof (r as Promise<unknown>).then === 'function') (r as Promise<unknown>).then(undefined, report);
  } catch (err) {
    report(err);
  }
}
