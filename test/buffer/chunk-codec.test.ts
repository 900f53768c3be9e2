import { describe, expect, it } from 'vitest';
import { ChunkFormatError, chunkCount, decimalScale, decodeChunk, encodeChunk } from '../../src/buffer/chunks/codec.js';

/** Deterministic PRNG (mulberry32) so a failing case can be replayed from its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function bits(v: number): string {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(v);
  return b.toString('hex');
}

function expectRoundTrip(ts: number[], values: number[], compressor: 'none' | 'deflate' | 'brotli' = 'deflate'): Buffer {
  const chunk = encodeChunk(ts, values, { compressor });
  const d = decodeChunk(chunk);
  expect(d.ts.length).toBe(ts.length);
  expect(Array.from(d.ts).map(bits)).toEqual(ts.map(bits));
  expect(Array.from(d.values).map(bits)).toEqual(values.map(bits));
  expect(chunkCount(chunk)).toBe(ts.length);
  return chunk;
}

const T0 = Date.UTC(2026, 10, 23, 12, 0, 0);

describe('chunk codec', () => {
  it('round-trips special doubles bit-exact: −0, subnormals, ±1e308, extremes, integers beyond 2^53', () => {
    const values = [0, -0, 5e-324, -5e-324, 2.2250738585072014e-308, 1e308, -1e308, Number.MAX_VALUE, -Number.MAX_VALUE, 2 ** 53 + 2, -(2 ** 60), 9007199254740993, 0.1, 1 / 3, Math.PI, -0, 0];
    const ts = values.map((_, i) => T0 + i * 1000);
    for (const c of ['none', 'deflate', 'brotli'] as const) expectRoundTrip(ts, values, c);
  });

  it('keeps −0 apart from 0 in every layout', () => {
    for (const valueLayout of ['decimal', 'xor', 'raw'] as const) {
      const d = decodeChunk(encodeChunk([1, 2, 3], [-0, 0, -0], { valueLayout }));
      expect(Object.is(d.values[0], -0)).toBe(true);
      expect(Object.is(d.values[1], 0)).toBe(true);
      expect(Object.is(d.values[2], -0)).toBe(true);
    }
  });

  it('copes with repeated, backwards and irregular timestamps, and with timestamps far from now', () => {
    const ts = [T0, T0, T0 - 5_000, T0 + 86_400_000, T0 + 1, T0 + 1, 0, -1, 4_102_444_800_000, T0];
    expectRoundTrip(ts, ts.map((_, i) => i * 0.5));
    // Not integers, or beyond what delta-of-delta carries exactly: stored as doubles.
    expectRoundTrip([1.5, 2 ** 60, -(2 ** 62), 1e300], [1, 2, 3, 4]);
  });

  it('handles empty and single-sample chunks', () => {
    expectRoundTrip([], []);
    expectRoundTrip([T0], [42.125]);
    expectRoundTrip([T0], [-0]);
  });

  it('finds the smallest decimal scale that reads back exactly', () => {
    expect(decimalScale([1, 2, 3])).toBe(0);
    expect(decimalScale([1.5, 2.25])).toBe(2);
    expect(decimalScale([0.1, 0.2, 0.3])).toBe(1);
    expect(decimalScale([21.37, 21.4])).toBe(2);
    expect(decimalScale([1 / 3])).toBeNull();
    expect(decimalScale([-0])).toBeNull();
    expect(decimalScale([1e300])).toBeNull();
    expect(decimalScale([2 ** 53])).toBeNull();
  });

  it('is small on sensor-like data (regular timestamps, values at the sensor resolution)', () => {
    const r = rng(7);
    const ts: number[] = [];
    const values: number[] = [];
    let v = 21.5;
    for (let i = 0; i < 1_000; i++) {
      ts.push(T0 + i * 1_000 + Math.round((r() - 0.5) * 4));
      v += (r() - 0.5) * 0.02;
      values.push(Math.round(v * 100) / 100);
    }
    const chunk = expectRoundTrip(ts, values);
    expect(chunk.length / 1_000).toBeLessThan(2.5);
    // Constant states cost little beyond their (jittered) timestamps.
    const states = expectRoundTrip(ts, ts.map((_, i) => (i < 500 ? 1 : 0)));
    expect(states.length / 1_000).toBeLessThan(0.6);
    const regular = expectRoundTrip(ts.map((_, i) => T0 + i * 1_000), ts.map((_, i) => (i < 500 ? 1 : 0)));
    expect(regular.length).toBeLessThan(40);
  });

  it('round-trips random data of every kind (property test, 600 cases)', () => {
    const r = rng(12345);
    const kinds = ['decimal', 'bits', 'ints', 'mixed', 'tiny', 'const'] as const;
    for (let c = 0; c < 600; c++) {
      const n = Math.floor(r() * 300);
      const kind = kinds[c % kinds.length];
      const ts: number[] = [];
      const values: number[] = [];
      let t = Math.floor(r() * 4e12);
      for (let i = 0; i < n; i++) {
        const jump = r();
        t += jump < 0.8 ? 1000 + Math.floor((r() - 0.5) * 10) : jump < 0.9 ? 0 : Math.floor((r() - 0.7) * 1e7);
        ts.push(t);
        let v: number;
        const buf = Buffer.alloc(8);
        switch (kind) {
          case 'decimal':
            v = Math.round((r() - 0.5) * 10 ** (2 + Math.floor(r() * 6))) / 10 ** Math.floor(r() * 6);
            break;
          case 'bits':
            do {
              for (let b = 0; b < 8; b++) buf[b] = Math.floor(r() * 256);
              v = buf.readDoubleLE();
            } while (!Number.isFinite(v));
            break;
          case 'ints':
            v = Math.floor((r() - 0.5) * 2 ** (1 + Math.floor(r() * 62)));
            break;
          case 'tiny':
            v = (r() - 0.5) * 1e-310;
            break;
          case 'const':
            v = c % 2 === 0 ? -0 : 3.25;
            break;
          default:
            v = [r(), -0, 0, 1e308, 5e-324, Math.round(r() * 1000) / 10][Math.floor(r() * 6)];
        }
        values.push(v);
      }
      expectRoundTrip(ts, values, (['none', 'deflate', 'brotli'] as const)[c % 3]);
    }
  });

  it('refuses malformed and unknown chunks with a format error instead of guessing', () => {
    const good = encodeChunk([T0, T0 + 1000], [1.5, 2.5], { compressor: 'none' });
    const wrongVersion = Buffer.from(good);
    wrongVersion[0] = 99;
    expect(() => decodeChunk(wrongVersion)).toThrow(/format 99/);
    expect(() => decodeChunk(good.subarray(0, good.length - 1))).toThrow(ChunkFormatError);
    expect(() => encodeChunk([1], [Number.NaN])).toThrow(/not finite/);
    expect(() => encodeChunk([1, 2], [1])).toThrow(/2 timestamps but 1 values/);
  });
});
