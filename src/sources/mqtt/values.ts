import { deviceTimeProblem, parseIsoWithOffset } from '../../core/time.js';

/**
 * Turning what a publisher sent into a sample value or timestamp. Each function returns either a
 * number or a refusal reason with a short detail for the (throttled) log line.
 */
export type Coerced = { ok: true; value: number } | { ok: false; reason: 'not_numeric' | 'not_finite' | 'null_value'; detail: string };

const NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/**
 * A JSON (or text) value as a sample value: finite numbers pass, booleans become 0/1, strings
 * holding exactly one number (`"42.5"`, `" 7 "`) are read as that number, `"true"`/`"false"` as
 * 1/0. Anything else (objects, `"42 °C"`, null) is not a sample value.
 */
export function coerceValue(v: unknown): Coerced {
  if (typeof v === 'number') return Number.isFinite(v) ? { ok: true, value: v } : { ok: false, reason: 'not_finite', detail: String(v) };
  if (typeof v === 'boolean') return { ok: true, value: v ? 1 : 0 };
  if (typeof v === 'string') return coerceText(v);
  if (v === null) return { ok: false, reason: 'null_value', detail: 'null' };
  return { ok: false, reason: 'not_numeric', detail: Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'an object' : typeof v };
}

export function coerceText(text: string): Coerced {
  const t = text.trim();
  if (NUMBER_TEXT.test(t)) {
    const n = Number(t);
    return Number.isFinite(n) ? { ok: true, value: n } : { ok: false, reason: 'not_finite', detail: shorten(t) };
  }
  const lower = t.toLowerCase();
  if (lower === 'true') return { ok: true, value: 1 };
  if (lower === 'false') return { ok: true, value: 0 };
  if (lower === 'nan' || lower === 'infinity' || lower === '-infinity' || lower === '+infinity') return { ok: false, reason: 'not_finite', detail: shorten(t) };
  return { ok: false, reason: 'not_numeric', detail: JSON.stringify(shorten(t)) };
}

export function shorten(text: string, max = 60): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}

/** How a timestamp in a payload is to be read. */
export type TimestampFormat = 'auto' | 'epoch_ms' | 'epoch_s' | 'iso8601';

export type ParsedTimestamp = { ok: true; ts: number } | { ok: false; reason: 'bad_timestamp'; detail: string };

/**
 * Reads a timestamp from a payload: epoch seconds, epoch milliseconds or ISO 8601 with an offset.
 * `auto` tells epoch units apart by magnitude: below 1e11 seconds (until the year 5138), below 1e14
 * milliseconds, below 1e17 microseconds, else nanoseconds. ISO 8601 without an offset is refused:
 * a PLC's local time cannot be placed on the time line without guessing its time zone.
 */
export function parseTimestamp(raw: unknown, format: TimestampFormat, now: number): ParsedTimestamp {
  let ms: number | undefined;
  if (typeof raw === 'number' || (typeof raw === 'string' && NUMBER_TEXT.test(raw.trim()))) {
    const n = typeof raw === 'number' ? raw : Number(raw.trim());
    if (!Number.isFinite(n)) return bad(`${String(raw)} is not a finite number`);
    if (format === 'iso8601') return bad(`${shorten(String(raw))} is a number, expected an ISO 8601 date-time`);
    ms = format === 'epoch_s' ? n * 1000 : format === 'epoch_ms' ? n : epochAuto(n);
  } else if (typeof raw === 'string') {
    if (format === 'epoch_ms' || format === 'epoch_s') return bad(`${JSON.stringify(shorten(raw))} is not a number of ${format === 'epoch_s' ? 'seconds' : 'milliseconds'}`);
    ms = parseIsoWithOffset(raw.trim());
    if (ms === undefined) {
      const noOffset = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(raw.trim());
      return bad(noOffset ? `${JSON.stringify(shorten(raw))} has no UTC offset (add Z or +hh:mm)` : `${JSON.stringify(shorten(raw))} is not an ISO 8601 date-time`);
    }
  } else {
    return bad(raw === null ? 'null' : `${Array.isArray(raw) ? 'a list' : typeof raw} is not a timestamp`);
  }
  return checkRange(Math.round(ms), now);
}

/** Range check shared by every payload form, Sparkplug included (the rule is core/time.ts `deviceTimeProblem`, shared with OPC UA). */
export function checkRange(ms: number, now: number): ParsedTimestamp {
  const problem = deviceTimeProblem(ms, now);
  return problem === null ? { ok: true, ts: ms } : bad(problem);
}

function epochAuto(n: number): number {
  const a = Math.abs(n);
  if (a < 1e11) return n * 1000;
  if (a < 1e14) return n;
  if (a < 1e17) return n / 1000;
  return n / 1e6;
}

function bad(detail: string): ParsedTimestamp {
  return { ok: false, reason: 'bad_timestamp', detail };
}
