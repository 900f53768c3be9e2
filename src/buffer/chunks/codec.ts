import { brotliCompressSync, brotliDecompressSync, constants as zlibConstants, deflateRawSync, inflateRawSync } from 'node:zlib';
import { CHUNK_FORMAT_V3, ChunkFormatErrorV3, countV3, decodeV3, encodeV3 } from './codec-v3.js';
import { DOMAIN_DECIMAL, DOMAIN_F32, DOMAIN_F32_SHORTEST, count, deltaBytes, domain, fits, gridBytes, gridStep, predict, type Domain, type DomainId } from './value-domains.js';
import { VarintWriter } from './varint-writer.js';

/**
 * The chunk codec: one variable's samples (epoch-ms timestamps and doubles) as a compact, lossless
 * byte string. Pure functions, no I/O. New chunks are format 3 (codec-v3.ts: adaptive range-coded
 * residuals); formats 1 and 2 (the layouts below, varints and deflate) stay readable, and
 * `encodeChunk(..., { format: 2 })` still writes them (benchmarks, tests).
 *
 * INVARIANTS (test/buffer/chunk-codec.test.ts and chunk-codec-v3.test.ts check them, including
 * randomized round trips):
 *
 *  C1  Lossless: `decodeChunk(encodeChunk(ts, v))` returns every timestamp and every double
 *      bit-exact (−0, subnormals, ±1e308, integers beyond 2^53; in format 3 also NaN with its
 *      payload and sign, and ±Inf, though the buffer does not store them), in the order given.
 *  C2  Any order of timestamps: irregular, repeated and backwards timestamps encode (delta-of-delta
 *      is signed); non-integer or huge timestamps fall back to 8-byte doubles.
 *  C3  `encodeChunk` decodes what it wrote before returning it and falls back to a layout that
 *      carries any bits (format 3's XOR; format 2's raw doubles) when that check fails, so a bug in
 *      a clever layout can cost bytes, never data.
 *  C4  The first byte is the format version; a reader refuses versions it does not know instead
 *      of guessing (format 3 also carries a check byte: a damaged or cut chunk is refused, not
 *      decoded into other samples). The version lives in the blob, so a new format needs no table
 *      migration: files hold chunks of every version side by side.
 *
 * Formats 1 and 2. Layout (all integers are LEB128 varints; signed ones zigzag-mapped, with arithmetic rather than
 * 32-bit bit operations so that values up to 2^53 survive):
 *
 *   byte 0   format version (1; 2 when the value layout is 3)
 *   byte 1   flags: bits 0-1 compressor (0 none, 1 raw deflate, 2 brotli),
 *                   bits 2-3 value layout (0 decimal, 1 XOR, 2 raw doubles, 3 grid),
 *                   bit 4   timestamp layout (0 delta-of-delta, 1 raw doubles)
 *   varint   sample count n
 *   body     (compressed as a whole when the compressor is not 0)
 *     timestamps  dod: zz(t0), zz(t1 − t0), zz((t_i − t_{i−1}) − (t_{i−1} − t_{i−2}))…
 *                 raw: 8n bytes, little-endian doubles
 *     values      decimal: byte k, zz(x0), zz(x_i − x_{i−1})… where x = v·10^k is an integer
 *                          with x / 10^k === v bit-exact (a sensor's resolution, not 64 bits)
 *                 XOR:     Gorilla's XOR of consecutive IEEE-754 patterns (Pelkonen et al.,
 *                          VLDB 2015, §4.1.2), for values with no short decimal form
 *                 raw:     8n bytes, little-endian doubles
 *                 grid:    byte domain (value-domains.ts: 0 decimal, 1 float32, 2 float32 as its
 *                          shortest decimal), byte k (decimal only), byte mode, then the values as
 *                          integers I of that domain:
 *                          mode 0: zz(I0), zz(I_i − I_{i−1})…
 *                          mode 1: f64 q, zz(I0), zz(c_i − c_{i−1})… for i ≥ 1, then zz(r_i)… where
 *                          c_i = round((y(I_i) − y(I0)) / q) is the sample's count on the grid of
 *                          step q and r_i = I_i − nearest(y(I0) + c_i·q) the device's rounding
 *
 * The encoder estimates each applicable value layout's size and keeps the smallest (XOR only when
 * no integer domain fits, or when it is smaller).
 *
 * The general compressor runs over the already small varint streams; it pays off on the bytes'
 * skewed distribution (most deltas share a few small values), and is kept only when smaller.
 */

export const CHUNK_FORMAT_VERSION = 1;
/** Version of chunks in the grid layout (layout 3); readers know both. */
export const CHUNK_FORMAT_VERSION_GRID = 2;

export type Compressor = 'none' | 'deflate' | 'brotli';

const COMP = { none: 0, deflate: 1, brotli: 2 } as const;
const VAL_DECIMAL = 0;
const VAL_XOR = 1;
const VAL_RAW = 2;
const VAL_GRID = 3;
const TS_RAW_FLAG = 1 << 4;

/** Largest |integer| the decimal and timestamp layouts accept: deltas then stay below 2^53. */
const SAFE_INT = 2 ** 51;
const MAX_DECIMALS = 17;
const POW10 = Array.from({ length: MAX_DECIMALS + 1 }, (_, k) => 10 ** k);

export interface DecodedChunk {
  ts: Float64Array;
  values: Float64Array;
}

export interface EncodeOptions {
  /** 3 (default): the range-coded format (codec-v3.ts); 2: the varint layouts below, for comparisons and tests. */
  format?: 2 | 3;
  compressor?: Compressor;
  /** Skip the C3 self-check (only for the codec's own tests of the raw fallback). */
  verify?: boolean;
  /** Force a value layout (tests). */
  valueLayout?: 'decimal' | 'xor' | 'raw' | 'grid';
}

// ------------------------------------------------------------------------------- byte writer

class ByteWriter extends VarintWriter {
  f64(v: number): void {
    this.ensure(8);
    new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8).setFloat64(0, v, true);
    this.pos += 8;
  }
  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }
  result(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }
}

class ByteReader {
  pos = 0;
  constructor(private readonly buf: Uint8Array) {}
  byte(): number {
    if (this.pos >= this.buf.length) throw new ChunkFormatError('chunk ends early');
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
      if (mul > 2 ** 56) throw new ChunkFormatError('varint too long');
    }
  }
  svar(): number {
    const z = this.uvar();
    return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
  }
  f64(): number {
    if (this.pos + 8 > this.buf.length) throw new ChunkFormatError('chunk ends early');
    const v = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8).getFloat64(0, true);
    this.pos += 8;
    return v;
  }
  get rest(): Uint8Array {
    return this.buf.subarray(this.pos);
  }
}

export class ChunkFormatError extends Error {}

// ------------------------------------------------------------------------------- bit streams (XOR layout)

class BitWriter {
  private readonly w = new ByteWriter(64);
  private cur = 0;
  private nbits = 0;
  /** Starts over, keeping the buffer (one writer serves every chunk: see bodyWriter). */
  reset(): this {
    this.w.pos = 0;
    this.cur = 0;
    this.nbits = 0;
    return this;
  }
  /** Writes the low `n` bits of `v` (0 ≤ n ≤ 32), most significant first. */
  bits(v: number, n: number): void {
    while (n > 0) {
      const take = Math.min(8 - this.nbits, n);
      const part = (v >>> (n - take)) & ((1 << take) - 1);
      this.cur = (this.cur << take) | part;
      this.nbits += take;
      n -= take;
      if (this.nbits === 8) {
        this.w.byte(this.cur);
        this.cur = 0;
        this.nbits = 0;
      }
    }
  }
  finish(): Uint8Array {
    if (this.nbits > 0) this.w.byte(this.cur << (8 - this.nbits));
    this.nbits = 0;
    return this.w.result();
  }
}

class BitReader {
  private pos = 0;
  private bit = 0;
  constructor(private readonly buf: Uint8Array) {}
  bits(n: number): number {
    let v = 0;
    while (n > 0) {
      if (this.pos >= this.buf.length) throw new ChunkFormatError('XOR stream ends early');
      const avail = 8 - this.bit;
      const take = Math.min(avail, n);
      const part = (this.buf[this.pos] >>> (avail - take)) & ((1 << take) - 1);
      v = v * 2 ** take + part;
      this.bit += take;
      n -= take;
      if (this.bit === 8) {
        this.bit = 0;
        this.pos++;
      }
    }
    return v >>> 0;
  }
}

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
// little-endian hosts: u32[1] is the high word. Node runs on little-endian targets only.

function ctz32(x: number): number {
  return x === 0 ? 32 : 31 - Math.clz32(x & -x);
}

const xorWriter = new BitWriter();

/** Returns a view of xorWriter's buffer, valid until the next call. */
function encodeXor(values: ArrayLike<number>): Uint8Array {
  const out = xorWriter.reset();
  let prevHi = 0;
  let prevLo = 0;
  let prevLead = -1;
  let prevTrail = 0;
  for (let i = 0; i < values.length; i++) {
    f64[0] = values[i];
    const hi = u32[1];
    const lo = u32[0];
    if (i === 0) {
      out.bits(hi, 32);
      out.bits(lo, 32);
    } else {
      const xh = (hi ^ prevHi) >>> 0;
      const xl = (lo ^ prevLo) >>> 0;
      if (xh === 0 && xl === 0) {
        out.bits(0, 1);
      } else {
        const lead = xh !== 0 ? Math.clz32(xh) : 32 + Math.clz32(xl);
        const trail = xl !== 0 ? ctz32(xl) : 32 + ctz32(xh);
        out.bits(1, 1);
        let useLead = lead;
        let useTrail = trail;
        if (prevLead >= 0 && lead >= prevLead && trail >= prevTrail) {
          out.bits(0, 1);
          useLead = prevLead;
          useTrail = prevTrail;
        } else {
          out.bits(1, 1);
          out.bits(lead, 6);
          out.bits(64 - lead - trail - 1, 6);
          prevLead = lead;
          prevTrail = trail;
        }
        writeMeaningful(out, xh, xl, useTrail, 64 - useLead - useTrail);
      }
    }
    prevHi = hi;
    prevLo = lo;
  }
  return out.finish();
}

/** Writes bits [t, t+m) of the 64-bit word (hi, lo). */
function writeMeaningful(out: BitWriter, hi: number, lo: number, t: number, m: number): void {
  let sh: number;
  let sl: number;
  if (t === 0) {
    sh = hi;
    sl = lo;
  } else if (t >= 32) {
    sh = 0;
    sl = hi >>> (t - 32);
  } else {
    sl = ((lo >>> t) | (hi << (32 - t))) >>> 0;
    sh = hi >>> t;
  }
  if (m > 32) {
    out.bits(sh, m - 32);
    out.bits(sl, 32);
  } else {
    out.bits(m === 32 ? sl : sl & ((2 ** m) - 1), m);
  }
}

function decodeXor(buf: Uint8Array, n: number, into: Float64Array): void {
  const r = new BitReader(buf);
  let hi = 0;
  let lo = 0;
  let lead = 0;
  let trail = 0;
  for (let i = 0; i < n; i++) {
    if (i === 0) {
      hi = r.bits(32);
      lo = r.bits(32);
    } else if (r.bits(1) === 1) {
      if (r.bits(1) === 1) {
        lead = r.bits(6);
        trail = 64 - lead - (r.bits(6) + 1);
        if (trail < 0) throw new ChunkFormatError('bad XOR window');
      }
      const m = 64 - lead - trail;
      let sh = 0;
      let sl: number;
      if (m > 32) {
        sh = r.bits(m - 32);
        sl = r.bits(32);
      } else sl = r.bits(m);
      // shift (sh, sl) left by trail
      let xh: number;
      let xl: number;
      if (trail === 0) {
        xh = sh;
        xl = sl;
      } else if (trail >= 32) {
        xh = (sl << (trail - 32)) >>> 0;
        xl = 0;
      } else {
        xh = ((sh << trail) | (sl >>> (32 - trail))) >>> 0;
        xl = (sl << trail) >>> 0;
      }
      hi = (hi ^ xh) >>> 0;
      lo = (lo ^ xl) >>> 0;
    }
    u32[1] = hi;
    u32[0] = lo;
    into[i] = f64[0];
  }
}

// ------------------------------------------------------------------------------- decimal layout

/**
 * The smallest k such that every value times 10^k is an integer x with |x| ≤ 2^51 and
 * x / 10^k === v bit-exact; null when there is none (−0, 1/3, 1e300, …).
 */
export function decimalScale(values: ArrayLike<number>): number | null {
  let k = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (Object.is(v, -0)) return null; // an integer cannot carry the sign of zero
    while (!exactAt(v, k)) {
      k++;
      if (k > MAX_DECIMALS) return null;
    }
  }
  // A larger k found later can, in rare rounding cases, break an earlier value: check all once.
  for (; k <= MAX_DECIMALS; k++) {
    let ok = true;
    for (let i = 0; i < values.length && ok; i++) ok = exactAt(values[i], k);
    if (ok) return k;
  }
  return null;
}

function exactAt(v: number, k: number): boolean {
  const p = POW10[k];
  const x = Math.round(v * p);
  return Math.abs(x) <= SAFE_INT && x / p === v;
}

// ------------------------------------------------------------------------------- encode / decode

function timestampsFitDod(ts: ArrayLike<number>): boolean {
  for (let i = 0; i < ts.length; i++) {
    const t = ts[i];
    if (!Number.isInteger(t) || Math.abs(t) > SAFE_INT / 4) return false;
  }
  return true;
}

// ------------------------------------------------------------------------------- grid layout

/** Integers of a chunk's values in a domain (two candidates at a time), reused like bodyWriter. */
let intsA = new Float64Array(4096);
let intsB = new Float64Array(4096);

function scratch(which: 'a' | 'b', n: number): Float64Array {
  if (intsA.length < n) {
    intsA = new Float64Array(n);
    intsB = new Float64Array(n);
  }
  return (which === 'a' ? intsA : intsB).subarray(0, n);
}

function scaledInto(values: ArrayLike<number>, k: number): Float64Array {
  const out = scratch('a', values.length);
  const p = POW10[k];
  for (let i = 0; i < values.length; i++) out[i] = Math.round(values[i] * p);
  return out;
}

interface GridChoice {
  d: Domain;
  ints: Float64Array;
  /** Grid step, or null for plain deltas of the integers. */
  q: number | null;
  bytes: number;
}

/**
 * The smallest grid layout that fits the values, or null: the decimal integers on a grid (an ADC
 * count times a float span, printed to 15 digits), the float32 bit patterns as ordered integers,
 * plainly or on a grid (a count times a float factor, sent as Float), or the same for the float32s'
 * shortest decimals (what the Sparkplug decoder hands on).
 */
function bestGrid(values: ArrayLike<number>, k: number | null): GridChoice | null {
  const n = values.length;
  let best: GridChoice | null = null;
  const consider = (d: Domain, ints: Float64Array, allowPlain: boolean) => {
    const head = d.id === DOMAIN_DECIMAL ? 3 : 2;
    if (allowPlain) {
      const bytes = head + deltaBytes(ints);
      if (!best || bytes < best.bytes) best = { d, ints, q: null, bytes };
    }
    const q = gridStep(d, ints);
    if (q !== null) {
      const bytes = head + 8 + gridBytes(d, ints, q);
      if (!best || bytes < best.bytes) best = { d, ints, q, bytes };
    }
  };
  if (k !== null) consider(domain(DOMAIN_DECIMAL, k), scaledInto(values, k), false);
  const f = scratch('b', n);
  if (fits(domain(DOMAIN_F32), values, f)) consider(domain(DOMAIN_F32), f, true);
  else if (fits(domain(DOMAIN_F32_SHORTEST), values, f)) consider(domain(DOMAIN_F32_SHORTEST), f, true);
  if (best !== null && k === null) {
    // Where only XOR applied before, the grid layout is kept only when it is smaller.
    const xor = encodeXor(values).length;
    if (xor <= (best as GridChoice).bytes) return null;
  }
  return best;
}

function writeGrid(w: ByteWriter, g: GridChoice): void {
  const { d, ints, q } = g;
  w.byte(d.id);
  if (d.id === DOMAIN_DECIMAL) w.byte(d.k);
  w.byte(q === null ? 0 : 1);
  if (q === null) {
    let prev = 0;
    for (let i = 0; i < ints.length; i++) {
      w.svar(ints[i] - prev);
      prev = ints[i];
    }
    return;
  }
  w.f64(q);
  const y0 = d.y(ints[0]);
  w.svar(ints[0]);
  // Counts first, residuals after: two streams of small, similar numbers for the compressor.
  const counts = scratch(ints.buffer === intsA.buffer ? 'b' : 'a', ints.length);
  let prevC = 0;
  for (let i = 1; i < ints.length; i++) {
    const c = count(d, ints[i], y0, q);
    counts[i] = c;
    w.svar(c - prevC);
    prevC = c;
  }
  for (let i = 1; i < ints.length; i++) w.svar(ints[i] - predict(d, counts[i], y0, q));
}

function readGrid(body: Uint8Array, r: ByteReader, values: Float64Array): void {
  const id = r.byte();
  if (id !== DOMAIN_DECIMAL && id !== DOMAIN_F32 && id !== DOMAIN_F32_SHORTEST) throw new ChunkFormatError(`unknown value domain ${id}`);
  let k = 0;
  if (id === DOMAIN_DECIMAL) {
    k = r.byte();
    if (k > MAX_DECIMALS) throw new ChunkFormatError(`bad decimal scale ${k}`);
  }
  const d = domain(id as DomainId, k);
  const mode = r.byte();
  const n = values.length;
  if (mode === 0) {
    r.pos = readSvarDeltas(body, r.pos, values, 0, 0, false);
  } else if (mode === 1) {
    const q = r.f64();
    if (!(Number.isFinite(q) && q > 0)) throw new ChunkFormatError('bad grid step');
    const i0 = r.svar();
    values[0] = 0;
    r.pos = readSvarDeltas(body, r.pos, values, 1, 0, false); // the counts
    const y0 = d.y(i0);
    values[0] = i0;
    for (let i = 1; i < n; i++) values[i] = predict(d, values[i], y0, q) + r.svar();
  } else throw new ChunkFormatError(`unknown grid mode ${mode}`);
  for (let i = 0; i < n; i++) values[i] = d.fromInt(values[i]);
}

/**
 * Scratch of encodeChunk, reused from call to call (the codec is synchronous, so one call uses it at
 * a time): the uncompressed body, and the samples decoded back for the C3 check. A chunk copies
 * what it keeps, so nothing outside a call sees them. Allocating them per chunk cost several
 * ArrayBuffers a chunk, freed only by the next scavenge: V8 lets young ArrayBuffers reach ~32 MB
 * before it forces one, and that high-water mark stayed in the malloc heap as RSS.
 */
const bodyWriter = new ByteWriter(4096);
const checkScratch: DecodedChunk = { ts: new Float64Array(0), values: new Float64Array(0) };

function encodeBody(ts: ArrayLike<number>, values: ArrayLike<number>, layout: EncodeOptions['valueLayout']): { body: Uint8Array; valueLayout: number; tsRaw: boolean } {
  const n = ts.length;
  const w = bodyWriter;
  w.pos = 0;
  const tsRaw = !timestampsFitDod(ts) || layout === 'raw';
  if (tsRaw) {
    for (let i = 0; i < n; i++) w.f64(ts[i]);
  } else if (n > 0) {
    w.svar(ts[0]);
    if (n > 1) {
      let prevDelta = ts[1] - ts[0];
      w.svar(prevDelta);
      for (let i = 2; i < n; i++) {
        const d = ts[i] - ts[i - 1];
        w.svar(d - prevDelta);
        prevDelta = d;
      }
    }
  }
  let valueLayout = VAL_RAW;
  const k = layout === undefined || layout === 'decimal' || layout === 'grid' ? decimalScale(values) : null;
  const grid = n > 0 && (layout === undefined || layout === 'grid') ? bestGrid(values, k) : null;
  const decimalBytes = k !== null && layout !== 'grid' ? deltaBytes(scaledInto(values, k)) + 1 : Infinity;
  if (grid && grid.bytes < decimalBytes) {
    valueLayout = VAL_GRID;
    writeGrid(w, grid);
  } else if (k !== null && n > 0 && layout !== 'grid') {
    valueLayout = VAL_DECIMAL;
    const p = POW10[k];
    w.byte(k);
    let prev = 0;
    for (let i = 0; i < n; i++) {
      const x = Math.round(values[i] * p);
      w.svar(x - prev);
      prev = x;
    }
  } else if (layout !== 'raw' && n > 0) {
    valueLayout = VAL_XOR;
    w.bytes(encodeXor(values));
  } else {
    for (let i = 0; i < n; i++) w.f64(values[i]);
  }
  return { body: w.result(), valueLayout, tsRaw };
}

/**
 * Output buffer size for a one-shot zlib call expecting about `bytes` of output. Node's default is
 * 16 kB, and the result is a slice of it, so every call allocated 16 kB (twice per chunk: deflate,
 * then inflate for the C3 check) that lived until the next GC. A sealing step of 5,000 variables
 * writes 5,000 chunks of ~20 samples: ~160 MB of such buffers per step, up to ~25 MB alive at once,
 * and the malloc heap kept the high-water mark as RSS (~+30 MB per process, bench/memory.ts run
 * past seal_after). Sized to the data, small outputs come from Buffer's shared pool.
 */
function zlibChunkSize(bytes: number): number {
  return Math.min(64 * 1024, Math.max(64, Math.ceil(bytes)));
}

/** Encodes one variable's samples (C1–C4). `ts` and `values` have the same length. */
export function encodeChunk(ts: ArrayLike<number>, values: ArrayLike<number>, options: EncodeOptions = {}): Buffer {
  if (ts.length !== values.length) throw new RangeError(`encodeChunk: ${ts.length} timestamps but ${values.length} values`);
  const v2 = options.format === 2 || options.valueLayout !== undefined || options.compressor !== undefined;
  if (!v2) return encodeChunkV3(ts, values, options.verify !== false);
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i]) || !Number.isFinite(ts[i])) throw new RangeError(`encodeChunk: sample ${i} is not finite (${ts[i]}, ${values[i]}); format 2 carries finite samples only`);
  }
  return encodeChunkV2(ts, values, options);
}

/** Format 3 (codec-v3.ts), checked by decoding it (C3); a layout that fails falls back to XOR, which carries any bits. */
function encodeChunkV3(ts: ArrayLike<number>, values: ArrayLike<number>, verify: boolean): Buffer {
  for (const forceXor of [false, true]) {
    const bytes = encodeV3(ts, values, forceXor);
    const out = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
    if (!verify || readsBack(out, ts, values)) return out;
  }
  throw new Error('encodeChunk: format 3 failed its own check in the XOR layout too');
}

/** C3: whether `chunk` decodes to exactly these samples (a decoding error counts as no). */
function readsBack(chunk: Uint8Array, ts: ArrayLike<number>, values: ArrayLike<number>): boolean {
  try {
    return sameSamples(decodeChunkInto(chunk, checkScratch), ts, values);
  } catch (err) {
    if (err instanceof ChunkFormatError) return false;
    throw err;
  }
}

function encodeChunkV2(ts: ArrayLike<number>, values: ArrayLike<number>, options: EncodeOptions): Buffer {
  const compressor = options.compressor ?? 'deflate';
  const { body, valueLayout, tsRaw } = encodeBody(ts, values, options.valueLayout);
  let comp: number = COMP.none;
  let payload: Uint8Array = body;
  if (compressor !== 'none' && body.length > 32) {
    // The output buffer sized to the input (kept only when smaller): see zlibChunkSize.
    const chunkSize = zlibChunkSize(body.length);
    const packed =
      compressor === 'brotli'
        ? brotliCompressSync(body, { chunkSize, params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 9, [zlibConstants.BROTLI_PARAM_SIZE_HINT]: body.length, [zlibConstants.BROTLI_PARAM_LGWIN]: 18 } })
        : deflateRawSync(body, { level: 9, memLevel: 8, windowBits: 14, chunkSize });
    if (packed.length < body.length) {
      payload = packed;
      comp = COMP[compressor];
    }
  }
  const head = new ByteWriter(12);
  head.byte(valueLayout === VAL_GRID ? CHUNK_FORMAT_VERSION_GRID : CHUNK_FORMAT_VERSION);
  head.byte(comp | (valueLayout << 2) | (tsRaw ? TS_RAW_FLAG : 0));
  head.uvar(ts.length);
  const h = head.result();
  const out = Buffer.allocUnsafe(h.length + payload.length);
  out.set(h, 0);
  out.set(payload, h.length);
  if (options.verify === false) return out;
  if (!sameSamples(decodeChunkInto(out, checkScratch), ts, values)) {
    // C3: never store a layout that does not read back exactly.
    if (options.valueLayout === 'raw') throw new Error('encodeChunk: raw layout failed its own check');
    return encodeChunkV2(ts, values, { compressor: 'none', valueLayout: 'raw' });
  }
  return out;
}

/** Reads a chunk written by `encodeChunk`. Throws ChunkFormatError on anything malformed. */
export function decodeChunk(chunk: Uint8Array): DecodedChunk {
  return decodeChunkWith(chunk, (n) => ({ ts: new Float64Array(n), values: new Float64Array(n) }));
}

/**
 * Decodes into `into`'s arrays (grown when too short), for a caller that decodes many chunks and
 * is done with each before the next: returns views of `into` that the next call overwrites. Two
 * fresh arrays a chunk (decodeChunk) are ArrayBuffers freed only by a scavenge, and V8 lets young
 * ArrayBuffers reach ~32 MB before it forces one (see bodyWriter).
 */
export function decodeChunkInto(chunk: Uint8Array, into: DecodedChunk): DecodedChunk {
  return decodeChunkWith(chunk, (n) => {
    if (into.ts.length < n) {
      into.ts = new Float64Array(Math.max(n, 2 * into.ts.length));
      into.values = new Float64Array(into.ts.length);
    }
    return { ts: into.ts.subarray(0, n), values: into.values.subarray(0, n) };
  });
}

function decodeChunkWith(chunk: Uint8Array, arrays: (n: number) => DecodedChunk): DecodedChunk {
  if (chunk.length > 0 && chunk[0] === CHUNK_FORMAT_V3) {
    try {
      return decodeV3(chunk, arrays);
    } catch (err) {
      if (err instanceof ChunkFormatErrorV3) throw new ChunkFormatError(err.message);
      throw err;
    }
  }
  const head = new ByteReader(chunk);
  const version = head.byte();
  if (version !== CHUNK_FORMAT_VERSION && version !== CHUNK_FORMAT_VERSION_GRID) throw new ChunkFormatError(`chunk format ${version} is not known to this version (knows ${CHUNK_FORMAT_VERSION}, ${CHUNK_FORMAT_VERSION_GRID} and ${CHUNK_FORMAT_V3})`);
  const flags = head.byte();
  const n = head.uvar();
  const comp = flags & 3;
  const valueLayout = (flags >> 2) & 3;
  const tsRaw = (flags & TS_RAW_FLAG) !== 0;
  let body = head.rest;
  // A body is a few bytes a sample (varints); a larger one just takes more output buffers.
  if (comp === COMP.deflate) body = inflateRawSync(body, { chunkSize: zlibChunkSize(n * 4 + 16) });
  else if (comp === COMP.brotli) body = brotliDecompressSync(body, { chunkSize: zlibChunkSize(n * 4 + 16) });
  else if (comp !== COMP.none) throw new ChunkFormatError(`unknown compressor ${comp}`);
  const r = new ByteReader(body);
  const { ts, values } = arrays(n);
  if (tsRaw) {
    for (let i = 0; i < n; i++) ts[i] = r.f64();
  } else if (n > 0) {
    ts[0] = r.svar();
    if (n > 1) {
      let delta = r.svar();
      ts[1] = ts[0] + delta;
      r.pos = readSvarDeltas(body, r.pos, ts, 2, delta, true);
    }
  }
  if (n > 0) {
    if (valueLayout === VAL_DECIMAL) {
      const k = r.byte();
      if (k > MAX_DECIMALS) throw new ChunkFormatError(`bad decimal scale ${k}`);
      const p = POW10[k];
      r.pos = readSvarDeltas(body, r.pos, values, 0, 0, false);
      if (p !== 1) for (let i = 0; i < n; i++) values[i] = values[i] / p;
    } else if (valueLayout === VAL_XOR) {
      decodeXor(r.rest, n, values);
    } else if (valueLayout === VAL_RAW) {
      for (let i = 0; i < n; i++) values[i] = r.f64();
    } else if (valueLayout === VAL_GRID && version === CHUNK_FORMAT_VERSION_GRID) {
      readGrid(body, r, values);
    } else throw new ChunkFormatError(`unknown value layout ${valueLayout}`);
  }
  return { ts, values };
}

/**
 * The hot loop of decoding, inlined: zigzag varints from `pos`, summed into `out[from..]`. With
 * `dod` each varint changes the running delta (timestamps); without, each one is the delta itself
 * (decimal values, from 0). Returns the position after the last varint.
 */
function readSvarDeltas(buf: Uint8Array, pos: number, out: Float64Array, from: number, delta: number, dod: boolean): number {
  const len = buf.length;
  let acc = from > 0 ? out[from - 1] : 0;
  for (let i = from; i < out.length; i++) {
    let z = 0;
    let mul = 1;
    for (;;) {
      if (pos >= len) throw new ChunkFormatError('chunk ends early');
      const b = buf[pos++];
      z += (b & 127) * mul;
      if (b < 128) break;
      mul *= 128;
      if (mul > 2 ** 56) throw new ChunkFormatError('varint too long');
    }
    const v = z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    if (dod) {
      delta += v;
      acc += delta;
    } else acc += v;
    out[i] = acc;
  }
  return pos;
}

/** Number of samples in a chunk, from its header alone. */
export function chunkCount(chunk: Uint8Array): number {
  if (chunk.length > 0 && chunk[0] === CHUNK_FORMAT_V3) return countV3(chunk);
  const r = new ByteReader(chunk);
  const version = r.byte();
  if (version !== CHUNK_FORMAT_VERSION && version !== CHUNK_FORMAT_VERSION_GRID) throw new ChunkFormatError(`chunk format ${version} is not known to this version (knows ${CHUNK_FORMAT_VERSION}, ${CHUNK_FORMAT_VERSION_GRID} and ${CHUNK_FORMAT_V3})`);
  r.byte();
  return r.uvar();
}

const cmp = new Float64Array(2);
const cmpBits = new Uint32Array(cmp.buffer);

/** Bit-exact comparison of two doubles (−0 apart from 0, a NaN's payload and sign). */
function sameBits(a: number, b: number): boolean {
  cmp[0] = a;
  cmp[1] = b;
  return cmpBits[0] === cmpBits[2] && cmpBits[1] === cmpBits[3];
}

/** Bit-exact comparison of a decoded chunk with the samples it was made of. */
export function sameSamples(d: DecodedChunk, ts: ArrayLike<number>, values: ArrayLike<number>): boolean {
  if (d.ts.length !== ts.length || d.values.length !== values.length) return false;
  for (let i = 0; i < ts.length; i++) {
    if (!sameBits(d.ts[i], ts[i]) || !sameBits(d.values[i], values[i])) return false;
  }
  return true;
}
