/**
 * An adaptive binary range coder and the integer models of chunk format 3 (codec-v3.ts). Pure
 * functions over byte arrays, no I/O.
 *
 * Why: a chunk's streams (timestamp residuals, value residuals) are small signed integers whose
 * distribution is what a sensor's noise and a network's jitter make it: mostly zeros for a polled
 * value that repeats or a jitter-free clock, a few bits of noise otherwise. A binary range coder
 * with adaptive probabilities (the coder of LZMA: 32-bit range, carry through a cached byte,
 * Martin 1979 "Range encoding") spends on each decision what its learnt probability says, so a run
 * of zeros costs ~0.01 bit a sample and noise about its entropy, where byte-aligned varints cost
 * at least 8 bits and deflate's Huffman codes at least 1.
 *
 * Deterministic: integer arithmetic only (every product below 2^32, exact in doubles), so any
 * reader computes the same decisions.
 */

/** Probabilities are 12-bit (of 4096); each decision moves them by 1/32 of the distance. */
const PROB_BITS = 12;
const PROB_ONE = 1 << PROB_BITS;
const PROB_INIT = PROB_ONE >> 1;
const MOVE_BITS = 5;
const TOP = 2 ** 24;

export class RangeEncoder {
  private buf: Uint8Array;
  private pos = 0;
  private low = 0;
  private range = 0xffffffff;
  private cache = 0;
  private cacheSize = 1;
  /** The first byte a fresh coder writes is always 0: skipped (the decoder knows it). */
  private first = true;

  constructor(size = 1024) {
    this.buf = new Uint8Array(size);
  }

  reset(): this {
    this.pos = 0;
    this.low = 0;
    this.range = 0xffffffff;
    this.cache = 0;
    this.cacheSize = 1;
    this.first = true;
    return this;
  }

  private out(b: number): void {
    if (this.first) {
      this.first = false;
      return;
    }
    if (this.pos === this.buf.length) {
      const next = new Uint8Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.pos++] = b;
  }

  private shiftLow(): void {
    const low = this.low;
    if (low < 0xff000000 || low >= 0x100000000) {
      const carry = low >= 0x100000000 ? 1 : 0;
      let temp = this.cache;
      do {
        this.out((temp + carry) & 0xff);
        temp = 0xff;
      } while (--this.cacheSize !== 0);
      this.cache = (low >>> 24) & 0xff;
    }
    this.cacheSize++;
    this.low = (low & 0x00ffffff) * 256;
  }

  /** Codes `bit` (0 or 1) with the adaptive probability `probs[i]` (of a 0), and adapts it. */
  bit(probs: Uint16Array, i: number, bit: number): void {
    const p = probs[i];
    const bound = (this.range >>> PROB_BITS) * p;
    if (bit === 0) {
      this.range = bound;
      probs[i] = p + ((PROB_ONE - p) >> MOVE_BITS);
    } else {
      this.low += bound;
      this.range -= bound;
      probs[i] = p - (p >> MOVE_BITS);
    }
    while (this.range < TOP) {
      this.range = (this.range * 256) >>> 0;
      this.shiftLow();
    }
  }

  /** Codes the low `n` bits of `v` (n ≤ 26 per call), most significant first, each with probability 1/2. */
  direct(v: number, n: number): void {
    for (let b = n - 1; b >= 0; b--) {
      this.range = this.range >>> 1;
      if ((v >>> b) & 1) this.low += this.range;
      while (this.range < TOP) {
        this.range = (this.range * 256) >>> 0;
        this.shiftLow();
      }
    }
  }

  /** Ends the stream; returns a view of the coded bytes (valid until the next reset). */
  finish(): Uint8Array {
    for (let i = 0; i < 5; i++) this.shiftLow();
    // The decoder reads zeros past the end, so trailing zero bytes need not be stored.
    let end = this.pos;
    while (end > 0 && this.buf[end - 1] === 0) end--;
    return this.buf.subarray(0, end);
  }
}

export class RangeDecoder {
  private pos: number;
  private range = 0xffffffff;
  private code = 0;

  constructor(
    private readonly buf: Uint8Array,
    start: number,
  ) {
    this.pos = start;
    for (let i = 0; i < 4; i++) this.code = ((this.code * 256) >>> 0) + this.next();
  }

  private next(): number {
    return this.pos < this.buf.length ? this.buf[this.pos++] : 0;
  }

  bit(probs: Uint16Array, i: number): number {
    const p = probs[i];
    const bound = (this.range >>> PROB_BITS) * p;
    let bit: number;
    if (this.code < bound) {
      this.range = bound;
      probs[i] = p + ((PROB_ONE - p) >> MOVE_BITS);
      bit = 0;
    } else {
      this.code -= bound;
      this.range -= bound;
      probs[i] = p - (p >> MOVE_BITS);
      bit = 1;
    }
    while (this.range < TOP) {
      this.range = (this.range * 256) >>> 0;
      this.code = ((this.code * 256) >>> 0) + this.next();
    }
    return bit;
  }

  direct(n: number): number {
    let v = 0;
    for (let b = 0; b < n; b++) {
      this.range = this.range >>> 1;
      let bit = 0;
      if (this.code >= this.range) {
        this.code -= this.range;
        bit = 1;
      }
      v = v * 2 + bit;
      while (this.range < TOP) {
        this.range = (this.range * 256) >>> 0;
        this.code = ((this.code * 256) >>> 0) + this.next();
      }
    }
    return v;
  }
}

/** Contexts of an integer model: the size class of the previous residual (0 = it was zero). */
const CONTEXTS = 8;
/** Largest bit length of a magnitude (residuals of integers up to 2^53). */
const MAX_LEN = 54;
/** Mantissa bits below the leading one that get adaptive probabilities; the rest are direct. */
const MODELLED_MANTISSA = 2;

function lengthOf(u: number): number {
  // Bits of u ≥ 1 (floor(log2 u) + 1), exact beyond 2^32 too.
  if (u < 0x100000000) return 32 - Math.clz32(u);
  return 32 + lengthOf(Math.floor(u / 0x100000000));
}

function contextOf(len: number): number {
  return len === 0 ? 0 : len <= 2 ? 1 : len <= 4 ? 2 : len <= 6 ? 3 : len <= 9 ? 4 : len <= 13 ? 5 : len <= 20 ? 6 : 7;
}

/**
 * An adaptive model of a stream of signed integers (|v| < 2^53): a zero flag, a sign, the bit length of the
 * magnitude in unary, the top mantissa bits modelled and the rest direct, all in the context of the
 * previous value's size class (noise comes in spells: a quiet stretch, then a moving one).
 */
export class IntModel {
  readonly zero = new Uint16Array(CONTEXTS).fill(PROB_INIT);
  readonly sign = new Uint16Array(CONTEXTS).fill(PROB_INIT);
  readonly len = new Uint16Array(CONTEXTS * MAX_LEN).fill(PROB_INIT);
  readonly mant = new Uint16Array(MAX_LEN * 4).fill(PROB_INIT);
  ctx = 0;

  reset(): void {
    this.zero.fill(PROB_INIT);
    this.sign.fill(PROB_INIT);
    this.len.fill(PROB_INIT);
    this.mant.fill(PROB_INIT);
    this.ctx = 0;
  }

  encode(e: RangeEncoder, v: number): void {
    const ctx = this.ctx;
    if (v === 0) {
      e.bit(this.zero, ctx, 0);
      this.ctx = 0;
      return;
    }
    e.bit(this.zero, ctx, 1);
    e.bit(this.sign, ctx, v < 0 ? 1 : 0);
    const u = v < 0 ? -v : v;
    const l = lengthOf(u); // 1..53
    const base = ctx * MAX_LEN;
    for (let j = 1; j < l; j++) e.bit(this.len, base + j, 1);
    if (l < MAX_LEN - 1) e.bit(this.len, base + l, 0);
    // Mantissa: the l − 1 bits below the leading one; the first two modelled (a binary tree of 3).
    let rest = l - 1;
    let node = 0;
    for (let m = 0; m < MODELLED_MANTISSA && rest > 0; m++) {
      rest--;
      const b = u < 0x80000000 ? (u >>> rest) & 1 : Math.floor(u / 2 ** rest) % 2;
      e.bit(this.mant, l * 4 + node, b);
      node = 1 + b;
    }
    if (rest > 0) {
      const low = u % 2 ** rest;
      if (rest > 26) {
        e.direct(Math.floor(low / 2 ** 26), rest - 26);
        e.direct(low % 2 ** 26, 26);
      } else e.direct(low, rest);
    }
    this.ctx = contextOf(l);
  }

  decode(d: RangeDecoder): number {
    const ctx = this.ctx;
    if (d.bit(this.zero, ctx) === 0) {
      this.ctx = 0;
      return 0;
    }
    const neg = d.bit(this.sign, ctx) === 1;
    const base = ctx * MAX_LEN;
    let l = 1;
    while (l < MAX_LEN - 1 && d.bit(this.len, base + l) === 1) l++;
    let u = 1;
    let rest = l - 1;
    let node = 0;
    for (let m = 0; m < MODELLED_MANTISSA && rest > 0; m++) {
      rest--;
      const b = d.bit(this.mant, l * 4 + node);
      u = u * 2 + b;
      node = 1 + b;
    }
    if (rest > 0) {
      let low: number;
      if (rest > 26) {
        const hi = d.direct(rest - 26);
        low = hi * 2 ** 26 + d.direct(26);
      } else low = d.direct(rest);
      u = u * 2 ** rest + low;
    }
    this.ctx = contextOf(l);
    return neg ? -u : u;
  }
}

/** An adaptive model of a `bits`-bit symbol (a binary tree of probabilities). */
export class SymbolModel {
  readonly probs: Uint16Array;
  constructor(readonly bits: number) {
    this.probs = new Uint16Array(1 << bits).fill(PROB_INIT);
  }
  reset(): void {
    this.probs.fill(PROB_INIT);
  }
  encode(e: RangeEncoder, v: number): void {
    let node = 1;
    for (let b = this.bits - 1; b >= 0; b--) {
      const bit = (v >>> b) & 1;
      e.bit(this.probs, node, bit);
      node = node * 2 + bit;
    }
  }
  decode(d: RangeDecoder): number {
    let node = 1;
    for (let b = 0; b < this.bits; b++) node = node * 2 + d.bit(this.probs, node);
    return node - (1 << this.bits);
  }
}

/** A single adaptive flag. */
export function flagModel(n = 1): Uint16Array {
  return new Uint16Array(n).fill(PROB_INIT);
}
export const FLAG_INIT = PROB_INIT;
