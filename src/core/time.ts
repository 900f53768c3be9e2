/**
 * Timestamp formats. The gateway stores epoch milliseconds and sends ISO 8601 UTC with `Z` and
 * exactly three fraction digits (CONTRACT.md, batch ITEM `timestamp`; interface §9 requires an
 * explicit offset on every date-time).
 */

/** `2026-11-22T08:15:00.123Z` */
export function toIsoUtc(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

/**
 * ISO 8601 date-time with an explicit offset (`Z` or `±hh:mm`). Fraction digits are optional here;
 * `ISO_WITH_MILLIS` is the stricter form the batch endpoint requires.
 */
export const ISO_WITH_OFFSET = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
/** Same, with exactly millisecond precision (3 fraction digits). */
export const ISO_WITH_MILLIS = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{3}(Z|[+-]\d{2}:\d{2})$/;

/**
 * Parses an ISO 8601 date-time that carries an explicit offset. Returns epoch ms, or `undefined`
 * when the text has no offset, is out of range (month 13, hour 25, offset +15:00) or is not a date.
 */
export function parseIsoWithOffset(text: string, requireMillis = false): number | undefined {
  const m = (requireMillis ? ISO_WITH_MILLIS : ISO_WITH_OFFSET).exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m;
  const offset = requireMillis ? m[7] : m[8];
  const month = Number(mo), day = Number(d), hour = Number(h), minute = Number(mi), second = Number(s);
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return undefined;
  if (offset !== 'Z') {
    const oh = Number(offset.slice(1, 3));
    const om = Number(offset.slice(4, 6));
    if (oh > 14 || om > 59) return undefined;
  }
  const ms = Date.parse(text);
  if (!Number.isFinite(ms)) return undefined;
  // Date.parse rolls 2026-02-30 over to March; refuse dates that do not exist.
  const daysInMonth = new Date(Date.UTC(Number(y), month, 0)).getUTCDate();
  if (day > daysInMonth) return undefined;
  return ms;
}


/** Earliest accepted device timestamp: 2000-01-01T00:00:00Z. Anything older is a PLC clock that was never set. */
export const EARLIEST_TS = Date.UTC(2000, 0, 1);
/** How far in the future a device timestamp may lie (clock skew between PLC and gateway). */
export const MAX_FUTURE_MS = 24 * 3_600_000;

/**
 * Why a timestamp a device put on a value cannot be stored, or null when it can: before 2000, or
 * more than MAX_FUTURE_MS ahead of the gateway clock `now`. One rule for every source that takes
 * the device's time (MQTT payloads, OPC UA Source/ServerTimestamp): a value stamped years off
 * would land in the wrong place of the machine's history, and one stamped in the future would
 * shadow every real value until that time.
 */
export function deviceTimeProblem(ms: number, now: number): string | null {
  if (!Number.isFinite(ms)) return 'not a finite time';
  if (ms < EARLIEST_TS) return `${isoOrRaw(ms)} is before 2000-01-01 (PLC clock not set?)`;
  if (ms > now + MAX_FUTURE_MS) return `${isoOrRaw(ms)} is more than 24 h in the future (PLC clock wrong?)`;
  return null;
}

function isoOrRaw(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}
