/**
 * Integer domains of the chunk codec's quantized value layout (codec.ts, layout 3): ways to map a
 * chunk's values one-to-one onto integers whose steps are the sensor's own resolution, and back
 * bit-exact. Pure functions, no I/O.
 *
 * Why: what devices deliver is quantized, but not always in decimal steps. An ADC count times a
 * float span (a Modbus 4-20 mA transmitter: counts × span/65535 + offset, rounded to 15 digits)
 * is a 14-decimal number whose decimal deltas are tens of billions; a 12-bit count times a float
 * factor sent as a Sparkplug Float is a float32, handed on as its shortest decimal. In both the
 * samples sit on a grid `y0 + c·q` (q: one count) up to the device's rounding, so the layout
 * stores the counts' deltas (a few bits) and the rounding as a residual, nearly always 0.
 *
 * Keeps C1 for the codec: `fromInt(toInt(v))` is checked bit-exact for every value before a domain
 * is used (`fits`), and the codec decodes what it wrote before keeping it (C3). Every function
 * here is deterministic IEEE-754 arithmetic (no Math.log10, no locale, no toPrecision), so a
 * reader on another machine computes the same doubles.
 */

export const DOMAIN_DECIMAL = 0;
export const DOMAIN_F32 = 1;
export const DOMAIN_F32_SHORTEST = 2;
export type DomainId = typeof DOMAIN_DECIMAL | typeof DOMAIN_F32 | typeof DOMAIN_F32_SHORTEST;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** A float32's bits as an order-keeping integer: +x → bits, −x → −bits−1 (so −0 is −1, +0 is 0). */
function f32ToInt(f: number): number {
  f32[0] = f;
  const b = u32[0];
  return b < 0x80000000 ? b : 0x7fffffff - b;
}

function intToF32(i: number): number {
  u32[0] = i >= 0 ? i : 0x7fffffff - i;
  return f32[0];
}

/** 10^e for e in −60..60, parsed (correctly rounded): the scales shortestF32 tries. */
const P10 = Array.from({ length: 121 }, (_, i) => Number(`1e${i - 60}`));

/**
 * The decimal with the fewest significant digits (1–9) that reads back as the float32 of `f`, or
 * that float32 itself: what a Sparkplug or Modbus Float decoder hands on (src/sources/mqtt/
 * decoders/sparkplug.ts), computed by scaling and rounding instead of toPrecision (20× faster, and
 * the same on every machine). Where a rare value's rounding differs from toPrecision's, `fits`
 * fails for that chunk and another layout is used: a choice of layout, never a change of value.
 */
export function shortestF32(f: number): number {
  if (f === 0 || !Number.isFinite(f)) return Math.fround(f);
  const a = Math.fround(Math.abs(f));
  // The decimal exponent e with 10^e <= a < 10^(e+1), searched from the last one (a chunk's values
  // are alike); the same e from any start, so the result does not depend on the order of calls.
  let e = lastExponent;
  while (e < 38 && P10[e + 61] <= a) e++;
  while (e > -46 && P10[e + 60] > a) e--;
  lastExponent = e;
  for (let p = 1; p <= 9; p++) {
    const j = p - 1 - e;
    const c = j >= 0 ? Math.round(a * P10[j + 60]) / P10[j + 60] : Math.round(a / P10[60 - j]) * P10[60 - j];
    if (Math.fround(c) === a) return f < 0 ? -c : c;
  }
  return f < 0 ? -a : a;
}

let lastExponent = 0;

export interface Domain {
  id: DomainId;
  /** Decimal scale (DOMAIN_DECIMAL only). */
  k: number;
  toInt(v: number): number;
  fromInt(i: number): number;
  /** The grid coordinate of an integer (the scaled decimal, or the float32 as a double). */
  y(i: number): number;
  /** The integer nearest to a point of the grid. */
  nearest(y: number): number;
}

export function domain(id: DomainId, k = 0): Domain {
  if (id === DOMAIN_DECIMAL) {
    const p = 10 ** k;
    return { id, k, toInt: (v) => Math.round(v * p), fromInt: (i) => i / p, y: (i) => i, nearest: (y) => Math.round(y) };
  }
  const fromInt = id === DOMAIN_F32 ? intToF32 : (i: number) => shortestF32(intToF32(i));
  return { id, k: 0, toInt: (v) => f32ToInt(Math.fround(v)), fromInt, y: intToF32, nearest: (y) => f32ToInt(Math.fround(y)) };
}

/** Whether every value maps to an integer and back bit-exact; fills `into` with the integers. */
export function fits(d: Domain, values: ArrayLike<number>, into: Float64Array): boolean {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    const x = d.toInt(v);
    if (!Object.is(d.fromInt(x), v)) return false;
    into[i] = x;
  }
  return true;
}

/** Bytes of an LEB128 varint of a zigzag-mapped integer. */
export function svarBytes(v: number): number {
  let z = v >= 0 ? v * 2 : -v * 2 - 1;
  let n = 1;
  while (z >= 128) {
    z = Math.floor(z / 128);
    n++;
  }
  return n;
}

/** Bytes of the plain layout: the integers' deltas. */
export function deltaBytes(ints: ArrayLike<number>): number {
  let n = 0;
  let prev = 0;
  for (let i = 0; i < ints.length; i++) {
    n += svarBytes(ints[i] - prev);
    prev = ints[i];
  }
  return n;
}

/**
 * The grid step of a chunk: the smallest move between consecutive values, refined over the whole
 * span (span / round(span / step)), so that its error is a fraction of a count over the span.
 * Null when the values do not move, or the grid would be finer than the integers themselves.
 */
export function gridStep(d: Domain, ints: ArrayLike<number>): number | null {
  let min = Infinity;
  let lo = Infinity;
  let hi = -Infinity;
  let prev = d.y(ints[0]);
  for (let i = 0; i < ints.length; i++) {
    const y = d.y(ints[i]);
    const m = Math.abs(y - prev);
    if (m > 0 && m < min) min = m;
    if (y < lo) lo = y;
    if (y > hi) hi = y;
    prev = y;
  }
  if (!Number.isFinite(min) || (d.id === DOMAIN_DECIMAL && min < 2)) return null;
  const steps = Math.round((hi - lo) / min);
  if (!(steps >= 1 && steps <= 2 ** 40)) return null;
  const q = (hi - lo) / steps;
  return Number.isFinite(q) && q > 0 ? q : null;
}

/** Grid coordinate (count) of integer `i` against the grid from `y0` with step `q`. */
export function count(d: Domain, i: number, y0: number, q: number): number {
  return Math.round((d.y(i) - y0) / q);
}

/** The integer the grid predicts for count `c`: the residual is the integer less this. */
export function predict(d: Domain, c: number, y0: number, q: number): number {
  return d.nearest(y0 + c * q);
}

/** Bytes of the grid layout (first integer, counts' deltas, residuals), without q. */
export function gridBytes(d: Domain, ints: ArrayLike<number>, q: number): number {
  const y0 = d.y(ints[0]);
  let n = svarBytes(ints[0]);
  let prevC = 0;
  for (let i = 1; i < ints.length; i++) {
    const c = count(d, ints[i], y0, q);
    n += svarBytes(c - prevC) + svarBytes(ints[i] - predict(d, c, y0, q));
    prevC = c;
  }
  return n;
}
