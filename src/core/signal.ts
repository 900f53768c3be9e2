/**
 * A wake-up flag for loops that sleep until something changes: `wait()` resolves on the next
 * `notify()` or after `timeoutMs`, whichever comes first.
 */
export class WakeSignal {
  private waiters: Array<() => void> = [];
  private pending = false;

  notify(): void {
    if (this.waiters.length === 0) {
      this.pending = true;
      return;
    }
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  wait(timeoutMs?: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        resolve();
      };
      this.waiters.push(done);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== done);
          resolve();
        }, Math.max(0, timeoutMs));
      }
    });
  }
}
