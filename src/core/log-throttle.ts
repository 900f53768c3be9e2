import type { Logger } from 'pino';

/**
 * Keeps repeated problems from flooding the log: the first occurrence of a key is logged at once,
 * later ones at most once per `intervalMs` with the number suppressed in between. A device that
 * sends a malformed payload 50 times a second produces one line every minute, not 3,000.
 */
export class LogThrottle {
  private readonly seen = new Map<string, { last: number; suppressed: number }>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = 60_000,
    private readonly now: () => number = () => performance.now(),
    private readonly maxKeys = 10_000,
  ) {}

  warn(key: string, fields: Record<string, unknown>, message: string): void {
    this.emit('warn', key, fields, message);
  }

  error(key: string, fields: Record<string, unknown>, message: string): void {
    this.emit('error', key, fields, message);
  }

  private emit(level: 'warn' | 'error', key: string, fields: Record<string, unknown>, message: string): void {
    const t = this.now();
    const entry = this.seen.get(key);
    if (entry && t - entry.last < this.intervalMs) {
      entry.suppressed += 1;
      return;
    }
    const suppressed = entry?.suppressed ?? 0;
    if (!entry && this.seen.size >= this.maxKeys) this.seen.clear();
    this.seen.set(key, { last: t, suppressed: 0 });
    this.logger[level](suppressed > 0 ? { ...fields, suppressed_since_last: suppressed } : fields, message);
  }
}
