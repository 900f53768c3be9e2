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

