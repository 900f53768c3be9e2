import { describe, expect, it } from 'vitest';
import { ChunkFormatError, chunkCount, decimalScale, decodeChunk, encodeChunk } from '../../src/buffer/chunks/codec.js';
import { shortestF32 } from '../../src/buffer/chunks/value-domains.js';
import { rng } from '../helpers/random.js';

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
    expect(() => encodeChunk([1], [Number.NaN], { format: 2 })).toThrow(/not finite/);
    // Format 3: a cut or damaged chunk is refused (its check byte), never decoded into other samples.
    const v3 = encodeChunk(Array.from({ length: 50 }, (_, i) => T0 + i * 1000 + (i % 7)), Array.from({ length: 50 }, (_, i) => 20 + Math.round(Math.sin(i) * 300) / 100));
    expect(v3[0]).toBe(3);
    expect(() => decodeChunk(v3.subarray(0, v3.length - 2))).toThrow(ChunkFormatError);
    let refused = 0;
    for (let i = 2; i < v3.length; i++) {
      const bad = Buffer.from(v3);
      bad[i] ^= 0x10;
      try {
        decodeChunk(bad);
      } catch (err) {
        if (err instanceof ChunkFormatError) refused++;
        else throw err;
      }
    }
    expect(refused).toBeGreaterThanOrEqual(v3.length - 4);
    expect(() => encodeChunk([1, 2], [1])).toThrow(/2 timestamps but 1 values/);
  });
  it('stores quantized sensor values on their grid, far below the decimal and XOR layouts', () => {
    const r = rng(99);
    const n = 2_000;
    const ts = Array.from({ length: n }, (_, i) => T0 + i * 1_000);
    const gauss = () => Math.sqrt(-2 * Math.log(Math.max(1e-12, r()))) * Math.cos(2 * Math.PI * r());
    // A Modbus 4-20 mA transmitter: 16-bit counts × span/65535 + offset, printed to 15 digits
    // (src/sources/modbus/decode.ts): 14-decimal numbers, a few counts of noise.
    let level = 30_000;
    const adc = ts.map(() => {
      level += Math.round(gauss() * 4);
      return Number((level * (10 / 65535) - 2.5).toPrecision(15));
    });
    // A 12-bit count × a float factor sent as a Sparkplug Float, handed on as its shortest decimal.
    const factor = (16 / 4095) * 1.0037;
    let load = 2_000;
    const sparkplug = ts.map(() => {
      load += Math.round(gauss() * 12);
      return shortestF32(Math.round(load) * factor);
    });
    // An OPC UA Float of a quantized value (float32 as it arrives) and one with full float noise.
    const opc = sparkplug.map((v) => Math.fround(v));
    const noisy = ts.map(() => Math.fround(50 + gauss() * 0.5));
    for (const [name, values, perSample] of [['adc', adc, 1.0], ['sparkplug', sparkplug, 1.4], ['opc', opc, 1.4]] as const) {
      const chunk = expectRoundTrip(ts, values);
      const before = Math.min(encodeChunk(ts, values, { valueLayout: 'decimal' }).length, encodeChunk(ts, values, { valueLayout: 'xor' }).length);
      expect(chunk[0], name).toBe(2); // the grid layout's format version (C4)
      expect(chunk.length / n, name).toBeLessThan(perSample);
      expect(chunk.length, name).toBeLessThan(before * 0.6);
    }
    // Where no grid helps, never larger than the layout used before.
    const chunk = expectRoundTrip(ts, noisy);
    expect(chunk.length).toBeLessThanOrEqual(encodeChunk(ts, noisy, { valueLayout: 'xor' }).length);
  });

  it('round-trips grid-layout data of every kind bit-exact (property test, 400 cases)', () => {
    const r = rng(2026);
    for (let c = 0; c < 400; c++) {
      const n = 1 + Math.floor(r() * 400);
      const ts = Array.from({ length: n }, (_, i) => T0 + i * 100);
      const scale = (r() < 0.5 ? 1 : -1) * 10 ** (Math.floor(r() * 12) - 6) * (1 + r());
      const offset = (r() - 0.5) * 10 ** Math.floor(r() * 8);
      let count = Math.floor((r() - 0.5) * 1e5);
      const values = ts.map(() => {
        count += Math.floor((r() - 0.5) * 20);
        const x = count * scale + offset;
        switch (c % 5) {
          case 0:
            return Number(x.toPrecision(15));
          case 1:
            return shortestF32(x);
          case 2:
            return Math.fround(x);
          case 3:
            return [Math.fround(x), -0, 0, Math.fround(-x), 3.4028234663852886e38, 1.401298464324817e-45][Math.floor(r() * 6)];
          default:
            return r() < 0.9 ? Number(x.toPrecision(9)) : -0;
        }
      });
      for (const valueLayout of [undefined, 'grid'] as const) {
        const chunk = encodeChunk(ts, values, { valueLayout, compressor: (['none', 'deflate', 'brotli'] as const)[c % 3] });
        const d = decodeChunk(chunk);
        expect(Array.from(d.values).map(bits), `case ${c}`).toEqual(values.map(bits));
      }
    }
  });

  it('reads chunks written before the grid layout (format 1), as stored in existing files', () => {
    // Written by the codec of 7c44c1c: decimal, XOR and a 15-digit ADC series (then decimal).
    const ts = Array.from({ length: 40 }, (_, i) => T0 + i * 1000 + (i % 3));
    const stored = {
      dec: ['AQEoa/ixveVgxiV+BlY2IhDTGcUyruxa6bgWRj3/VkZ7hzbGAN1mxliZuhzO8mL2nBqZ+EZG3aA2RjvHVkZfgxbGGAA=', ts.map((_, i) => Math.round((21.5 + Math.sin(i) * 0.7) * 100) / 100)],
      xor: [
        'AQUoa/ixveVgxiV+BlY2IpCDaQMDCJwLnnZqQ0bhu3fvTnM6Nx3pNraYpye69lGF9Y+Jgus2Pve0Ozdjfa+nfX3ko4/OMjEFmvPvbwjdrtp3/+4pweZ019yCX6k9KVIff279IHbw7oN+2Tv3A7pntlr88aqL8slawn3x//fbBx9v0/Z/ITFHb6e4mdGzrAkA',
        ts.map((_, i) => Math.fround(21.5 + Math.sin(i) * 0.7)),
      ],
      adc: ['AQEoa/ixveVgxiV+BlY2IhDfrjkzmt/sjfvx/9eL2WzPt72csIr1F172S7xqIORgNg0A', ts.map((_, i) => Number(((30000 + ((i * 7) % 13)) * (10 / 65535) - 2.5).toPrecision(15)))],
    } as const;
    for (const [name, [b64, values]] of Object.entries(stored)) {
      const d = decodeChunk(Buffer.from(b64, 'base64'));
      expect(Array.from(d.ts), name).toEqual(ts);
      expect(Array.from(d.values).map(bits), name).toEqual(values.map(bits));
    }
  });

  it('shortestF32 reads back as the same float32 and matches the Sparkplug decoder on counts × factors', () => {
    const r = rng(5);
    let same = 0;
    for (let i = 0; i < 20_000; i++) {
      const f = Math.fround(Math.round(r() * 4095) * (r() * 100) * (r() < 0.5 ? -1 : 1));
      const s = shortestF32(f);
      expect(Math.fround(s)).toBe(f);
      let viaPrecision = f;
      for (let p = 1; p <= 9; p++) {
        const c = Number(f.toPrecision(p));
        if (Math.fround(c) === f) {
          viaPrecision = c;
          break;
        }
      }
      if (Object.is(s, viaPrecision)) same++;
    }
    // Where a rare value differs, the chunk just uses another layout (the encoder checks every value).
    expect(same / 20_000).toBeGreaterThan(0.99);
  });
});
