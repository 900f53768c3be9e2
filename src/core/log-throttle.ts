import type { Logger } from 'pino';

/** Lines one reason may write per interval before its further lines are only counted. */
export const LINES_PER_REASON = 10;

/**
 * Keeps repeated problems from flooding the log: the first occurrence of a key is logged at once,
 * later ones at most once per `intervalMs` with the number suppressed in between. A device that
 * sends a malformed payload 50 times a second produces one line every minute, not 3,000.
 *
 * On top of that, a ceiling per reason (the part of the key before the first `|` or `:`, as in
 * `unmatched|<topic>`): at most LINES_PER_REASON lines per interval, however many distinct keys
 * (20,000 distinct bad topics used to write 20,000 lines). The rest is counted and reported in one
 * summary line when the interval ends: "<message> (and N more in the last minute)".
 */
export class LogThrottle {
  private readonly seen = new Map<string, { last: number; suppressed: number }>();
  private readonly reasons = new Map<string, { start: number; lines: number; over: number; level: 'warn' | 'error'; fields: Record<string, unknown>; message: string; timer: NodeJS.Timeout | null }>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = 60_000,
    private readonly now: () => number = () => performance.now(),
    private readonly maxKeys = 10_000,
    private readonly linesPerReason = LINES_PER_REASON,
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
    if (!this.admit(level, key, t, fields, message)) return;
    const suppressed = entry?.suppressed ?? 0;
    if (!entry && this.seen.size >= this.maxKeys) this.seen.clear();
    this.seen.set(key, { last: t, suppressed: 0 });
    this.logger[level](suppressed > 0 ? { ...fields, suppressed_since_last: suppressed } : fields, message);
  }

  /** The per-reason ceiling: true when this line may be written. */
  private admit(level: 'warn' | 'error', key: string, t: number, fields: Record<string, unknown>, message: string): boolean {
    const reason = /^[^|:]*/.exec(key)![0];
    let r = this.reasons.get(reason);
    if (r && t - r.start >= this.intervalMs) {
      this.summarise(reason);
      r = undefined;
    }
    if (!r) {
      if (this.reasons.size >= this.maxKeys) this.reasons.clear();
      r = { start: t, lines: 0, over: 0, level, fields, message, timer: null };
      this.reasons.set(reason, r);
    }
    if (r.lines < this.linesPerReason) {
      r.lines += 1;
      return true;
    }
    r.over += 1;
    r.level = level;
    r.fields = fields;
    r.message = message;
    if (!r.timer) {
      // The summary comes when the interval ends, also when the flood has stopped by then.
      r.timer = setTimeout(() => this.summarise(reason), Math.max(0, this.intervalMs - (t - r.start)));
      r.timer.unref();
    }
    return false;
  }

  private summarise(reason: string): void {
    const r = this.reasons.get(reason);
    if (!r) return;
    this.reasons.delete(reason);
    if (r.timer) clearTimeout(r.timer);
    if (r.over === 0) return;
    const window = this.intervalMs === 60_000 ? 'minute' : `${Math.round(this.intervalMs / 1000)} s`;
    try {
      this.logger[r.level]({ ...r.fields, reason_key: reason, more: r.over }, `${r.message} (and ${r.over} more in the last ${window})`);
    } catch {
      /* a summary must never throw out of a timer */
    }
  }
}
