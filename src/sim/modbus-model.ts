/**
 * The data of a simulated Modbus device: the four tables, fault injection and a log of requests.
 * Shared by the Modbus TCP simulator (modbus-serial ServerTCP, modbus-device.ts) and the RTU
 * responder (modbus-rtu.ts) so that tests can restart a server and keep its values.
 *
 * The value encoder here is written independently of the gateway's decoder
 * (src/sources/modbus/decode.ts): it places bytes with explicit position tables, so a mistake in
 * one is not mirrored by the other.
 */

export type SimTable = 'coil' | 'discrete_input' | 'holding' | 'input';
export type SimType = 'int16' | 'uint16' | 'int32' | 'uint32' | 'int64' | 'uint64' | 'float32' | 'float64';
export type SimOrder = 'ABCD' | 'DCBA' | 'BADC' | 'CDAB';

/** Modbus Application Protocol v1.1b3 §6.1–§6.4: read limits; longer reads get exception 03. */
const MAX_BITS = 2000;
const MAX_REGISTERS = 125;

/**
 * wire[i] = bigEndian[POSITIONS[order][size][i]]: where each byte of the most-significant-first
 * value goes on the wire (A = byte 0). 64-bit: ABCDEFGH, HGFEDCBA, BADCFEHG, GHEFCDAB.
 */
const POSITIONS: Record<SimOrder, Record<2 | 4 | 8, number[]>> = {
  ABCD: { 2: [0, 1], 4: [0, 1, 2, 3], 8: [0, 1, 2, 3, 4, 5, 6, 7] },
  DCBA: { 2: [1, 0], 4: [3, 2, 1, 0], 8: [7, 6, 5, 4, 3, 2, 1, 0] },
  BADC: { 2: [1, 0], 4: [1, 0, 3, 2], 8: [1, 0, 3, 2, 5, 4, 7, 6] },
  CDAB: { 2: [0, 1], 4: [2, 3, 0, 1], 8: [6, 7, 4, 5, 2, 3, 0, 1] },
};

const SIZE: Record<SimType, 2 | 4 | 8> = { int16: 2, uint16: 2, int32: 4, uint32: 4, float32: 4, int64: 8, uint64: 8, float64: 8 };

/** The registers (16-bit words, as sent) that hold `value` as `type` in `order`. */
export function encodeRegisters(value: number | bigint, type: SimType, order: SimOrder): number[] {
  const size = SIZE[type];
  const be = Buffer.alloc(size);
  switch (type) {
    case 'int16':
      be.writeInt16BE(Number(value));
      break;
    case 'uint16':
      be.writeUInt16BE(Number(value));
      break;
    case 'int32':
      be.writeInt32BE(Number(value));
      break;
    case 'uint32':
      be.writeUInt32BE(Number(value));
      break;
    case 'float32':
      be.writeFloatBE(Number(value));
      break;
    case 'int64':
      be.writeBigInt64BE(BigInt(value));
      break;
    case 'uint64':
      be.writeBigUInt64BE(BigInt(value));
      break;
    case 'float64':
      be.writeDoubleBE(Number(value));
      break;
  }
  const wire = POSITIONS[order][size].map((p) => be[p]);
  const words: number[] = [];
  for (let i = 0; i < wire.length; i += 2) words.push((wire[i] << 8) | wire[i + 1]);
  return words;
}

export interface KnownValue {
  /** `float32_CDAB` ... */
  key: string;
  table: 'holding' | 'input';
  address: number;
  type: SimType | 'bit' | 'bool';
  order: SimOrder;
  bit?: number;
  /** What is stored. */
  stored: number | bigint;
  /** What a correct decoder yields (NaN for the not-finite patterns). */
  expected: number;
}

const ORDERS: SimOrder[] = ['ABCD', 'DCBA', 'BADC', 'CDAB'];
const SAMPLE_VALUES: Record<SimType, { stored: number | bigint; expected: number }> = {
  int16: { stored: -12345, expected: -12345 },
  uint16: { stored: 54321, expected: 54321 },
  int32: { stored: -123456789, expected: -123456789 },
  uint32: { stored: 3456789012, expected: 3456789012 },
  float32: { stored: 123.456, expected: 123.456 },
  int64: { stored: -1234567890123456n, expected: -1234567890123456 },
  uint64: { stored: 4503599627370497n, expected: 4503599627370497 },
  float64: { stored: -98765.4321, expected: -98765.4321 },
};

/** First protocol address of the known-values area (holding and input registers alike). */
export const KNOWN_VALUES_BASE = 1000;

/**
 * Known values of every type in every byte order, at fixed addresses from 1000 in both the
 * holding and the input registers (same layout), plus a few special patterns:
 * - every type × order, consecutively from 1000 in the order int16, uint16, int32, uint32,
 *   float32, int64, uint64, float64 (ABCD, DCBA, BADC, CDAB each);
 * - 1100: 0xA005 (bits 0, 2, 13, 15 set) for `bit`; 1101: 0 and 1102: 7 for `bool` on a register;
 * - 1110-1111: float32 NaN; 1112-1113: float32 +Infinity; 1114-1117: float64 NaN (ABCD);
 * - 1120-1123: uint64 18446744073709551615 (beyond 2^53, ABCD).
 * Coils 1000-1007: 1 0 1 1 0 0 1 0. Discrete inputs 1000-1007: 0 1 0 0 1 1 0 1.
 */
export function knownValues(table: 'holding' | 'input' = 'holding'): KnownValue[] {
  const out: KnownValue[] = [];
  let address = KNOWN_VALUES_BASE;
  for (const type of Object.keys(SAMPLE_VALUES) as SimType[]) {
    for (const order of ORDERS) {
      out.push({ key: `${type}_${order}`, table, address, type, order, ...SAMPLE_VALUES[type] });
      address += SIZE[type] / 2;
    }
  }
  for (const bit of [0, 1, 2, 13, 15]) {
    out.push({ key: `bit${bit}`, table, address: 1100, type: 'bit', order: 'ABCD', bit, stored: 0xa005, expected: (0xa005 >> bit) & 1 });
  }
  out.push({ key: 'bool_zero', table, address: 1101, type: 'bool', order: 'ABCD', stored: 0, expected: 0 });
  out.push({ key: 'bool_seven', table, address: 1102, type: 'bool', order: 'ABCD', stored: 7, expected: 1 });
  return out;
}

export const KNOWN_COILS = [1, 0, 1, 1, 0, 0, 1, 0];
export const KNOWN_DISCRETE_INPUTS = [0, 1, 0, 0, 1, 1, 0, 1];
export const SPECIAL_ADDRESSES = { float32NaN: 1110, float32Infinity: 1112, float64NaN: 1114, uint64Max: 1120 } as const;

/**
 * The simulated mixer of the demo plant (machine mch_mixer1; variable ids from
 * src/emulator/demo-fixture.ts). config/examples/modbus.yaml reads exactly these.
 */
export const MODBUS_DEMO_MAP = [
  { variable: 'mvr_mixer1_temperature', table: 'holding', address: 0, type: 'float32', byte_order: 'ABCD', unit: '°C' },
  { variable: 'mvr_mixer1_speed', table: 'holding', address: 2, type: 'uint16', byte_order: 'ABCD', unit: 'rpm' },
  { variable: 'mvr_mixer1_power', table: 'holding', address: 3, type: 'float32', byte_order: 'CDAB', unit: 'kW' },
  { variable: 'mvr_mixer1_energy', table: 'holding', address: 5, type: 'uint32', byte_order: 'ABCD', scale: 0.1, unit: 'kWh' },
  { variable: 'mvr_mixer1_level', table: 'input', address: 0, type: 'int16', byte_order: 'ABCD', scale: 0.1, unit: '%' },
  { variable: 'mvr_mixer1_running', table: 'coil', address: 0, type: 'bool', unit: 'bool' },
] as const;

export interface SimFault {
  table?: SimTable;
  /** First and last protocol address the fault covers (a request touching any of them trips it). */
  from: number;
  to: number;
  unitId?: number;
  /** Answer with this exception code (§7). */
  exception?: number;
  /** Do not answer at all. */
  silent?: boolean;
}

export interface SimRequest {
  unitId: number;
  functionCode: number;
  address: number;
  quantity: number;
}

export type SimAnswer = { kind: 'data'; bytes: Buffer } | { kind: 'exception'; code: number } | { kind: 'silent' };

const TABLE_BY_FC: Record<number, SimTable> = { 1: 'coil', 2: 'discrete_input', 3: 'holding', 4: 'input' };

export class SimulatedDevice {
  readonly coils = new Uint8Array(65_536);
  readonly discreteInputs = new Uint8Array(65_536);
  readonly holding = new Uint16Array(65_536);
  readonly input = new Uint16Array(65_536);
  private faults: SimFault[] = [];
  /** Extra time before every answer. */
  delayMs = 0;
  private readonly log: SimRequest[] = [];
  private count = 0;

  constructor(options: { knownValues?: boolean } = {}) {
    if (options.knownValues !== false) this.loadKnownValues();
  }

  loadKnownValues(): void {
    for (const table of ['holding', 'input'] as const) {
      for (const k of knownValues(table)) {
        if (k.type === 'bit' || k.type === 'bool') this.setRegisters(table, k.address, [Number(k.stored)]);
        else this.setRegisters(table, k.address, encodeRegisters(k.stored, k.type, k.order));
      }
      this.setRegisters(table, SPECIAL_ADDRESSES.float32NaN, [0x7fc0, 0x0000]);
      this.setRegisters(table, SPECIAL_ADDRESSES.float32Infinity, [0x7f80, 0x0000]);
      this.setRegisters(table, SPECIAL_ADDRESSES.float64NaN, [0x7ff8, 0, 0, 0]);
      this.setRegisters(table, SPECIAL_ADDRESSES.uint64Max, [0xffff, 0xffff, 0xffff, 0xffff]);
    }
    KNOWN_COILS.forEach((b, i) => (this.coils[KNOWN_VALUES_BASE + i] = b));
    KNOWN_DISCRETE_INPUTS.forEach((b, i) => (this.discreteInputs[KNOWN_VALUES_BASE + i] = b));
  }

  setRegisters(table: 'holding' | 'input', address: number, words: readonly number[]): void {
    const target = table === 'holding' ? this.holding : this.input;
    words.forEach((w, i) => (target[address + i] = w & 0xffff));
  }

  setValue(table: 'holding' | 'input', address: number, value: number | bigint, type: SimType, order: SimOrder = 'ABCD'): void {
    this.setRegisters(table, address, encodeRegisters(value, type, order));
  }

  setBits(table: 'coil' | 'discrete_input', address: number, bits: ReadonlyArray<boolean | number>): void {
    const target = table === 'coil' ? this.coils : this.discreteInputs;
    bits.forEach((b, i) => (target[address + i] = b ? 1 : 0));
  }

  injectFault(fault: SimFault): void {
    this.faults.push(fault);
  }

  clearFaults(): void {
    this.faults = [];
    this.delayMs = 0;
  }

  /** Records a request as seen on the wire (before any fault applies). */
  record(req: SimRequest): void {
    this.count += 1;
    this.log.push(req);
    if (this.log.length > 10_000) this.log.splice(0, this.log.length - 10_000);
  }

  requestCount(filter: Partial<SimRequest> = {}): number {
    if (Object.keys(filter).length === 0) return this.count;
    return this.log.filter((r) => Object.entries(filter).every(([k, v]) => r[k as keyof SimRequest] === v)).length;
  }

  requests(): SimRequest[] {
    return [...this.log];
  }

  resetRequests(): void {
    this.count = 0;
    this.log.length = 0;
  }

  /** The fault a request trips, if any. */
  faultFor(unitId: number, table: SimTable, address: number, quantity: number): SimFault | undefined {
    const last = address + Math.max(1, quantity) - 1;
    return this.faults.find((f) => (f.table === undefined || f.table === table) && (f.unitId === undefined || f.unitId === unitId) && f.from <= last && f.to >= address);
  }

  /** Answers a read (FC1-FC4) as the device would, faults included. */
  answer(unitId: number, functionCode: number, address: number, quantity: number): SimAnswer {
    const table = TABLE_BY_FC[functionCode];
    if (!table) return { kind: 'exception', code: 1 };
    const bits = table === 'coil' || table === 'discrete_input';
    if (quantity < 1 || quantity > (bits ? MAX_BITS : MAX_REGISTERS)) return { kind: 'exception', code: 3 };
    if (address + quantity > 65_536) return { kind: 'exception', code: 2 };
    const fault = this.faultFor(unitId, table, address, quantity);
    if (fault?.silent) return { kind: 'silent' };
    if (fault?.exception !== undefined) return { kind: 'exception', code: fault.exception };
    if (bits) {
      const source = table === 'coil' ? this.coils : this.discreteInputs;
      const bytes = Buffer.alloc(Math.ceil(quantity / 8));
      for (let i = 0; i < quantity; i++) if (source[address + i]) bytes[i >> 3] |= 1 << (i & 7);
      return { kind: 'data', bytes };
    }
    const source = table === 'holding' ? this.holding : this.input;
    const bytes = Buffer.alloc(quantity * 2);
    for (let i = 0; i < quantity; i++) bytes.writeUInt16BE(source[address + i], i * 2);
    return { kind: 'data', bytes };
  }
}

/**
 * Moves the demo values a little every tick: temperature and power follow slow sines, speed
 * wobbles around 1200 rpm, energy counts up with power, the tank level rises and drains, and the
 * mixer stops for 10 s every 2 minutes.
 */
export function startDemoValues(device: SimulatedDevice, intervalMs = 500): () => void {
  let energyTenthsKwh = 123_450;
  const started = Date.now();
  let last = started;
  const tick = () => {
    const now = Date.now();
    const t = (now - started) / 1000;
    const running = t % 120 < 110;
    const temperature = Math.round((65 + 5 * Math.sin(t / 60)) * 100) / 100;
    const speed = running ? Math.round(1200 + 50 * Math.sin(t / 7)) : 0;
    const power = running ? Math.round((15 + 3 * Math.sin(t / 20)) * 100) / 100 : 0.4;
    energyTenthsKwh += ((power * (now - last)) / 3_600_000) * 10; // kW × h, in 0.1 kWh
    last = now;
    const level = Math.round(500 + 400 * Math.sin(t / 90));
    device.setValue('holding', 0, temperature, 'float32', 'ABCD');
    device.setValue('holding', 2, speed, 'uint16');
    device.setValue('holding', 3, power, 'float32', 'CDAB');
    device.setValue('holding', 5, Math.floor(energyTenthsKwh) >>> 0, 'uint32', 'ABCD');
    device.setValue('input', 0, level, 'int16');
    device.setBits('coil', 0, [running]);
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
