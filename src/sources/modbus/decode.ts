/**
 * Turning Modbus register and bit bytes into numbers. Pure functions, no I/O.
 *
 * Modbus itself only defines 16-bit registers sent most significant byte first ("big-endian",
 * Modbus Application Protocol v1.1b3 §4.2) and single bits packed least significant bit first
 * (§6.1, §6.2). Anything wider than one register is a device convention, so the byte order of
 * 32- and 64-bit values is a per-register setting. The four names follow the usual ABCD notation
 * (A = most significant byte of the value):
 *
 *   order  32-bit wire bytes   64-bit wire bytes      16-bit wire bytes   also known as
 *   ABCD   A B C D             A B C D E F G H        A B                 big-endian (Motorola)
 *   DCBA   D C B A             H G F E D C B A        B A                 little-endian (Intel)
 *   BADC   B A D C             B A D C F E H G        B A                 big-endian, bytes swapped
 *   CDAB   C D A B             G H E F C D A B        A B                 little-endian words ("word swap")
 *
 * "Wire bytes" are the data bytes in the order they arrive (register n high byte, register n low
 * byte, register n+1 high byte ...). For a single register, CDAB equals ABCD and BADC equals
 * DCBA, because there is only one word to swap.
 */

export const DATA_TYPES = ['bool', 'bit', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'float32', 'float64'] as const;
export type DataType = (typeof DATA_TYPES)[number];

export const BYTE_ORDERS = ['ABCD', 'DCBA', 'BADC', 'CDAB'] as const;
export type ByteOrder = (typeof BYTE_ORDERS)[number];

/** Types whose value spans one or more 16-bit registers (everything except a coil-style bool). */
export const REGISTER_TYPES: readonly DataType[] = ['bool', 'bit', 'int16', 'uint16', 'int32', 'uint32', 'int64', 'uint64', 'float32', 'float64'];
/** Types that can be read from coils and discrete inputs (single bits, §6.1/§6.2). */
export const BIT_TABLE_TYPES: readonly DataType[] = ['bool'];

/** Number of 16-bit registers a value of the type occupies. */
export const REGISTER_COUNT: Record<DataType, number> = {
  bool: 1,
  bit: 1,
  int16: 1,
  uint16: 1,
  int32: 2,
  uint32: 2,
  int64: 4,
  uint64: 4,
  float32: 2,
  float64: 4,
};

/** Largest integer a double holds exactly (2^53). 64-bit integers beyond it are rounded. */
export const MAX_EXACT_INTEGER = 2n ** 53n;

/**
 * Copies `wire` (bytes as received, 2 per register) into most-significant-byte-first order,
 * according to `order` (see the table at the top of this file).
 */
export function toBigEndian(wire: Uint8Array, order: ByteOrder): Buffer {
  const n = wire.length;
  const out = Buffer.allocUnsafe(n);
  switch (order) {
    case 'ABCD':
      out.set(wire);
      break;
    case 'DCBA':
      for (let i = 0; i < n; i++) out[i] = wire[n - 1 - i];
      break;
    case 'BADC':
      for (let i = 0; i + 1 < n; i += 2) {
        out[i] = wire[i + 1];
        out[i + 1] = wire[i];
      }
      break;
    case 'CDAB': {
      // Registers in reverse order, each register's bytes kept.
      const words = n >> 1;
      for (let w = 0; w < words; w++) {
        const from = (words - 1 - w) * 2;
        out[w * 2] = wire[from];
        out[w * 2 + 1] = wire[from + 1];
      }
      break;
    }
  }
  return out;
}

/**
 * The raw number held in `wire` (exactly `REGISTER_COUNT[type] * 2` bytes). Floats may be NaN or
 * ±Infinity here; 64-bit integers come back as bigint so nothing is rounded yet. `bool` on a
 * register is 1 when any bit is set; `bit` picks bit `bit` (0 = least significant) of the 16-bit
 * value after `order` is applied.
 */
export function decodeRaw(wire: Uint8Array, type: DataType, order: ByteOrder, bit = 0): number | bigint {
  const expected = REGISTER_COUNT[type] * 2;
  if (wire.length !== expected) throw new RangeError(`${type} needs ${expected} bytes, got ${wire.length}`);
  const be = toBigEndian(wire, order);
  switch (type) {
    case 'bool':
      return be.readUInt16BE(0) !== 0 ? 1 : 0;
    case 'bit':
      return (be.readUInt16BE(0) >> bit) & 1;
    case 'int16':
      return be.readInt16BE(0);
    case 'uint16':
      return be.readUInt16BE(0);
    case 'int32':
      return be.readInt32BE(0);
    case 'uint32':
      return be.readUInt32BE(0);
    case 'int64':
      return be.readBigInt64BE(0);
    case 'uint64':
      return be.readBigUInt64BE(0);
    case 'float32':
      return be.readFloatBE(0);
    case 'float64':
      return be.readDoubleBE(0);
  }
}

/** Bit `index` of a coil/discrete-input response: first bit is the LSB of the first byte (§6.1). */
export function bitAt(bytes: Uint8Array, index: number): number {
  return (bytes[index >> 3] >> (index & 7)) & 1;
}

/**
 * The shortest decimal that reads back as the same 32-bit float, as a double: a device's 0.1f is
 * sent as 0.1 and not as 0.10000000149011612. 9 significant digits always round-trip (IEEE 754
 * §5.12.2), so the loop ends.
 */
export function float32ToShortest(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  for (let p = 7; p < 9; p++) {
    const candidate = Number(x.toPrecision(p));
    if (Math.fround(candidate) === x) return candidate;
  }
  return Number(x.toPrecision(9));
}

export interface ValueSpec {
  type: DataType;
  order: ByteOrder;
  bit?: number;
  scale: number;
  offset: number;
}

export type DecodeOutcome =
  | { ok: true; value: number; /** true when a 64-bit integer was beyond ±2^53 and got rounded */ rounded: boolean }
  | { ok: false; reason: 'not_finite'; raw: number };

/**
 * Engineering value = raw × scale + offset, as a finite number.
 *
 * - float32 is first turned into its shortest decimal (see `float32ToShortest`).
 * - int64/uint64 beyond ±2^53 are rounded to the nearest double (relative error below 1.2e-16)
 *   and flagged `rounded` so the caller can say so once in the log; they are not refused.
 * - When scale or offset is not neutral, the result is rounded to 15 significant digits so that
 *   123 × 0.1 is sent as 12.3 and not 12.300000000000001.
 * - NaN and ±Infinity (a float register holding a "no value" pattern) are refused as `not_finite`.
 */
export function decodeValue(wire: Uint8Array, spec: ValueSpec): DecodeOutcome {
  const raw = decodeRaw(wire, spec.type, spec.order, spec.bit);
  return scaleRaw(raw, spec);
}

export function scaleRaw(raw: number | bigint, spec: Pick<ValueSpec, 'type' | 'scale' | 'offset'>): DecodeOutcome {
  let rounded = false;
  let n: number;
  if (typeof raw === 'bigint') {
    rounded = raw > MAX_EXACT_INTEGER || raw < -MAX_EXACT_INTEGER;
    n = Number(raw);
  } else {
    n = spec.type === 'float32' ? float32ToShortest(raw) : raw;
  }
  if (!Number.isFinite(n)) return { ok: false, reason: 'not_finite', raw: n };
  if (spec.scale !== 1 || spec.offset !== 0) {
    n = n * spec.scale + spec.offset;
    if (!Number.isFinite(n)) return { ok: false, reason: 'not_finite', raw: n };
    n = Number(n.toPrecision(15));
  }
  return { ok: true, value: n, rounded };
}
