/**
 * How a sample value is stored in a row. SQLite writes a REAL that has no fractional part as an
 * integer on disk (sqlite.org/datatype3.html, "REAL affinity"), which turns −0 into 0. Rows keep
 * −0 as a small BLOB instead (rare: the hot path pays one Object.is), so the live tail is as
 * lossless as the sealed chunks (chunks/codec.ts C1).
 */
export const NEG_ZERO_BLOB = Buffer.from('-0');

export function toRowValue(v: number): number | Buffer {
  return Object.is(v, -0) ? NEG_ZERO_BLOB : v;
}

export function fromRowValue(v: number | Buffer | null): number {
  return typeof v === 'number' ? v : v === null ? Number.NaN : -0;
}

/** SQL text of a row's value for JSON (the import-file serializer). */
export const ROW_VALUE_JSON_SQL = (col: string) => `CASE WHEN typeof(${col}) = 'blob' THEN '-0' ELSE CAST(${col} AS TEXT) END`;
