import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { validateConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/core/errors.js';
import { createModbusSources } from '../../../src/sources/modbus/index.js';
import { capturingLogger, parseSection } from './helpers.js';
import { createMetrics } from '../../../src/core/metrics.js';
import { SourceStats } from '../../../src/core/source.js';
import { systemClock } from '../../../src/core/clock.js';

process.env.MODBUS_TEST_SECRET = 'x';
const base = {
  service: {
    base_url: 'http://127.0.0.1:9/tracking/v1',
    auth_url: 'http://127.0.0.1:9',
    organisation_id: 'org_demo',
    auth: { mode: 'client_credentials', client_id: 'gw', client_secret: { env: 'MODBUS_TEST_SECRET' } },
  },
};

function problemsOf(modbus: unknown): string[] {
  try {
    validateConfig({ ...base, modbus });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected the config to be refused');
}

const reg = (r: Record<string, unknown>) => ({ variable: 'mvr_a', table: 'holding', address: 0, ...r });
const tcp = (registers: unknown[], extra: Record<string, unknown> = {}) => ({ devices: [{ name: 'mixer1', host: '10.0.0.5', registers, ...extra }] });

describe('modbus config', () => {
  it('applies documented defaults', () => {
    const { config } = validateConfig({ ...base, modbus: tcp([reg({})]) });
    const d = config.modbus!.devices[0];
    expect(config.modbus!.name).toBe('modbus');
    expect(d).toMatchObject({ transport: 'tcp', port: 502, unit_id: 1, poll_interval: 1000, timeout: 1000, retries: 1, address_base: 0, byte_order: 'ABCD', max_gap: 10, max_registers_per_request: 125, max_bits_per_request: 2000 });
    expect(d.quirks).toEqual({ request_delay: 0, split_on_illegal_address: true });
    expect(config.modbus!.reconnect).toEqual({ initial_delay: 1000, max_delay: 30000 });
    expect(validateConfig(base).config.modbus).toBeUndefined();
  });

  it('names an unknown type and suggests the closest', () => {
    const devices = [0, 1, 2].map((i) => ({ name: `d${i}`, host: 'h', registers: [reg({ variable: `mvr_${i}` })] }));
    devices[2].registers = [0, 1, 2, 3, 4, 5].map((i) => reg({ variable: `mvr_2_${i}`, address: i * 2, type: i === 5 ? 'flaot32' : 'uint16' }));
    expect(problemsOf({ devices })).toEqual([
      'modbus.devices[2].registers[5].type: "flaot32" is not one of bool, bit, int16, uint16, int32, uint32, int64, uint64, float32, float64 (did you mean "float32"?)',
    ]);
  });

  it('names unknown settings, byte orders and tables', () => {
    expect(problemsOf(tcp([reg({ word_order: 'CDAB' })]))).toEqual(['modbus.devices[0].registers[0].word_order: unknown setting']);
    expect(problemsOf(tcp([reg({ byte_order: 'CBAD' })]))[0]).toMatch(/^modbus\.devices\[0\]\.registers\[0\]\.byte_order: "CBAD" is not one of ABCD, DCBA, BADC, CDAB/);
    expect(problemsOf(tcp([reg({ table: 'holdings' })]))).toEqual(['modbus.devices[0].registers[0].table: "holdings" is not one of coil, discrete_input, holding, input (did you mean "holding"?)']);
    expect(problemsOf(tcp([reg({})], { max_registers_per_request: 126 }))).toEqual(['modbus.devices[0].max_registers_per_request: 126 is above the maximum of 125']);
    expect(problemsOf(tcp([reg({ type: 'bit', bit: 16 })]))).toEqual(['modbus.devices[0].registers[0].bit: 16 is above the maximum of 15']);
  });

  it('refuses types that coils cannot hold and bit settings that do not fit', () => {
    expect(problemsOf(tcp([reg({ table: 'coil', type: 'float32' })]))).toEqual([
      'modbus.devices[0].registers[0].type: "float32" cannot be read from coils: they hold single bits; use type bool (or read a holding/input register)',
    ]);
    expect(problemsOf(tcp([reg({ table: 'discrete_input', byte_order: 'DCBA' })]))).toEqual(['modbus.devices[0].registers[0].byte_order: is only used for registers; discrete inputs are single bits']);
    expect(problemsOf(tcp([reg({ type: 'bit' })]))).toEqual(['modbus.devices[0].registers[0].bit: required setting is missing for type bit (0 = least significant bit of the register, 15 = most significant)']);
    expect(problemsOf(tcp([reg({ type: 'int16', bit: 3 })]))).toEqual(['modbus.devices[0].registers[0].bit: is only used with type bit (type is int16)']);
  });

  it('refuses overlapping registers, naming device and both registers', () => {
    const problems = problemsOf(tcp([reg({ variable: 'mvr_t', address: 100, type: 'float32' }), reg({ variable: 'mvr_s', address: 101, type: 'uint16' })]));
    expect(problems).toEqual([
      'modbus.devices[0].registers[1]: holding register 101 (mvr_s, uint16) of device "mixer1" overlaps registers[0]: holding registers 100-101 (mvr_t, float32)',
    ]);
    // Bits may share a register with each other and with the whole register, but not the same bit twice.
    expect(() =>
      validateConfig({ ...base, modbus: tcp([reg({ variable: 'mvr_w', address: 5 }), reg({ variable: 'mvr_b0', address: 5, type: 'bit', bit: 0 }), reg({ variable: 'mvr_b1', address: 5, type: 'bit', bit: 1 })]) }),
    ).not.toThrow();
    expect(problemsOf(tcp([reg({ variable: 'mvr_b0', address: 5, type: 'bit', bit: 0 }), reg({ variable: 'mvr_b1', address: 5, type: 'bit', bit: 0 })]))[0]).toMatch(/registers\[1\]: holding register 5 \(mvr_b1, bit 0\) of device "mixer1" reads the same bit as registers\[0\]/);
    // Same address in different tables is no overlap.
    expect(() => validateConfig({ ...base, modbus: tcp([reg({ variable: 'mvr_h', address: 5 }), reg({ variable: 'mvr_i', table: 'input', address: 5 })]) })).not.toThrow();
  });

  it('refuses values that run past the address space or do not fit one request', () => {
    expect(problemsOf(tcp([reg({ address: 65534, type: 'float64' })]))).toEqual([
      'modbus.devices[0].registers[0].address: 65534 is too close to the end: a float64 needs 4 registers (65534-65537) but the last protocol address is 65535',
    ]);
    expect(problemsOf(tcp([reg({ type: 'float64' })], { max_registers_per_request: 2 }))).toEqual([
      'modbus.devices[0].registers[0].type: "float64" needs 4 registers in one request but max_registers_per_request of device "mixer1" is 2',
    ]);
    expect(problemsOf(tcp([reg({ address: 65536 })]))).toEqual(['modbus.devices[0].registers[0].address: 65536 is outside 0-65535 (address_base is 0)']);
    expect(problemsOf(tcp([reg({ address: 0 })], { address_base: 1 }))).toEqual(['modbus.devices[0].registers[0].address: 0 is outside 1-65536 (address_base is 1)']);
  });

  it('reads Modicon references and refuses contradictions', () => {
    const section = parseSection(tcp([{ variable: 'mvr_h', address: '40001' }, { variable: 'mvr_i', address: '300101', type: 'int16' }, { variable: 'mvr_c', address: '00010' }]));
    expect(section.devices[0].registers).toHaveLength(3);
    expect(problemsOf(tcp([reg({ table: 'input', address: '40001' })]))).toEqual([
      'modbus.devices[0].registers[0].table: "input" contradicts address "40001", which is a Modicon reference to the holding registers',
    ]);
    expect(problemsOf(tcp([{ variable: 'mvr_a', address: 12 }]))).toEqual([
      'modbus.devices[0].registers[0].table: required setting is missing (coil, discrete_input, holding or input), unless address is a quoted Modicon reference like "40001"',
    ]);
    expect(problemsOf(tcp([reg({ address: 'forty' })]))[0]).toMatch(/address: "forty" is not an address/);
  });

  it('checks transport settings', () => {
    expect(problemsOf({ devices: [{ name: 'a', registers: [reg({})] }] })).toEqual(['modbus.devices[0].host: required setting is missing for transport tcp']);
    expect(problemsOf({ devices: [{ name: 'a', transport: 'rtu', registers: [reg({})] }] })[0]).toMatch(/^modbus\.devices\[0\]\.serial: required setting is missing for transport rtu/);
    expect(problemsOf({ devices: [{ name: 'a', transport: 'rtu', host: 'x', serial: { path: '/dev/ttyUSB0' }, registers: [reg({})] }] })).toEqual([
      'modbus.devices[0].host: is only used with transport tcp or rtu_over_tcp (this device uses rtu: set serial.path instead)',
    ]);
    expect(problemsOf({ devices: [{ name: 'a', transport: 'rtu', unit_id: 0, serial: { path: '/dev/ttyUSB0' }, registers: [reg({})] }] })).toEqual([
      'modbus.devices[0].unit_id: 0 is not a serial unit address: rtu devices answer on 1-247 (0 is broadcast and gets no response)',
    ]);
    expect(problemsOf({ devices: [{ name: 'a', transport: 'rtu', serial: { path: '/dev/ttyUSB0', parity: 'evn' }, registers: [reg({})] }] })).toEqual([
      'modbus.devices[0].serial.parity: "evn" is not one of none, even, odd, mark, space (did you mean "even"?)',
    ]);
    const shared = {
      devices: [
        { name: 'a', transport: 'rtu', unit_id: 1, serial: { path: '/dev/ttyUSB0', baud_rate: 9600 }, registers: [reg({ variable: 'mvr_a' })] },
        { name: 'b', transport: 'rtu', unit_id: 2, serial: { path: '/dev/ttyUSB0', baud_rate: 19200 }, registers: [reg({ variable: 'mvr_b' })] },
      ],
    };
    expect(problemsOf(shared)).toEqual(['modbus.devices[1].serial.baud_rate: 19200 differs from 9600 of devices[0] on the same port /dev/ttyUSB0; devices on one bus share its settings']);
  });

  it('refuses duplicate device names and variables', () => {
    const problems = problemsOf({
      devices: [
        { name: 'a', host: 'h', registers: [reg({ variable: 'mvr_x' })] },
        { name: 'a', host: 'h2', registers: [reg({ variable: 'mvr_x' })] },
      ],
    });
    expect(problems).toEqual([
      'modbus.devices[1].name: "a" is also the name of devices[0]; device names label metrics and must be unique',
      'modbus.devices[1].registers[0].variable: mvr_x is also fed by devices[0].registers[0]; each machine variable may come from one register only',
    ]);
  });

  it('accepts durations with units', () => {
    const s = parseSection(tcp([reg({})], { poll_interval: '100ms', timeout: '2s', quirks: { request_delay: '20ms' } }));
    expect(s.devices[0].poll_interval).toBe(100);
    expect(s.devices[0].timeout).toBe(2000);
    expect(s.devices[0].quirks.request_delay).toBe(20);
  });

  it('factory refuses an unplanned section with ConfigError and warns about Modicon-looking numbers', () => {
    const { logger, lines } = capturingLogger();
    const metrics = createMetrics();
    const make = (name: string) => ({ sink: { append: async () => undefined }, logger, stats: new SourceStats(name, 'modbus', metrics, systemClock), metrics, clock: systemClock, dataDir: '/tmp' });
    const good = parseSection(tcp([reg({ address: 40001 })]));
    expect(createModbusSources(good, make)).toHaveLength(1);
    expect(lines.some((l) => String(l.msg).includes('modbus.devices[0].registers[0].address: 40001 is read as holding register 40001 (a plain number); if the manual means the Modicon reference, write "40001" in quotes'))).toBe(true);
    // A section that skipped the schema's cross-checks (built in code) is still refused.
    const bad = structuredClone(good);
    bad.devices[0].registers.push({ ...bad.devices[0].registers[0], variable: 'mvr_b' });
    expect(() => createModbusSources(bad, make)).toThrow(ConfigError);
    expect(createModbusSources(undefined, make)).toEqual([]);
  });

  it('the example file config/examples/modbus.yaml is valid, commented devices included', () => {
    const text = readFileSync(new URL('../../../config/examples/modbus.yaml', import.meta.url), 'utf8');
    const active = parse(text) as Record<string, unknown>;
    const { config } = validateConfig({ ...base, ...active });
    expect(config.modbus!.devices.map((d) => d.name)).toEqual(['mixer1']);
    // "#   " lines are the commented-out devices: uncommented they must be valid too.
    const at = text.indexOf('\n  devices:');
    const all = parse(text.slice(0, at) + text.slice(at).replace(/^#(   )/gm, ' $1')) as Record<string, unknown>;
    const full = validateConfig({ ...base, ...all }).config.modbus!;
    expect(full.devices.map((d) => d.name)).toEqual(['mixer1', 'meter-main', 'drive-a', 'drive-b', 'scale-1']);
    expect(full.devices[1].registers[2]).toMatchObject({ address: '30343' });
  });
});
