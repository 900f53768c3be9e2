import { BinaryStream, DataChangeNotification } from 'node-opcua';

/**
 * The values of one DataChangeNotification (Part 4 §7.20.2) as columns: what the gateway needs of
 * each MonitoredItemNotification, read straight from the message bytes.
 *
 * node-opcua decodes every value of a Publish response into a MonitoredItemNotification, a
 * DataValue, a Variant, a StatusCode and two Dates with their picoseconds: six objects and a few
 * hundred bytes of heap per value, garbage as soon as the value is stored. At 100,000 values a
 * second that decoding and its garbage collection were a large part of the gateway's CPU per value
 * (bench/plant-scale.ts with the open62541 server). Here a notification whose every value is
 * simple (a scalar Boolean, integer of up to 32 bits, Float or Double, or none; a status code;
 * timestamps) is read into typed arrays in one pass, and node-opcua's own objects are built only
 * if something asks for `monitoredItems` (from a copy of the bytes, by node-opcua's own decoder,
 * so it gets exactly what it would have). Anything else (strings, arrays, 64-bit integers,
 * structures, diagnostic infos) is decoded by node-opcua as before.
 */
export interface DataChanges {
  count: number;
  /** Client handle of each value (the monitored item it belongs to). */
  readonly handles: Uint32Array;
  /** The value's StatusCode (Part 4 §7.39), 0 (Good) when the server sent none. */
  readonly status: Uint32Array;
  /** Built-in type of the value (Part 6 §5.1.2: 1 Boolean … 11 Double), 0 when it has none. */
  readonly types: Uint8Array;
  /** The value as a number (Boolean: 0/1). */
  readonly values: Float64Array;
  /** SourceTimestamp and ServerTimestamp, epoch ms, NaN when absent. */
  readonly source: Float64Array;
  readonly server: Float64Array;
}

const COLUMNS = Symbol('data change columns');

/** The columns of a notification decoded by the fast path, or undefined (node-opcua decoded it). */
export function dataChangesOf(n: unknown): DataChanges | undefined {
  return n !== null && typeof n === 'object' ? (n as { [COLUMNS]?: DataChanges })[COLUMNS] : undefined;
}

// DataValue encoding mask (Part 6 §5.2.2.17).
const HAS_VALUE = 0x01;
const HAS_STATUS = 0x02;
const HAS_SOURCE_TS = 0x04;
const HAS_SERVER_TS = 0x08;
const HAS_SOURCE_PS = 0x10;
const HAS_SERVER_PS = 0x20;
const UNKNOWN_MASK_BITS = 0xc0;
/** Variant encoding byte: array flags (Part 6 §5.2.2.16). */
const VARIANT_ARRAY_BITS = 0xc0;

/** 2^32 = 429,496 × 10,000 + 7,296: a DateTime's 100 ns ticks to ms without 64-bit arithmetic (see below). */
const TICKS_HI_MS = 429_496;
const TICKS_HI_REST = 7_296;
/** ms from 1601-01-01 to 1970-01-01 (Part 6 §5.2.2.5). */
const EPOCH_1601_MS = 11_644_473_600_000;

/*
 * A DateTime (Int64 of 100 ns since 1601, little endian) to epoch ms, truncated to the ms as
 * node-opcua's Date is: ticks = hi·2^32 + lo, so ms = hi·429,496 + ⌊(hi·7,296 + lo) / 10,000⌋,
 * every term exact in a double (readColumns).
 */

/** Bytes of a scalar of built-in type `t` this decoder takes, 0 for any other type. */
const SCALAR_BYTES = [0, 1, 1, 1, 2, 2, 4, 4, 0, 0, 4, 8];

/** Float and Double are read through these (Buffer.readDoubleLE returns each one as a new heap number). */
const scratch = new Uint8Array(8);
const scratchDouble = new Float64Array(scratch.buffer);
const scratchFloat = new Float32Array(scratch.buffer, 0, 1);

function readScalar(b: Buffer, pos: number, t: number): number {
  switch (t) {
    case 11:
      for (let k = 0; k < 8; k++) scratch[k] = b[pos + k];
      return scratchDouble[0];
    case 10:
      for (let k = 0; k < 4; k++) scratch[k] = b[pos + k];
      return scratchFloat[0];
    case 1:
      return b[pos] !== 0 ? 1 : 0;
    case 2:
      return b.readInt8(pos);
    case 3:
      return b[pos];
    case 4:
      return b.readInt16LE(pos);
    case 5:
      return b.readUInt16LE(pos);
    case 6:
      return b.readInt32LE(pos);
    case 7:
      return b.readUInt32LE(pos);
    default:
      return NaN;
  }
}

/**
 * Reads a DataChangeNotification body at `start` into columns; null when a value is not simple
 * (or the bytes run out), so node-opcua decodes it instead. Sets `end` to where the body ends.
 */
function readColumns(b: Buffer, start: number, out: { end: number }): DataChanges | null {
  const limit = b.length;
  let pos = start;
  if (pos + 4 > limit) return null;
  const count = b.readInt32LE(pos);
  pos += 4;
  // A null array (-1) or a count the bytes cannot hold: node-opcua's decoder says what it is.
  if (count < 0 || count * 5 > limit - pos) return null;
  const handles = new Uint32Array(count);
  const status = new Uint32Array(count);
  const types = new Uint8Array(count);
  const values = new Float64Array(count);
  const source = new Float64Array(count);
  const server = new Float64Array(count);
  for (let i = 0; i < count; i++) {
    if (pos + 5 > limit) return null;
    handles[i] = b.readUInt32LE(pos);
    const mask = b[pos + 4];
    pos += 5;
    if (mask & UNKNOWN_MASK_BITS) return null;
    if (mask & HAS_VALUE) {
      if (pos + 1 > limit) return null;
      const enc = b[pos++];
      const t = enc & 0x3f;
      if (enc & VARIANT_ARRAY_BITS) return null;
      if (t !== 0) {
        const size = SCALAR_BYTES[t] ?? 0;
        if (size === 0 || pos + size > limit) return null;
        values[i] = readScalar(b, pos, t);
        types[i] = t;
        pos += size;
      }
    }
    if (mask & HAS_STATUS) {
      if (pos + 4 > limit) return null;
      status[i] = b.readUInt32LE(pos);
      pos += 4;
    }
    source[i] = NaN;
    server[i] = NaN;
    // dateTimeMs written out here: a double returned by a call V8 did not inline is a heap object.
    if (mask & HAS_SOURCE_TS) {
      if (pos + 8 > limit) return null;
      const lo = b.readUInt32LE(pos);
      const hi = b.readUInt32LE(pos + 4);
      source[i] = hi * TICKS_HI_MS + Math.floor((hi * TICKS_HI_REST + lo) / 10_000) - EPOCH_1601_MS;
      pos += 8;
    }
    if (mask & HAS_SOURCE_PS) pos += 2;
    if (mask & HAS_SERVER_TS) {
      if (pos + 8 > limit) return null;
      const lo = b.readUInt32LE(pos);
      const hi = b.readUInt32LE(pos + 4);
      server[i] = hi * TICKS_HI_MS + Math.floor((hi * TICKS_HI_REST + lo) / 10_000) - EPOCH_1601_MS;
      pos += 8;
    }
    if (mask & HAS_SERVER_PS) pos += 2;
  }
  // DiagnosticInfos: none (-1) or empty, else node-opcua's decoder.
  if (pos + 4 > limit) return null;
  const diagnostics = b.readInt32LE(pos);
  if (diagnostics > 0) return null;
  out.end = pos + 4;
  return { count, handles, status, types, values, source, server };
}

let installed = false;

/**
 * Replaces DataChangeNotification's decoder with the columnar fast path (idempotent). Whoever
 * reads `monitoredItems` of a fast-decoded notification gets node-opcua's objects, decoded then
 * from a copy of its bytes.
 */
export function installDataChangeDecoder(): void {
  if (installed) return;
  installed = true;
  const proto = DataChangeNotification.prototype as DataChangeNotification & { decode(stream: BinaryStream): void };
  const original = proto.decode;
  proto.decode = function decode(this: DataChangeNotification, stream: BinaryStream): void {
    const start = stream.length;
    const at = { end: start };
    const columns = readColumns(stream.buffer, start, at);
    if (!columns) {
      original.call(this, stream);
      return;
    }
    stream.length = at.end;
    const bytes = Buffer.from(stream.buffer.subarray(start, at.end));
    let decoded: DataChangeNotification | null = null;
    const full = (): DataChangeNotification => {
      if (!decoded) {
        decoded = new DataChangeNotification(null);
        original.call(decoded, new BinaryStream(bytes));
      }
      return decoded;
    };
    (this as unknown as { [COLUMNS]: DataChanges })[COLUMNS] = columns;
    for (const field of ['monitoredItems', 'diagnosticInfos'] as const) {
      let replaced = false;
      let value: unknown;
      Object.defineProperty(this, field, {
        configurable: true,
        enumerable: true,
        get: () => (replaced ? value : full()[field]),
        set: (v: unknown) => {
          replaced = true;
          value = v;
        },
      });
    }
  };
}
