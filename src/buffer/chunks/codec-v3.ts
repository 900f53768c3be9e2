import { DOMAIN_DECIMAL, DOMAIN_F32, DOMAIN_F32_SHORTEST, count, domain, gridStep, predict, type Domain, type DomainId } from './value-domains.js';
import { FLAG_INIT, IntModel, RangeDecoder, RangeEncoder, SymbolModel, flagModel } from './range-coder.js';
import { VarintWriter } from './varint-writer.js';

/**
 * Chunk format 3: one variable's samples as adaptive range-coded residuals (range-coder.ts).
 * Pure functions, no I/O; codec.ts dispatches on the version byte and keeps C1–C4 for it.
 *
 * What it takes from the field (each measured on bench/chunk-codec.ts's corpora before it stayed):
 *  - ALP (Afroozeh & Boncz, SIGMOD 2024): a decimal is an integer times 10^−k, found per chunk
 *    with a bit-exact round trip (x / 10^k === v), the few values that do not fit kept aside as
 *    exceptions (raw 64 bits and their position) instead of costing the whole chunk its layout.
 *  - The grid of value-domains.ts (ADC counts × a float span, float32 and its shortest decimal).
 *  - Gorilla (Pelkonen et al., VLDB 2015): delta-of-delta timestamps, and the XOR of consecutive
 *    doubles for values with no integer form (NaN payloads, ±Inf, random doubles), its leading and
 *    trailing zero counts coded adaptively as in Chimp (Liakos et al., VLDB 2022).
 *  - In place of fixed bit widths or varints: an adaptive binary range coder, so a jitter-free
 *    clock and a repeated polled value cost ~0.01 bit a sample (the run-length of Gorilla's zero
 *    bit without its 1 bit floor), and noise about its entropy.
 *
 * Layout (varints LEB128, signed ones zigzag; f64 little-endian):
 *   byte 0   3 (format version)
 *   uvar     n
 *   byte     check: 8 bits of a hash of every sample's bits (a damaged or cut chunk is refused,
 *            not decoded into other samples: the range coder reads zeros past the end)
 *   byte     flags: bits 0-1 timestamps (0 period, 1 delta-of-delta, 2 raw doubles, 3 clock grid),
 *                   bits 2-4 values (0 delta, 1 grid, 2 second difference, 3 XOR),
 *                   bit 5 smooth (integer modes: a value's base is the mean of the previous four)
 *   timestamps   period/dod: svar t0, svar P; clock grid: the same and svar J (the least jitter);
 *                raw: 8n bytes
 *   values       integer modes: byte domain (value-domains.ts), byte k (decimal only), f64 q (grid),
 *                svar I0, uvar e, then e × (uvar position gap, f64 value): the exceptions
 *   range-coded stream to the end of the chunk:
 *     timestamps (period/dod, i ≥ 1): d_i − p_i where d_i = t_i − t_{i−1} and p_i is P (period),
 *                or d_{i−1} with d_0 = P (delta-of-delta); clock grid: per sample the ticks of P since
 *                the previous one less 1, then the jitter t_i − (t0 + k_i·P) − J (a poll's timer and its delay)
 *     values     delta: I_i − I_{i−1}; second difference: I_i − (2I_{i−1} − I_{i−2}) (I_1 − I_0 first);
 *                grid: per sample c_i − c_{i−1}, then I_i − nearest(y(I0) + c_i·q) (value-domains.ts);
 *                XOR: per sample the XOR of its bits with the previous ones (0 before the first): a zero
 *                flag, leading and trailing zero counts, the bits between the outer ones direct
 *   An exception's slot in the integers holds the previous integer (I0 for the first), so it costs a
 *   zero residual; the reader puts the exception's value there after decoding.
 */

export const CHUNK_FORMAT_V3 = 3;

export class ChunkFormatErrorV3 extends Error {}

const TS_PERIOD = 0;
const TS_DOD = 1;
const TS_RAW = 2;
const TS_GRID = 3;
const VAL_DELTA = 0;
const VAL_GRID = 1;
const VAL_DELTA2 = 2;
const VAL_XOR = 3;

/** Timestamps coded as integers: |t| ≤ 2^49, so deltas and their differences stay below 2^52. */
const TS_LIMIT = 2 ** 49;
/** Decimal integers: |I| ≤ 2^50 (second differences stay below 2^53). */
const INT_LIMIT = 2 ** 50;
const MAX_DECIMALS = 17;
const POW10 = Array.from({ length: MAX_DECIMALS + 1 }, (_, k) => 10 ** k);
/** Exceptions a chunk may set aside and still use an integer domain (ALP keeps them rare too). */
const MAX_EXCEPTION_SHARE = 1 / 16;

// ------------------------------------------------------------------------------- varint section

class Bytes extends VarintWriter {
  f64bits(hi: number, lo: number): void {
    this.ensure(8);
    const b = this.buf;
    const p = this.pos;
    b[p] = lo & 255;
    b[p + 1] = (lo >>> 8) & 255;
    b[p + 2] = (lo >>> 16) & 255;
    b[p + 3] = lo >>> 24;
    b[p + 4] = hi & 255;
    b[p + 5] = (hi >>> 8) & 255;
    b[p + 6] = (hi >>> 16) & 255;
    b[p + 7] = hi >>> 24;
    this.pos += 8;
  }
  f64(v: number): void {
    F64[0] = v;
    this.f64bits(U32[1], U32[0]);
  }
}

class Reader {
  constructor(
    readonly buf: Uint8Array,
    public pos: number,
  ) {}
  byte(): number {
    if (this.pos >= this.buf.length) throw new ChunkFormatErrorV3('chunk ends early');
    return this.buf[this.pos++];
  }
  uvar(): number {
    let v = 0;
    let mul = 1;
    for (;;) {
      const b = this.byte();
      v += (b & 127) * mul;
      if (b < 128) return v;
      mul *= 128;
      if (mul > 2 ** 56) throw new ChunkFormatErrorV3('varint too long');
    }
  }
  svar(): number {
    const z = this.uvar();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }
  /** Reads 8 bytes into F64 (as bits, so NaN payloads stay as they are). */
  f64into(out: Float64Array, i: number): void {
    if (this.pos + 8 > this.buf.length) throw new ChunkFormatErrorV3('chunk ends early');
    const b = this.buf;
    const p = this.pos;
    U32[0] = (b[p] | (b[p + 1] << 8) | (b[p + 2] << 16) | (b[p + 3] << 24)) >>> 0;
    U32[1] = (b[p + 4] | (b[p + 5] << 8) | (b[p + 6] << 16) | (b[p + 7] << 24)) >>> 0;
    this.pos += 8;
    out[i] = F64[0];
  }
}

// Bits of a double: little-endian hosts (Node's targets), U32[1] is the high word.
const F64 = new Float64Array(1);
const U32 = new Uint32Array(F64.buffer);

// ------------------------------------------------------------------------------- cost estimates

const lenHist = new Float64Array(56);

function bitLength(u: number): number {
  if (u < 0x100000000) return 32 - Math.clz32(u);
  return 32 + bitLength(Math.floor(u / 0x100000000));
}

/**
 * Estimated bits of a residual stream under the adaptive integer model: the empirical entropy of
 * the magnitudes' bit lengths, plus signs and mantissa bits. Cheap (one pass, no coding), close
 * enough to choose between layouts.
 */
class CostMeter {
  n = 0;
  extra = 0;
  negative = 0;
  constructor() {
    lenHist.fill(0);
  }
  add(r: number): void {
    this.n++;
    if (r === 0) {
      lenHist[0]++;
      return;
    }
    if (r < 0) this.negative++;
    const l = bitLength(r < 0 ? -r : r);
    lenHist[l]++;
    this.extra += l - 1; // the mantissa bits below the leading one
  }
  bits(): number {
    let h = 0;
    for (let l = 0; l < lenHist.length; l++) {
      const c = lenHist[l];
      if (c > 0) h -= c * Math.log2(c / this.n);
    }
    // Signs: their entropy (a stream of one sign costs next to nothing).
    const nonzero = this.n - lenHist[0];
    for (const c of [this.negative, nonzero - this.negative]) if (c > 0) h -= c * Math.log2(c / nonzero);
    lenHist.fill(0);
    return h + this.extra;
  }
}

// ------------------------------------------------------------------------------- scratch

/** Integers of the three domains (decimal, float32, float32 as shortest decimal), deltas for the period; reused. */
let scratchA = new Float64Array(4096);
let scratchB = new Float64Array(4096);
let scratchD = new Float64Array(4096);
let scratchC = new Float64Array(4096);
let excA = new Int32Array(4096);
let excB = new Int32Array(4096);
let excD = new Int32Array(4096);

function ensureScratch(n: number): void {
  if (scratchA.length >= n) return;
  scratchA = new Float64Array(n);
  scratchB = new Float64Array(n);
  scratchD = new Float64Array(n);
  scratchC = new Float64Array(n);
  excA = new Int32Array(n);
  excB = new Int32Array(n);
  excD = new Int32Array(n);
}

// ------------------------------------------------------------------------------- value candidates

interface IntCandidate {
  d: Domain;
  ints: Float64Array;
  exceptions: Int32Array;
  exceptionCount: number;
  mode: number;
  smooth: boolean;
  q: number;
  bits: number;
}

function exactAt(v: number, k: number): boolean {
  const p = POW10[k];
  const x = Math.round(v * p);
  return Math.abs(x) <= INT_LIMIT && x / p === v;
}

/**
 * ALP's choice of exponent, per chunk: the smallest k such that at most MAX_EXCEPTION_SHARE of
 * the values need more digits (or have none: −0, NaN, ±Inf, 1/3); null when there is none.
 */
function chooseDecimalScale(values: ArrayLike<number>): number | null {
  const n = values.length;
  const hist = new Int32Array(MAX_DECIMALS + 2);
  let k = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (!Number.isFinite(v) || Object.is(v, -0)) {
      hist[MAX_DECIMALS + 1]++;
      continue;
    }
    // Most values of a chunk share the last one's scale: try it first.
    if (!exactAt(v, k) || (k > 0 && exactAt(v, k - 1))) {
      k = 0;
      while (k <= MAX_DECIMALS && !exactAt(v, k)) k++;
    }
    hist[Math.min(k, MAX_DECIMALS + 1)]++;
    if (k > MAX_DECIMALS) k = 0;
  }
  const budget = Math.floor(n * MAX_EXCEPTION_SHARE);
  let above = n;
  for (let s = 0; s <= MAX_DECIMALS; s++) {
    above -= hist[s];
    if (above <= budget) return s;
  }
  return null;
}

/** Fills `ints` with the domain's integers; values that do not fit become exceptions. */
function mapToInts(d: Domain, values: ArrayLike<number>, ints: Float64Array, exc: Int32Array, limit: number, budget: number): number {
  let e = 0;
  let prev = 0;
  for (let i = 0; i < values.length; i++) {
    if (e > budget) return e;
    const v = values[i];
    let ok = Number.isFinite(v);
    let x = 0;
    if (ok) {
      x = d.toInt(v);
      ok = Math.abs(x) <= limit && !Object.is(x, -0) && Object.is(d.fromInt(x), v);
    }
    if (ok) {
      ints[i] = x;
      prev = x;
    } else {
      exc[e++] = i;
      ints[i] = i === 0 ? 0 : prev;
    }
  }
  // The first slot of an exception at 0 takes the next integer, so its residual is zero too.
  if (e > 0 && exc[0] === 0) {
    let j = 0;
    while (j < e && exc[j] === j) j++;
    const fill = j < values.length ? ints[j] : 0;
    for (let i = 0; i < j; i++) ints[i] = fill;
  }
  return e;
}

/** The base a value is predicted from: the previous one, or (smooth) the floor of the mean of the previous four. */
function base(a: Float64Array, i: number, smooth: boolean): number {
  return smooth && i >= 4 ? Math.floor((a[i - 1] + a[i - 2] + a[i - 3] + a[i - 4]) / 4) : a[i - 1];
}

function deltaBits(ints: Float64Array, n: number, smooth: boolean): number {
  const m = new CostMeter();
  for (let i = 1; i < n; i++) m.add(ints[i] - base(ints, i, smooth));
  return m.bits();
}

function delta2Bits(ints: Float64Array, n: number): number {
  const m = new CostMeter();
  if (n > 1) m.add(ints[1] - ints[0]);
  for (let i = 2; i < n; i++) m.add(ints[i] - 2 * ints[i - 1] + ints[i - 2]);
  return m.bits();
}

/** Grid counts of the integers into `counts` (count 0 is the first integer's). */
function gridCounts(d: Domain, ints: Float64Array, n: number, q: number, counts: Float64Array): void {
  const y0 = d.y(ints[0]);
  counts[0] = 0;
  for (let i = 1; i < n; i++) counts[i] = count(d, ints[i], y0, q);
}

function gridBitsOf(d: Domain, ints: Float64Array, n: number, q: number, smooth: boolean): number {
  const counts = scratchC;
  gridCounts(d, ints, n, q, counts);
  const c = deltaBits(counts, n, smooth);
  const r = new CostMeter();
  const y0 = d.y(ints[0]);
  for (let i = 1; i < n; i++) r.add(ints[i] - predict(d, counts[i], y0, q));
  return c + r.bits();
}

/** The best integer layout of a domain's integers (delta, second difference, grid), with its estimated bits. */
/**
 * The grid step that the values sit on: gridStep takes the smallest move between consecutive
 * values, which is several counts when the values never move by one (a noisy 16-bit reading
 * moving 3-20 counts a poll); a fraction q/k of it on which (nearly) every sampled value lands
 * within one unit is the real count.
 */
function finestFit(d: Domain, ints: Float64Array, n: number, q: number): number {
  const y0 = d.y(ints[0]);
  const every = Math.max(1, Math.floor(n / 128));
  for (let k = 1; k <= 16; k++) {
    const qk = q / k;
    let near = 0;
    let tried = 0;
    for (let i = 1; i < n; i += every) {
      tried++;
      if (Math.abs(ints[i] - predict(d, count(d, ints[i], y0, qk), y0, qk)) <= 1) near++;
    }
    if (near >= 0.9 * tried) return qk;
  }
  return q;
}

/** The integer layouts of a domain's integers (delta, smooth, second difference, grid), with their estimated bits, into `out`. */
function layoutsOfDomain(d: Domain, ints: Float64Array, exc: Int32Array, e: number, n: number, out: IntCandidate[]): void {
  const head = 8 * (3 + e * 9);
  const consider = (mode: number, smooth: boolean, q: number, bits: number) => out.push({ d, ints, exceptions: exc, exceptionCount: e, mode, smooth, q, bits: head + bits });
  for (const smooth of [false, true]) {
    if (smooth && n < 8) break;
    consider(VAL_DELTA, smooth, 0, deltaBits(ints, n, smooth));
    if (n > 2) {
      const q = gridStep(d, ints.subarray(0, n));
      if (q !== null) {
        const step = finestFit(d, ints, n, q);
        consider(VAL_GRID, smooth, step, 64 + gridBitsOf(d, ints, n, step, smooth));
      }
    }
  }
  let small = true;
  for (let i = 0; i < n && small; i++) small = Math.abs(ints[i]) <= INT_LIMIT / 4;
  if (small && n > 2) consider(VAL_DELTA2, false, 0, delta2Bits(ints, n));
}

/**
 * The integer layouts that fit the values, best estimate first (empty: only XOR carries them).
 * ALP's decimal first, then float32 as it arrives (an OPC UA Float), else its shortest decimal (a
 * Sparkplug Float as the decoder hands it on), which only long decimals can be.
 */
function valueLayouts(values: ArrayLike<number>): IntCandidate[] {
  const n = values.length;
  ensureScratch(n);
  const out: IntCandidate[] = [];
  const budget = Math.floor(n * MAX_EXCEPTION_SHARE);
  const k = chooseDecimalScale(values);
  if (k !== null) {
    const d = domain(DOMAIN_DECIMAL, k);
    const e = mapToInts(d, values, scratchA, excA, INT_LIMIT, budget);
    if (e <= budget) layoutsOfDomain(d, scratchA, excA, e, n, out);
  }
  const f = domain(DOMAIN_F32);
  const ef = mapToInts(f, values, scratchB, excB, INT_LIMIT, budget);
  if (ef <= budget) layoutsOfDomain(f, scratchB, excB, ef, n, out);
  else if (k === null || k >= 5) {
    const s = domain(DOMAIN_F32_SHORTEST);
    const es = mapToInts(s, values, scratchD, excD, INT_LIMIT, budget);
    if (es <= budget) layoutsOfDomain(s, scratchD, excD, es, n, out);
  }
  return out.sort((a, b) => a.bits - b.bits);
}

/** Layouts tried by coding them (the estimate ignores the coder's contexts); the rest by estimate only. */
const TRIALS = 3;

/** Bytes the range coder makes of `code` on fresh models. */
function trial(code: (e: RangeEncoder) => void): number {
  models.reset();
  const e = rc.reset();
  code(e);
  return e.finish().length;
}

function chooseValues(values: ArrayLike<number>): IntCandidate | null {
  const layouts = valueLayouts(values);
  if (layouts.length <= 1) return layouts[0] ?? null;
  const n = values.length;
  // Layouts whose estimates are close are coded to choose; a clear winner is taken as it is.
  const close = layouts.filter((c, i) => i < TRIALS && c.bits <= layouts[0].bits * CLOSE);
  if (close.length === 1) return close[0];
  let best: IntCandidate | null = null;
  let bestBytes = Infinity;
  for (const c of close) {
    const bytes = trial((e) => encodeInts(e, c, n)) + c.exceptionCount * 9 + (c.mode === VAL_GRID ? 8 : 0);
    if (bytes < bestBytes) {
      best = c;
      bestBytes = bytes;
    }
  }
  return best;
}

/** Estimates within this factor of the best are tried by coding them. */
const CLOSE = 1.1;

// ------------------------------------------------------------------------------- timestamps

function tsInts(ts: ArrayLike<number>): boolean {
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i];
    if (!Number.isInteger(t) || Math.abs(t) > TS_LIMIT) return false;
  }
  return true;
}

/** The usual delta (the median): a poll's period; 0 with fewer than two samples. */
function period(ts: ArrayLike<number>): number {
  const n = ts.length;
  if (n < 2) return 0;
  const d = scratchC.subarray(0, n - 1);
  for (let i = 1; i < n; i++) d[i - 1] = ts[i] - ts[i - 1];
  d.sort();
  return d[(n - 1) >> 1];
}

// ------------------------------------------------------------------------------- models

/** The models of one chunk, reset before each (a chunk decodes on its own). */
class Models {
  readonly ts = new IntModel();
  readonly jitter = new IntModel();
  readonly val = new IntModel();
  readonly res = new IntModel();
  readonly xorZero = flagModel(2);
  readonly lead = new SymbolModel(6);
  readonly trail = new SymbolModel(6);
  reset(): void {
    this.ts.reset();
    this.jitter.reset();
    this.val.reset();
    this.res.reset();
    this.xorZero.fill(FLAG_INIT);
    this.lead.reset();
    this.trail.reset();
  }
}

const models = new Models();
const rc = new RangeEncoder(4096);
const head = new Bytes();

// ------------------------------------------------------------------------------- encode

/** Encodes a chunk in format 3 (the caller checks lengths; any doubles, NaN payloads included). */
export function encodeV3(ts: ArrayLike<number>, values: ArrayLike<number>, forceXor = false): Uint8Array {
  const n = ts.length;
  head.pos = 0;
  head.byte(CHUNK_FORMAT_V3);
  head.uvar(n);
  if (n === 0) return head.buf.slice(0, head.pos);
  ensureScratch(n);
  const intTs = tsInts(ts);
  let tsMode = TS_RAW;
  let p = 0;
  let j0 = 0;
  if (intTs) {
    p = period(ts);
    tsMode = TS_PERIOD;
    if (n > 2) tsMode = chooseTs(ts, p, (j) => (j0 = j));
  }
  const cand = forceXor ? null : chooseValues(values);
  const valMode = cand ? cand.mode : VAL_XOR;
  head.byte(checkByte(ts, values));
  head.byte(tsMode | (valMode << 2) | (cand?.smooth ? 32 : 0));
  if (tsMode === TS_RAW) for (let i = 0; i < n; i++) head.f64(ts[i]);
  else {
    head.svar(ts[0]);
    head.svar(p);
    if (tsMode === TS_GRID) head.svar(j0);
  }
  if (cand) {
    head.byte(cand.d.id);
    if (cand.d.id === DOMAIN_DECIMAL) head.byte(cand.d.k);
    if (cand.mode === VAL_GRID) head.f64(cand.q);
    head.svar(cand.ints[0]);
    head.uvar(cand.exceptionCount);
    let last = 0;
    for (let j = 0; j < cand.exceptionCount; j++) {
      const i = cand.exceptions[j];
      head.uvar(i - last);
      last = i;
      F64[0] = values[i];
      head.f64bits(U32[1], U32[0]);
    }
  }
  models.reset();
  const e = rc.reset();
  if (tsMode === TS_GRID) encodeTsGrid(e, ts, p, j0);
  else if (tsMode !== TS_RAW) encodeTs(e, ts, p, tsMode === TS_DOD);
  if (cand) encodeInts(e, cand, n);
  else encodeXor(e, values);
  const body = e.finish();
  const out = new Uint8Array(head.pos + body.length);
  out.set(head.buf.subarray(0, head.pos), 0);
  out.set(body, head.pos);
  return out;
}

/** The timestamp layout: by estimate, or by coding the ones whose estimates are close. */
function chooseTs(ts: ArrayLike<number>, p: number, setJitter: (j: number) => void): number {
  const j = p > 0 ? leastJitter(ts, p) : 0;
  const est = [
    { mode: TS_PERIOD, bits: tsModeBits(ts, p, false) },
    { mode: TS_DOD, bits: tsModeBits(ts, p, true) },
    ...(p > 0 ? [{ mode: TS_GRID, bits: tsGridBits(ts, p, j) }] : []),
  ].sort((a, b) => a.bits - b.bits);
  const close = est.filter((c) => c.bits <= est[0].bits * CLOSE + 8);
  let mode = est[0].mode;
  if (close.length > 1) {
    let best = Infinity;
    for (const c of close) {
      const bytes = trial((e) => (c.mode === TS_GRID ? encodeTsGrid(e, ts, p, j) : encodeTs(e, ts, p, c.mode === TS_DOD)));
      if (bytes < best) {
        best = bytes;
        mode = c.mode;
      }
    }
  }
  if (mode === TS_GRID) setJitter(j);
  return mode;
}

function tsModeBits(ts: ArrayLike<number>, p: number, dod: boolean): number {
  const m = new CostMeter();
  let prev = p;
  for (let i = 1; i < ts.length; i++) {
    const d = ts[i] - ts[i - 1];
    m.add(d - prev);
    if (dod) prev = d;
  }
  return m.bits();
}

function tsGridBits(ts: ArrayLike<number>, p: number, j0: number): number {
  const k = new CostMeter();
  let prev = 0;
  for (let i = 1; i < ts.length; i++) {
    const t = tick(ts[i], ts[0], p);
    k.add(t - prev - 1);
    prev = t;
  }
  const ticks = k.bits();
  const j = new CostMeter();
  for (let i = 1; i < ts.length; i++) j.add(ts[i] - (ts[0] + tick(ts[i], ts[0], p) * p) - j0);
  return ticks + j.bits();
}

/** Ticks of the clock grid from t0 (P > 0). */
function tick(t: number, t0: number, p: number): number {
  return Math.round((t - t0) / p);
}

/**
 * The jitter base of samples 1.. against the clock grid from t0: nearly all jitters coded are ≥ 0
 * (a timer's delay is). The 2nd percentile, not the least: one poll late by most of a period
 * rounds to the next tick with a jitter of −P/2, and would shift every other one by as much.
 */
function leastJitter(ts: ArrayLike<number>, p: number): number {
  const n = ts.length;
  if (n < 2) return 0;
  const j = scratchC.subarray(0, n - 1);
  for (let i = 1; i < n; i++) j[i - 1] = ts[i] - (ts[0] + tick(ts[i], ts[0], p) * p);
  j.sort();
  return j[Math.floor(0.02 * (n - 2))];
}

function encodeTsGrid(e: RangeEncoder, ts: ArrayLike<number>, p: number, j0: number): void {
  const t0 = ts[0];
  let prev = 0;
  for (let i = 1; i < ts.length; i++) {
    const k = tick(ts[i], t0, p);
    models.ts.encode(e, k - prev - 1);
    models.jitter.encode(e, ts[i] - (t0 + k * p) - j0);
    prev = k;
  }
}

function decodeTsGrid(dec: RangeDecoder, ts: Float64Array, t0: number, p: number, j0: number): void {
  let k = 0;
  ts[0] = t0;
  for (let i = 1; i < ts.length; i++) {
    k += models.ts.decode(dec) + 1;
    ts[i] = t0 + k * p + j0 + models.jitter.decode(dec);
  }
}

function encodeTs(e: RangeEncoder, ts: ArrayLike<number>, p: number, dod: boolean): void {
  const m = models.ts;
  let prev = p;
  for (let i = 1; i < ts.length; i++) {
    const d = ts[i] - ts[i - 1];
    m.encode(e, d - prev);
    if (dod) prev = d;
  }
}

function encodeInts(e: RangeEncoder, c: IntCandidate, n: number): void {
  const ints = c.ints;
  const val = models.val;
  if (c.mode === VAL_DELTA) {
    for (let i = 1; i < n; i++) val.encode(e, ints[i] - base(ints, i, c.smooth));
  } else if (c.mode === VAL_DELTA2) {
    if (n > 1) val.encode(e, ints[1] - ints[0]);
    for (let i = 2; i < n; i++) val.encode(e, ints[i] - 2 * ints[i - 1] + ints[i - 2]);
  } else {
    const d = c.d;
    const y0 = d.y(ints[0]);
    const counts = scratchC;
    gridCounts(d, ints, n, c.q, counts);
    for (let i = 1; i < n; i++) {
      val.encode(e, counts[i] - base(counts, i, c.smooth));
      models.res.encode(e, ints[i] - predict(d, counts[i], y0, c.q));
    }
  }
}

function encodeXor(e: RangeEncoder, values: ArrayLike<number>): void {
  let ph = 0;
  let pl = 0;
  let zctx = 0;
  for (let i = 0; i < values.length; i++) {
    F64[0] = values[i];
    const hi = U32[1];
    const lo = U32[0];
    const xh = (hi ^ ph) >>> 0;
    const xl = (lo ^ pl) >>> 0;
    ph = hi;
    pl = lo;
    if (xh === 0 && xl === 0) {
      e.bit(models.xorZero, zctx, 0);
      zctx = 0;
      continue;
    }
    e.bit(models.xorZero, zctx, 1);
    zctx = 1;
    const lead = xh !== 0 ? Math.clz32(xh) : 32 + Math.clz32(xl);
    const trail = xl !== 0 ? 31 - Math.clz32(xl & -xl) : 32 + 31 - Math.clz32(xh & -xh);
    models.lead.encode(e, lead);
    models.trail.encode(e, trail);
    // Bits strictly between the outer ones: positions trail+1 .. 62−lead.
    writeBits(e, xh, xl, trail + 1, 62 - lead - trail);
  }
}

/** Writes `count` bits of the 64-bit word (hi, lo) from bit `from` upwards, most significant first. */
function writeBits(e: RangeEncoder, hi: number, lo: number, from: number, count: number): void {
  while (count > 0) {
    const take = Math.min(count, 24);
    const at = from + count - take;
    e.direct(bitsAt(hi, lo, at, take), take);
    count -= take;
  }
}

function bitsAt(hi: number, lo: number, at: number, take: number): number {
  const mask = (1 << take) - 1;
  if (at >= 32) return (hi >>> (at - 32)) & mask;
  if (at + take <= 32) return (lo >>> at) & mask;
  return ((lo >>> at) | (hi << (32 - at))) & mask;
}

// ------------------------------------------------------------------------------- decode

/** Decodes a format-3 chunk into `ts` and `values` (length n, read first with readCount). */
export function decodeV3(chunk: Uint8Array, arrays: (n: number) => { ts: Float64Array; values: Float64Array }): { ts: Float64Array; values: Float64Array } {
  const r = new Reader(chunk, 0);
  if (r.byte() !== CHUNK_FORMAT_V3) throw new ChunkFormatErrorV3('not a format 3 chunk');
  const n = r.uvar();
  if (n > 1 << 24) throw new ChunkFormatErrorV3(`implausible sample count ${n}`);
  const out = arrays(n);
  if (n === 0) return out;
  const check = r.byte();
  const flags = r.byte();
  const tsMode = flags & 3;
  const valMode = (flags >> 2) & 7;
  if (valMode > VAL_XOR || flags >> 6 !== 0) throw new ChunkFormatErrorV3(`unknown layout flags ${flags}`);
  const { ts, values } = out;
  let t0 = 0;
  let p = 0;
  let j0 = 0;
  if (tsMode === TS_RAW) for (let i = 0; i < n; i++) r.f64into(ts, i);
  else {
    t0 = r.svar();
    p = r.svar();
    if (tsMode === TS_GRID) {
      if (!(p > 0)) throw new ChunkFormatErrorV3(`bad clock period ${p}`);
      j0 = r.svar();
    }
  }
  let d: Domain | null = null;
  let q = 0;
  let i0 = 0;
  let excCount = 0;
  let excAt = 0;
  if (valMode !== VAL_XOR) {
    const id = r.byte();
    if (id !== DOMAIN_DECIMAL && id !== DOMAIN_F32 && id !== DOMAIN_F32_SHORTEST) throw new ChunkFormatErrorV3(`unknown value domain ${id}`);
    let k = 0;
    if (id === DOMAIN_DECIMAL) {
      k = r.byte();
      if (k > MAX_DECIMALS) throw new ChunkFormatErrorV3(`bad decimal scale ${k}`);
    }
    d = domain(id as DomainId, k);
    if (valMode === VAL_GRID) {
      r.f64into(F64, 0);
      q = F64[0];
      if (!(Number.isFinite(q) && q > 0)) throw new ChunkFormatErrorV3('bad grid step');
    }
    i0 = r.svar();
    excCount = r.uvar();
    if (excCount > n) throw new ChunkFormatErrorV3('more exceptions than samples');
    excAt = r.pos;
    // Skip the exceptions for now: they are applied after the integers are decoded.
    for (let j = 0; j < excCount; j++) {
      r.uvar();
      r.pos += 8;
    }
    if (r.pos > chunk.length) throw new ChunkFormatErrorV3('chunk ends early');
  }
  const dec = new RangeDecoder(chunk, r.pos);
  models.reset();
  if (tsMode === TS_GRID) decodeTsGrid(dec, ts, t0, p, j0);
  else if (tsMode !== TS_RAW) decodeTs(dec, ts, t0, p, tsMode === TS_DOD);
  if (d === null) decodeXor(dec, values);
  else {
    decodeInts(dec, d, valMode, (flags & 32) !== 0, q, i0, values);
    applyExceptions(new Reader(chunk, excAt), excCount, values);
  }
  if (checkByte(ts, values) !== check) throw new ChunkFormatErrorV3('the chunk does not match its check byte (damaged or cut short)');
  return out;
}

function decodeTs(dec: RangeDecoder, ts: Float64Array, t0: number, p: number, dod: boolean): void {
  const m = models.ts;
  let prev = p;
  let t = t0;
  ts[0] = t0;
  for (let i = 1; i < ts.length; i++) {
    const d = prev + m.decode(dec);
    t += d;
    ts[i] = t;
    if (dod) prev = d;
  }
}

let decodeCounts = new Float64Array(4096);

function decodeInts(dec: RangeDecoder, d: Domain, mode: number, smooth: boolean, q: number, i0: number, values: Float64Array): void {
  const n = values.length;
  const val = models.val;
  values[0] = i0;
  if (mode === VAL_DELTA) {
    for (let i = 1; i < n; i++) values[i] = base(values, i, smooth) + val.decode(dec);
  } else if (mode === VAL_DELTA2) {
    if (n > 1) values[1] = i0 + val.decode(dec);
    for (let i = 2; i < n; i++) values[i] = 2 * values[i - 1] - values[i - 2] + val.decode(dec);
  } else {
    if (decodeCounts.length < n) decodeCounts = new Float64Array(n);
    const counts = decodeCounts;
    const y0 = d.y(i0);
    counts[0] = 0;
    for (let i = 1; i < n; i++) {
      counts[i] = base(counts, i, smooth) + val.decode(dec);
      values[i] = predict(d, counts[i], y0, q) + models.res.decode(dec);
    }
  }
  if (d.id === DOMAIN_DECIMAL) {
    const p = POW10[d.k];
    if (p !== 1) for (let i = 0; i < n; i++) values[i] = values[i] / p;
  } else for (let i = 0; i < n; i++) values[i] = d.fromInt(values[i]);
}

function applyExceptions(r: Reader, count: number, values: Float64Array): void {
  let at = 0;
  for (let j = 0; j < count; j++) {
    at += r.uvar();
    if (at >= values.length) throw new ChunkFormatErrorV3('exception beyond the chunk');
    r.f64into(values, at);
  }
}

function decodeXor(dec: RangeDecoder, values: Float64Array): void {
  let hi = 0;
  let lo = 0;
  let zctx = 0;
  for (let i = 0; i < values.length; i++) {
    if (dec.bit(models.xorZero, zctx) === 1) {
      zctx = 1;
      const lead = models.lead.decode(dec);
      const trail = models.trail.decode(dec);
      const inner = 62 - lead - trail;
      if (inner < -1) throw new ChunkFormatErrorV3('bad XOR window');
      // The XOR: a one at `trail`, the inner bits above it, a one at 63 − lead (the same bit when inner is −1).
      let xh = 0;
      let xl = 0;
      const set = (pos: number, v: number, width: number) => {
        // ORs `width` bits of v in at pos.
        if (pos >= 32) xh |= v << (pos - 32);
        else {
          xl |= v << pos;
          if (pos + width > 32) xh |= v >>> (32 - pos);
        }
      };
      set(trail, 1, 1);
      set(63 - lead, 1, 1);
      let left = inner;
      while (left > 0) {
        const take = Math.min(left, 24);
        const at = trail + 1 + left - take;
        set(at, dec.direct(take), take);
        left -= take;
      }
      hi = (hi ^ xh) >>> 0;
      lo = (lo ^ xl) >>> 0;
    } else zctx = 0;
    U32[1] = hi;
    U32[0] = lo;
    values[i] = F64[0];
  }
}

/** 8 bits of a multiplicative hash of the samples' bits. */
function checkByte(ts: ArrayLike<number>, values: ArrayLike<number>): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < ts.length; i++) {
    F64[0] = ts[i];
    h = Math.imul(h ^ U32[0], 0x9e3779b1) ^ U32[1];
    F64[0] = values[i];
    h = Math.imul(h ^ U32[0], 0x85ebca6b) ^ U32[1];
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  return (h ^ (h >>> 15) ^ (h >>> 24)) & 255;
}

/** Sample count of a format-3 chunk from its header. */
export function countV3(chunk: Uint8Array): number {
  const r = new Reader(chunk, 1);
  return r.uvar();
}
