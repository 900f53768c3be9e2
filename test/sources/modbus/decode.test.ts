import { describe, expect, it } from 'vitest';
import { bitAt, decodeRaw, decodeValue, float32ToShortest, toBigEndian, type ByteOrder, type DataType } from '../../../src/sources/modbus/decode.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

/**
 * Wire bytes written by hand from each value's big-endian bytes (Python struct.pack('>...')),
 * placed per the orders documented in decode.ts: ABCD as is, DCBA reversed, BADC bytes swapped in
 * each register, CDAB registers reversed (64-bit: ABCDEFGH, HGFEDCBA, BADCFEHG, GHEFCDAB).
 */
const PATTERNS: Array<{ type: DataType; value: number | bigint; wire: Record<ByteOrder, string> }> = [
  { type: 'int16', value: -12345, wire: { ABCD: 'cfc7', DCBA: 'c7cf', BADC: 'c7cf', CDAB: 'cfc7' } },
  { type: 'uint16', value: 54321, wire: { ABCD: 'd431', DCBA: '31d4', BADC: '31d4', CDAB: 'd431' } },
  { type: 'int32', value: -123456789, wire: { ABCD: 'f8a4 32eb', DCBA: 'eb32 a4f8', BADC: 'a4f8 eb32', CDAB: '32eb f8a4' } },
  { type: 'uint32', value: 3456789012, wire: { ABCD: 'ce0a 6a14', DCBA: '146a 0ace', BADC: '0ace 146a', CDAB: '6a14 ce0a' } },
  { type: 'float32', value: Math.fround(123.456), wire: { ABCD: '42f6 e979', DCBA: '79e9 f642', BADC: 'f642 79e9', CDAB: 'e979 42f6' } },
  {
    type: 'int64',
    value: -1234567890123456n,
    wire: { ABCD: 'fffb 9d2a c375 4540', DCBA: '4045 75c3 2a9d fbff', BADC: 'fbff 2a9d 75c3 4045', CDAB: '4540 c375 9d2a fffb' },
  },
  {
    type: 'uint64',
    value: 4503599627370497n,
    wire: { ABCD: '0010 0000 0000 0001', DCBA: '0100 0000 0000 1000', BADC: '1000 0000 0000 0100', CDAB: '0001 0000 0000 0010' },
  },
  {
    type: 'float64',
    value: -98765.4321,
    wire: { ABCD: 'c0f8 1cd6 e9e1 b08a', DCBA: '8ab0 e1e9 d61c f8c0', BADC: 'f8c0 d61c e1e9 8ab0', CDAB: 'b08a e9e1 1cd6 c0f8' },
  },
];

describe('modbus decoding: every type in every byte order', () => {
  for (const p of PATTERNS) {
    for (const order of ['ABCD', 'DCBA', 'BADC', 'CDAB'] as const) {
      it(`${p.type} ${order}: ${p.wire[order]} -> ${String(p.value)}`, () => {
        expect(decodeRaw(hex(p.wire[order]), p.type, order)).toEqual(p.value);
      });
    }
  }

  it('reorders bytes to big-endian exactly as documented', () => {
    expect(toBigEndian(hex('0102 0304'), 'DCBA').toString('hex')).toBe('04030201');
    expect(toBigEndian(hex('0102 0304'), 'BADC').toString('hex')).toBe('02010403');
    expect(toBigEndian(hex('0102 0304'), 'CDAB').toString('hex')).toBe('03040102');
    expect(toBigEndian(hex('0102 0304 0506 0708'), 'CDAB').toString('hex')).toBe('0708050603040102');
    expect(toBigEndian(hex('0102 0304 0506 0708'), 'BADC').toString('hex')).toBe('0201040306050807');
  });

  it('reads bits of a register (bit 0 = least significant) and bool registers', () => {
    const word = hex('a005'); // 1010 0000 0000 0101
    expect([0, 1, 2, 3, 13, 14, 15].map((b) => decodeRaw(word, 'bit', 'ABCD', b))).toEqual([1, 0, 1, 0, 1, 0, 1]);
    // With a byte-swapping order the register value is 0x05a0.
    expect(decodeRaw(word, 'bit', 'DCBA', 0)).toBe(0);
    expect(decodeRaw(word, 'bit', 'DCBA', 5)).toBe(1);
    expect(decodeRaw(hex('0000'), 'bool', 'ABCD')).toBe(0);
    expect(decodeRaw(hex('0100'), 'bool', 'ABCD')).toBe(1);
  });

  it('reads coil bits least significant first (§6.1)', () => {
    // Coils 20-38 example of the specification: CD 6B 05 -> 1011 0011 / 1101 0110 / 101
    const bytes = hex('cd6b05');
    const bits = Array.from({ length: 19 }, (_, i) => bitAt(bytes, i));
    expect(bits.join('')).toBe('1011001111010110101');
  });

  it('applies scale and offset and rounds away binary noise', () => {
    expect(decodeValue(hex('007b'), { type: 'uint16', order: 'ABCD', scale: 0.1, offset: 0 })).toEqual({ ok: true, value: 12.3, rounded: false });
    expect(decodeValue(hex('ffff'), { type: 'int16', order: 'ABCD', scale: 2, offset: -273.15 })).toEqual({ ok: true, value: -275.15, rounded: false });
    expect(decodeValue(hex('03e8'), { type: 'uint16', order: 'ABCD', scale: 1, offset: 0 })).toEqual({ ok: true, value: 1000, rounded: false });
  });

  it('sends float32 as the shortest decimal of the same float', () => {
    expect(float32ToShortest(Math.fround(0.1))).toBe(0.1);
    expect(float32ToShortest(Math.fround(123.456))).toBe(123.456);
    expect(decodeValue(hex('42f6 e979'), { type: 'float32', order: 'ABCD', scale: 1, offset: 0 })).toEqual({ ok: true, value: 123.456, rounded: false });
    for (const x of [Math.fround(1 / 3), Math.fround(3.4e38), Math.fround(1.17549435e-38), Math.fround(-7.5)]) {
      expect(Math.fround(float32ToShortest(x))).toBe(x);
    }
  });

  it('refuses NaN and infinities as not_finite', () => {
    expect(decodeValue(hex('7fc0 0000'), { type: 'float32', order: 'ABCD', scale: 1, offset: 0 })).toMatchObject({ ok: false, reason: 'not_finite' });
    expect(decodeValue(hex('7f80 0000'), { type: 'float32', order: 'ABCD', scale: 1, offset: 0 })).toMatchObject({ ok: false, reason: 'not_finite' });
    expect(decodeValue(hex('ff80 0000'), { type: 'float32', order: 'ABCD', scale: 1, offset: 0 })).toMatchObject({ ok: false, reason: 'not_finite' });
    expect(decodeValue(hex('7ff8 0000 0000 0000'), { type: 'float64', order: 'ABCD', scale: 1, offset: 0 })).toMatchObject({ ok: false, reason: 'not_finite' });
    // Finite raw value pushed out of range by the scale.
    expect(decodeValue(hex('7f7f ffff'), { type: 'float32', order: 'ABCD', scale: 1e300, offset: 0 })).toMatchObject({ ok: false, reason: 'not_finite' });
  });

  it('rounds 64-bit integers beyond 2^53 to the nearest double and says so', () => {
    expect(decodeValue(hex('ffff ffff ffff ffff'), { type: 'uint64', order: 'ABCD', scale: 1, offset: 0 })).toEqual({ ok: true, value: 18446744073709551615, rounded: true });
    expect(decodeValue(hex('ffdf ffff ffff ffff'), { type: 'int64', order: 'ABCD', scale: 1, offset: 0 })).toEqual({ ok: true, value: -9007199254740992, rounded: true });
    expect(decodeValue(hex('0020 0000 0000 0000'), { type: 'uint64', order: 'ABCD', scale: 1, offset: 0 })).toEqual({ ok: true, value: 2 ** 53, rounded: false });
  });

  it('refuses a byte count that does not match the type', () => {
    expect(() => decodeRaw(hex('0102'), 'float32', 'ABCD')).toThrow(RangeError);
  });
});
