import { describe, expect, it } from 'vitest';
import { chunkCount, decodeChunk, encodeChunk } from '../../src/buffer/chunks/codec.js';
import { rng } from '../helpers/random.js';

/** Hex of a double's bits: NaN payloads, −0 and subnormals compared exactly. */
function hex(a: Float64Array): string[] {
  const u = new Uint32Array(a.buffer, a.byteOffset, a.length * 2);
  const out: string[] = [];
  for (let i = 0; i < a.length; i++) out.push(u[2 * i + 1].toString(16).padStart(8, '0') + u[2 * i].toString(16).padStart(8, '0'));
  return out;
}

/** A double from its two 32-bit halves (a NaN keeps its payload inside a Float64Array). */
function fromBits(hi: number, lo: number): Float64Array {
  return new Float64Array(new Uint32Array([lo >>> 0, hi >>> 0]).buffer);
}

function roundTrip(ts: Float64Array, values: Float64Array): Buffer {
  const chunk = encodeChunk(ts, values);
  expect(chunk[0]).toBe(3);
  const d = decodeChunk(chunk);
  expect(hex(d.ts)).toEqual(hex(ts));
  expect(hex(d.values)).toEqual(hex(values));
  expect(chunkCount(chunk)).toBe(ts.length);
  return chunk;
}

const T0 = Date.UTC(2026, 10, 28, 8, 0, 0);

/** Values of one kind a device or a bug can hand over, `n` of them. */
function valuesOf(kind: number, n: number, r: () => number): Float64Array {
  const v = new Float64Array(n);
  const u = new Uint32Array(v.buffer);
  const level = (r() - 0.5) * 10 ** Math.floor(r() * 8 - 2);
  for (let i = 0; i < n; i++) {
    switch (kind) {
      case 0: // decimals at a sensor's resolution
        v[i] = Math.round((level + (r() - 0.5) * 3) * 100) / 100;
        break;
      case 1: // float32 of a noisy value
        v[i] = Math.fround(level + r());
        break;
      case 2: // a polled value that repeats, changed now and then
        v[i] = i === 0 || r() < 0.01 ? Math.round(r() * 1000) / 10 : v[i - 1];
        break;
      case 3: // random bits: NaN with payloads, ±Inf, subnormals, anything
        u[2 * i] = (r() * 2 ** 32) >>> 0;
        u[2 * i + 1] = (r() * 2 ** 32) >>> 0;
        break;
      case 4: // specials mixed into decimals (exceptions)
        v[i] = r() < 0.05 ? [Number.NaN, -0, 5e-324, -Infinity, Infinity, 2 ** 60, 1 / 3][Math.floor(r() * 7)] : Math.round(level * 1000 + r() * 50) / 1000;
        break;
      case 5: // ADC counts times a float span, 15 digits
        v[i] = Number((Math.round(30000 + r() * 200) * (16 / 65535) - 4).toPrecision(15));
        break;
      default: // huge integers and magnitudes
        v[i] = (r() < 0.5 ? -1 : 1) * Math.floor(r() * 2 ** 53) * (r() < 0.2 ? 2 ** 200 : 1);
    }
  }
  return v;
}

/** Timestamps of one kind: regular, jittered, irregular, out of order and repeated, huge, fractional. */
function timesOf(kind: number, n: number, r: () => number): Float64Array {
  const t = new Float64Array(n);
  const period = [1, 20, 100, 1000, 60_000][Math.floor(r() * 5)];
  for (let i = 0; i < n; i++) {
    switch (kind) {
      case 0:
        t[i] = T0 + i * period;
        break;
      case 1:
        t[i] = T0 + i * period + Math.floor(r() * 40) + (r() < 0.02 ? 700 : 0);
        break;
      case 2:
        t[i] = (i === 0 ? T0 : t[i - 1]) + Math.floor(r() * 5000) - (r() < 0.1 ? 8000 : 0);
        break;
      case 3:
        t[i] = r() < 0.2 && i > 0 ? t[i - 1] : T0 + Math.floor((r() - 0.5) * 2 ** 50);
        break;
      case 4:
        t[i] = (r() < 0.5 ? -1 : 1) * 2 ** (40 + Math.floor(r() * 30)) + i;
        break;
      default:
        t[i] = T0 + i * 1000.5;
    }
  }
  return t;
}

describe('chunk codec, format 3', () => {
  it('round-trips randomized chunks bit for bit: NaN payloads, −0, subnormals, ±Inf, huge and out-of-order timestamps (property test, 700 cases)', () => {
    const r = rng(36);
    for (let c = 0; c < 700; c++) {
      const n = c % 50 === 0 ? 0 : 1 + Math.floor(r() ** 3 * 3000);
      roundTrip(timesOf(c % 6, n, r), valuesOf(Math.floor(c / 6) % 7, n, r));
    }
  }, 300_000);

  it('keeps NaN payloads and signs, both zeros, subnormals and infinities exactly', () => {
    const specials = [fromBits(0x7ff80000, 0), fromBits(0x7ff00000, 1), fromBits(0xfff12345, 0x6789abcd), fromBits(0x7ff7ffff, 0xffffffff), fromBits(0x80000000, 0), fromBits(0, 1), fromBits(0x800fffff, 0xffffffff), fromBits(0x7ff00000, 0), fromBits(0xfff00000, 0)];
    const values = new Float64Array(specials.length * 3);
    specials.forEach((s, i) => {
      values[3 * i] = 20.5 + i; // decimals around, so the specials are exceptions of a decimal chunk
      values.set(s, 3 * i + 1);
      values[3 * i + 2] = 21.25;
    });
    roundTrip(Float64Array.from(values, (_, i) => T0 + i * 1000), values);
    // All specials: the XOR layout.
    const only = new Float64Array(specials.length);
    specials.forEach((s, i) => only.set(s, i));
    roundTrip(Float64Array.from(only, (_, i) => T0 + i), only);
  });

  it('a regular clock and a polled value that repeats cost almost nothing per sample', () => {
    const n = 4096;
    const ts = Float64Array.from({ length: n }, (_, i) => T0 + i * 1000);
    const same = new Float64Array(n).fill(42.7);
    const chunk = roundTrip(ts, same);
    // Header (~15 bytes) and ~0.02 bit a sample for the two zero residuals.
    expect(chunk.length).toBeLessThan(40);
    // A setpoint polled at 1 Hz with a 0-40 ms delay, changed by an operator twice: the delay's
    // entropy (~5.3 bits) and nearly nothing for the value.
    const r = rng(7);
    const jittered = Float64Array.from({ length: n }, (_, i) => T0 + i * 1000 + Math.floor(r() * 40));
    const setpoint = Float64Array.from({ length: n }, (_, i) => (i < 1000 ? 55.5 : i < 3000 ? 60 : 57.5));
    const c2 = roundTrip(jittered, setpoint);
    expect((c2.length * 8) / n).toBeLessThan(5.8);
  });

  it('reads format 2 chunks beside format 3 ones (the version is in the blob: no migration)', () => {
    const ts = Float64Array.from({ length: 300 }, (_, i) => T0 + i * 1000);
    const r = rng(3);
    let count = 30000;
    const adc = Float64Array.from(ts, () => Number(((count += Math.round((r() - 0.5) * 12)) * (10 / 65535) - 2.5).toPrecision(15)));
    const old = encodeChunk(ts, adc, { format: 2 });
    expect(old[0]).toBe(2); // the grid layout of format 2
    expect(hex(decodeChunk(old).values)).toEqual(hex(adc));
    const now = roundTrip(ts, adc);
    expect(now.length).toBeLessThan(old.length);
  });

  it('is smaller than format 2 on sensor-like series', () => {
    const r = rng(11);
    let v2 = 0;
    let v3 = 0;
    for (let c = 0; c < 30; c++) {
      const n = 1000;
      const ts = Float64Array.from({ length: n }, (_, i) => T0 + i * 1000 + Math.floor(r() * 20));
      let x = 500;
      const values = Float64Array.from({ length: n }, () => Math.round((x += (r() - 0.5) * 2) * 100) / 100);
      v2 += encodeChunk(ts, values, { format: 2 }).length;
      v3 += roundTrip(ts, values).length;
    }
    expect(v3).toBeLessThan(v2 * 0.85);
  });
});
