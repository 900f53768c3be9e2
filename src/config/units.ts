import { z } from 'zod';

const SIZE_UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

/** Parses `512MB`, `2 GiB`, `1e9` or a plain number of bytes. */
export function parseByteSize(text: string | number): number | undefined {
  if (typeof text === 'number') return Number.isFinite(text) && text >= 0 ? Math.floor(text) : undefined;
  const m = /^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text.replace(/_/g, ''));
  if (!m) return undefined;
  const unit = (m[2] || 'b').toLowerCase();
  const factor = SIZE_UNITS[unit];
  if (factor === undefined) return undefined;
  return Math.floor(Number(m[1]) * factor);
}

/** A byte size setting: a number of bytes or a string with a unit (`512MB`, `2GiB`). */
export function byteSize(options: { min?: number; max?: number } = {}) {
  return z.union([z.number(), z.string()]).transform((raw, ctx) => {
    const n = parseByteSize(raw);
    if (n === undefined) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} is not a size (use bytes or a unit: 512MB, 2GiB)`, input: raw });
      return z.NEVER;
    }
    if (options.min !== undefined && n < options.min) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} is below the minimum of ${options.min.toLocaleString('en-US')} bytes`, input: raw });
      return z.NEVER;
    }
    if (options.max !== undefined && n > options.max) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} is above the maximum of ${options.max.toLocaleString('en-US')} bytes`, input: raw });
      return z.NEVER;
    }
    return n;
  }).meta({ 'x-kind': 'size' });
}

/** A duration in ms: a number of ms or a string with a unit (`500ms`, `5s`, `2m`, `1h`). */
export function parseDurationMs(text: string | number): number | undefined {
  if (typeof text === 'number') return Number.isFinite(text) && text >= 0 ? text : undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) return undefined;
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 'ms') as 'ms'];
  return Math.round(Number(m[1]) * factor);
}

export function durationMs(options: { min?: number; max?: number } = {}) {
  return z.union([z.number(), z.string()]).transform((raw, ctx) => {
    const n = parseDurationMs(raw);
    if (n === undefined) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} is not a duration (use ms or a unit: 500ms, 5s, 2m)`, input: raw });
      return z.NEVER;
    }
    if (options.min !== undefined && n < options.min) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} is below the minimum of ${options.min} ms`, input: raw });
      return z.NEVER;
    }
    if (options.max !== undefined && n > options.max) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} is above the maximum of ${options.max} ms`, input: raw });
      return z.NEVER;
    }
    return n;
  }).meta({ 'x-kind': 'duration' });
}
