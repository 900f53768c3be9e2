import { resolveAddress, TABLE_INFO, describeRange, type AddressBase, type Table } from './address.js';
import { REGISTER_COUNT, type ByteOrder, type DataType } from './decode.js';
import type { ModbusDeviceConfig, ModbusSectionConfig, ModbusSerialConfig } from './config.js';

/**
 * From validated settings to what the poller does each cycle: every register resolved to a
 * protocol address and span, and the registers of each table grouped into as few read requests as
 * the limits allow (Modbus Application Protocol v1.1b3 §6.1–§6.4: at most 2,000 bits or 125
 * registers per read). Pure functions; the problems found are returned with the path of the
 * setting at fault.
 */

export interface PlannedValue {
  /** Index in the device's `registers` list, for messages. */
  index: number;
  variable: string;
  table: Table;
  /** Protocol address (0-based) of the first register or bit. */
  address: number;
  /** Registers (or bits) the value spans. */
  count: number;
  type: DataType;
  order: ByteOrder;
  bit?: number;
  scale: number;
  offset: number;
}

/** One read request: a contiguous range of one table covering one or more values. */
export interface ReadBlock {
  table: Table;
  start: number;
  count: number;
  values: PlannedValue[];
}

export type Endpoint =
  | { transport: 'tcp' | 'rtu_over_tcp'; host: string; port: number }
  | { transport: 'rtu'; path: string; baudRate: number; parity: ModbusSerialConfig['parity']; dataBits: number; stopBits: number };

export interface DevicePlan {
  name: string;
  index: number;
  endpoint: Endpoint;
  unitId: number;
  pollIntervalMs: number;
  timeoutMs: number;
  retries: number;
  addressBase: AddressBase;
  requestDelayMs: number;
  splitOnIllegalAddress: boolean;
  maxGap: number;
  maxBitGap: number;
  maxRegisters: number;
  maxBits: number;
  values: PlannedValue[];
  blocks: ReadBlock[];
}

export interface PlanProblem {
  /** Path below the `modbus` key. */
  path: Array<string | number>;
  message: string;
}

export interface SectionPlan {
  devices: DevicePlan[];
  problems: PlanProblem[];
  /** Allowed but suspicious settings (a plain number that looks like a Modicon reference). */
  warnings: PlanProblem[];
}

/** `tcp://host:502`, `rtu:/dev/ttyUSB0`: devices with the same key share one connection. */
export function endpointKey(e: Endpoint): string {
  return e.transport === 'rtu' ? `rtu:${e.path}` : `${e.transport === 'tcp' ? 'tcp' : 'rtu-over-tcp'}://${e.host}:${e.port}`;
}

export function planSection(section: ModbusSectionConfig): SectionPlan {
  const problems: PlanProblem[] = [];
  const warnings: PlanProblem[] = [];
  const devices: DevicePlan[] = [];
  const deviceNames = new Map<string, number>();
  const variables = new Map<string, string>();
  const serialPorts = new Map<string, { index: number; serial: ModbusSerialConfig }>();

  section.devices.forEach((device, d) => {
    const at = (...rest: Array<string | number>) => ['devices', d, ...rest];
    const other = deviceNames.get(device.name);
    if (other !== undefined) problems.push({ path: at('name'), message: `"${device.name}" is also the name of devices[${other}]; device names label metrics and must be unique` });
    else deviceNames.set(device.name, d);

    const endpoint = endpointOf(device, d, problems, serialPorts);
    const values: PlannedValue[] = [];
    device.registers.forEach((reg, r) => {
      const v = planValue(device, d, r, problems, warnings);
      if (!v) return;
      const seen = variables.get(v.variable);
      if (seen) problems.push({ path: at('registers', r, 'variable'), message: `${v.variable} is also fed by ${seen}; each machine variable may come from one register only` });
      else variables.set(v.variable, `devices[${d}].registers[${r}]`);
      values.push(v);
    });
    problems.push(...findOverlaps(device, d, values));

    const blocks = [
      ...coalesce(values.filter((v) => TABLE_INFO[v.table].bits), device.max_bit_gap, device.max_bits_per_request),
      ...coalesce(values.filter((v) => !TABLE_INFO[v.table].bits), device.max_gap, device.max_registers_per_request),
    ];
    if (endpoint) {
      devices.push({
        name: device.name,
        index: d,
        endpoint,
        unitId: device.unit_id,
        pollIntervalMs: device.poll_interval,
        timeoutMs: device.timeout,
        retries: device.retries,
        addressBase: device.address_base,
        requestDelayMs: device.quirks.request_delay,
        splitOnIllegalAddress: device.quirks.split_on_illegal_address,
        maxGap: device.max_gap,
        maxBitGap: device.max_bit_gap,
        maxRegisters: device.max_registers_per_request,
        maxBits: device.max_bits_per_request,
        values,
        blocks,
      });
    }
  });
  return { devices, problems, warnings };
}

function endpointOf(device: ModbusDeviceConfig, d: number, problems: PlanProblem[], serialPorts: Map<string, { index: number; serial: ModbusSerialConfig }>): Endpoint | undefined {
  const at = (...rest: Array<string | number>) => ['devices', d, ...rest];
  if (device.transport === 'rtu') {
    if (device.host !== undefined) problems.push({ path: at('host'), message: 'is only used with transport tcp or rtu_over_tcp (this device uses rtu: set serial.path instead)' });
    if (!device.serial) {
      problems.push({ path: at('serial'), message: 'required setting is missing for transport rtu (serial: {path: /dev/ttyUSB0, baud_rate: 9600, ...})' });
      return undefined;
    }
    checkSerialUnitId(device, d, problems);
    const s = device.serial;
    const shared = serialPorts.get(s.path);
    if (shared) {
      for (const key of ['baud_rate', 'parity', 'data_bits', 'stop_bits'] as const) {
        if (shared.serial[key] !== s[key]) {
          problems.push({
            path: at('serial', key),
            message: `${JSON.stringify(s[key])} differs from ${JSON.stringify(shared.serial[key])} of devices[${shared.index}] on the same port ${s.path}; devices on one bus share its settings`,
          });
        }
      }
    } else {
      serialPorts.set(s.path, { index: d, serial: s });
    }
    return { transport: 'rtu', path: s.path, baudRate: s.baud_rate, parity: s.parity, dataBits: s.data_bits, stopBits: s.stop_bits };
  }
  if (device.serial !== undefined) problems.push({ path: at('serial'), message: `is only used with transport rtu (this device uses ${device.transport})` });
  if (device.host === undefined) {
    problems.push({ path: at('host'), message: `required setting is missing for transport ${device.transport}` });
    return undefined;
  }
  if (device.transport === 'rtu_over_tcp') checkSerialUnitId(device, d, problems);
  return { transport: device.transport, host: device.host, port: device.port };
}

/** Modbus over Serial Line v1.02 §2.2: 0 is broadcast (no answer), 248-255 are reserved. */
function checkSerialUnitId(device: ModbusDeviceConfig, d: number, problems: PlanProblem[]): void {
  if (device.unit_id < 1 || device.unit_id > 247) {
    problems.push({ path: ['devices', d, 'unit_id'], message: `${device.unit_id} is not a serial unit address: ${device.transport} devices answer on 1-247 (0 is broadcast and gets no response)` });
  }
}

function planValue(device: ModbusDeviceConfig, d: number, r: number, problems: PlanProblem[], warnings: PlanProblem[]): PlannedValue | undefined {
  const reg = device.registers[r];
  const at = (...rest: Array<string | number>) => ['devices', d, 'registers', r, ...rest];
  const before = problems.length;

  const resolved = resolveAddress(reg.address, device.address_base);
  if (!resolved.ok) {
    problems.push({ path: at('address'), message: resolved.problem });
    return undefined;
  }
  let table: Table | undefined = reg.table;
  if (resolved.table) {
    if (table && table !== resolved.table) {
      problems.push({ path: at('table'), message: `"${table}" contradicts address ${JSON.stringify(reg.address)}, which is a Modicon reference to the ${TABLE_INFO[resolved.table].plural}` });
    }
    table = resolved.table;
  } else if (!table) {
    problems.push({ path: at('table'), message: 'required setting is missing (coil, discrete_input, holding or input), unless address is a quoted Modicon reference like "40001"' });
    return undefined;
  } else if (typeof reg.address === 'number' && looksModicon(reg.address, table)) {
    warnings.push({
      path: at('address'),
      message: `${reg.address} is read as ${TABLE_INFO[table].singular} ${reg.address - device.address_base} (a plain number); if the manual means the Modicon reference, write "${reg.address}" in quotes`,
    });
  }
  const info = TABLE_INFO[table];
  const type: DataType = reg.type ?? (info.bits ? 'bool' : 'uint16');
  if (info.bits && type !== 'bool') {
    problems.push({ path: at('type'), message: `"${type}" cannot be read from ${info.plural}: they hold single bits; use type bool (or read a holding/input register)` });
  }
  if (info.bits && reg.byte_order !== undefined) {
    problems.push({ path: at('byte_order'), message: `is only used for registers; ${info.plural} are single bits` });
  }
  if (type === 'bit' && reg.bit === undefined) problems.push({ path: at('bit'), message: 'required setting is missing for type bit (0 = least significant bit of the register, 15 = most significant)' });
  if (type !== 'bit' && reg.bit !== undefined) problems.push({ path: at('bit'), message: `is only used with type bit (type is ${type})` });

  const count = info.bits ? 1 : REGISTER_COUNT[type];
  const last = resolved.protocolAddress + count - 1;
  if (last > 65_535) {
    problems.push({
      path: at('address'),
      message: `${JSON.stringify(reg.address)} is too close to the end: a ${type} needs ${count} registers (${resolved.protocolAddress}-${last}) but the last protocol address is 65535`,
    });
  }
  const max = info.bits ? device.max_bits_per_request : device.max_registers_per_request;
  if (count > max) {
    problems.push({ path: at('type'), message: `"${type}" needs ${count} registers in one request but max_registers_per_request of device "${device.name}" is ${max}` });
  }
  if (problems.length > before) return undefined;
  return {
    index: r,
    variable: reg.variable,
    table,
    address: resolved.protocolAddress,
    count,
    type,
    order: reg.byte_order ?? device.byte_order,
    ...(type === 'bit' ? { bit: reg.bit } : {}),
    scale: reg.scale,
    offset: reg.offset,
  };
}

/** 40001-49999 for holding, 30001-39999 for input, 10001-19999 for discrete inputs. */
function looksModicon(address: number, table: Table): boolean {
  const digit = TABLE_INFO[table].modiconDigit;
  if (digit === '0') return false;
  const text = String(address);
  return (text.length === 5 || text.length === 6) && text[0] === digit;
}

/**
 * Two values may not read the same register, except `bit` values, which pick bits out of a
 * register and may share it with each other (different bits) and with a whole-register value.
 */
function findOverlaps(device: ModbusDeviceConfig, d: number, values: PlannedValue[]): PlanProblem[] {
  const problems: PlanProblem[] = [];
  const sorted = [...values].sort((a, b) => (a.table === b.table ? a.address - b.address : a.table < b.table ? -1 : 1));
  const describe = (v: PlannedValue) => `${describeRange(v.table, v.address, v.count, device.address_base)} (${v.variable}, ${v.type}${v.type === 'bit' ? ` ${v.bit}` : ''})`;
  const report = (a: PlannedValue, b: PlannedValue, why: string) => {
    const [first, second] = a.index < b.index ? [a, b] : [b, a];
    problems.push({
      path: ['devices', d, 'registers', second.index],
      message: `${describe(second)} of device "${device.name}" ${why} registers[${first.index}]: ${describe(first)}`,
    });
  };
  for (let i = 0; i < sorted.length; i++) {
    const a = sorted[i];
    for (let j = i + 1; j < sorted.length; j++) {
      const b = sorted[j];
      if (b.table !== a.table || b.address > a.address + a.count - 1) break;
      if (a.type === 'bit' && b.type === 'bit') {
        if (a.bit === b.bit) report(a, b, 'reads the same bit as');
      } else if (a.type !== 'bit' && b.type !== 'bit') {
        report(a, b, 'overlaps');
      }
    }
  }
  return problems;
}

/**
 * Groups values of one table into read blocks, in address order. A value joins the current block
 * when the unused addresses between them are at most `maxGap` (overlapping or adjacent values
 * always qualify for `maxGap >= 0`; `maxGap = -1` joins only values that overlap) and the block
 * stays within `maxCount`. Values must each fit `maxCount` (checked by `planValue`).
 */
export function coalesce(values: readonly PlannedValue[], maxGap: number, maxCount: number): ReadBlock[] {
  const byTable = new Map<Table, PlannedValue[]>();
  for (const v of values) {
    const list = byTable.get(v.table) ?? [];
    list.push(v);
    byTable.set(v.table, list);
  }
  const blocks: ReadBlock[] = [];
  for (const [table, list] of byTable) {
    list.sort((a, b) => a.address - b.address || a.index - b.index);
    let current: ReadBlock | undefined;
    for (const v of list) {
      const end = v.address + v.count; // exclusive
      if (current) {
        const currentEnd = current.start + current.count;
        const gap = v.address - currentEnd;
        const newCount = Math.max(currentEnd, end) - current.start;
        if (gap <= maxGap && newCount <= maxCount) {
          current.count = newCount;
          current.values.push(v);
          continue;
        }
      }
      current = { table, start: v.address, count: v.count, values: [v] };
      blocks.push(current);
    }
  }
  return blocks;
}
