import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { knownValues, startModbusSimulator, type ModbusSimulator } from '../../../src/sim/modbus-device.js';
import { startModbusRtuOverTcpSimulator, type RtuSimulator } from '../../../src/sim/modbus-rtu.js';
import { deviceUrl, MODBUS_PROBE_HELP, parseDeviceUrl, runModbusProbeCli } from '../../../src/sources/modbus/probe-cli.js';

let sim: ModbusSimulator;
let rtu: RtuSimulator;
beforeAll(async () => {
  sim = await startModbusSimulator({ port: 0, demo: false });
  rtu = await startModbusRtuOverTcpSimulator({ unitId: 5 });
});
afterAll(async () => {
  await sim.close();
  await rtu.close();
});

async function probe(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runModbusProbeCli(args, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

const ORDERS = ['ABCD', 'DCBA', 'BADC', 'CDAB'];
/** The cell of the candidate table for (address, type, order). */
function cell(out: string, address: number, type: string, order: string): string | undefined {
  const row = out.split('\n').find((l) => {
    const c = l.trim().split(/\s+/);
    return c[0] === String(address) && c[1] === type;
  });
  return row?.trim().split(/\s+/)[2 + ORDERS.indexOf(order)];
}

describe('edge-gateway modbus-probe', () => {
  it('prints every candidate decoding; the known value sits in its type row and order column', async () => {
    for (const k of knownValues().filter((v) => ['float32', 'int32', 'uint32', 'float64', 'int64', 'uint64'].includes(v.type))) {
      const { code, out, err } = await probe(['--device', `tcp://127.0.0.1:${sim.port}`, '--unit', '1', '--table', 'holding', '--address', String(k.address), '--count', '4']);
      expect(err).toBe('');
      expect(code).toBe(0);
      expect([k.key, cell(out, k.address, k.type, k.order)]).toEqual([k.key, String(k.expected)]);
    }
  });

  it('shows the raw registers, all types for each start register, and a config hint', async () => {
    const { out } = await probe(['--device', `tcp://127.0.0.1:${sim.port}`, '--address', '1016', '--count', '4']);
    expect(out).toContain('Read 4 holding registers 1016-1019 (FC3) from tcp://127.0.0.1:');
    expect(out).toMatch(/1016\s+0xCE0A\s+52746\s+-12790\s+1100 1110 0000 1010/);
    for (const type of ['int16', 'uint16', 'int32', 'uint32', 'float32', 'int64', 'uint64', 'float64']) expect(cell(out, 1016, type, 'ABCD')).toBeDefined();
    expect(cell(out, 1017, 'float64', 'ABCD')).toBeUndefined(); // needs 4 registers, only 3 left
    expect(cell(out, 1016, 'uint32', 'ABCD')).toBe('3456789012');
    expect(out).toContain('{ variable: mvr_..., table: holding, address: 1016, type: float32, byte_order: CDAB }');
  });

  it('understands Modicon references, 1-based numbers and coils', async () => {
    const modicon = await probe(['--device', `tcp://127.0.0.1:${sim.port}`, '--address', '41017', '--count', '2']);
    expect(modicon.code).toBe(0);
    expect(modicon.out).toContain('Read 2 holding registers 1017-1018 (FC3)');
    expect(sim.requests().at(-1)).toMatchObject({ functionCode: 3, address: 1016, quantity: 2 });
    const oneBased = await probe(['--device', `tcp://127.0.0.1:${sim.port}`, '--table', 'input', '--address', '1017', '--base', '1', '--count', '2']);
    expect(oneBased.out).toContain('Addresses are 1-based register numbers');
    expect(sim.requests().at(-1)).toMatchObject({ functionCode: 4, address: 1016, quantity: 2 });
    expect(cell(oneBased.out, 1017, 'uint32', 'ABCD')).toBe('3456789012');
    const coils = await probe(['--device', `tcp://127.0.0.1:${sim.port}`, '--table', 'coil', '--address', '1000', '--count', '8']);
    expect(coils.out).toMatch(/1000\s+1\n1001\s+0\n1002\s+1\n1003\s+1\n/);
  });

  it('reads RTU over TCP', async () => {
    const { code, out } = await probe(['--device', `rtu-over-tcp://127.0.0.1:${rtu.port}`, '--unit', '5', '--address', '1000', '--count', '1']);
    expect(code).toBe(0);
    expect(cell(out, 1000, 'int16', 'ABCD')).toBe('-12345');
  });

  it('explains failures with exit status 1 and wrong arguments with 2', async () => {
    sim.injectException(3000, 3000, 2);
    const exception = await probe(['--device', `tcp://127.0.0.1:${sim.port}`, '--address', '3000']);
    expect(exception.code).toBe(1);
    expect(exception.err).toMatch(/answered exception 2 \(illegal data address\) to reading 4 holding registers from 3000: the device has no such address/);
    const silent = await probe(['--device', `tcp://127.0.0.1:${sim.port}`, '--unit', '9', '--address', '0', '--timeout', '200ms']);
    expect(silent.code).toBe(1);
    expect(silent.err).toMatch(/unit 9 at tcp:\/\/127\.0\.0\.1:\d+ did not answer reading 4 holding registers from 0 within 200 ms/);
    const refused = await probe(['--device', 'tcp://127.0.0.1:1', '--address', '0', '--timeout', '500ms']);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/could not connect to tcp:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
    expect((await probe(['--address', '0'])).err).toMatch(/--device is required/);
    expect((await probe(['--device', 'tcp://x', '--address', '0', '--count', '126'])).err).toMatch(/--count "126" must be a whole number from 1 to 125/);
    expect((await probe(['--device', 'tcp://x', '--address', '0', '--table', 'holdings'])).code).toBe(2);
    expect((await probe(['--device', 'tcp://x', '--address', '0', '--bogus'])).code).toBe(2);
    expect((await probe(['--device', 'ftp://x', '--address', '0'])).err).toMatch(/is not tcp:\/\/HOST\[:PORT\]/);
  });

  it('prints help', async () => {
    const { code, out } = await probe(['--help']);
    expect(code).toBe(0);
    expect(out).toBe(MODBUS_PROBE_HELP);
    expect(out).toContain('--device URL');
  });

  it('parses device URLs', () => {
    expect(parseDeviceUrl('tcp://10.0.0.5')).toEqual({ transport: 'tcp', host: '10.0.0.5', port: 502 });
    expect(parseDeviceUrl('tcp://[::1]:5020')).toEqual({ transport: 'tcp', host: '::1', port: 5020 });
    expect(parseDeviceUrl('rtu-over-tcp://gw.local:4001')).toEqual({ transport: 'rtu_over_tcp', host: 'gw.local', port: 4001 });
    expect(parseDeviceUrl('rtu:/dev/ttyUSB0?baud=9600&parity=none&stop_bits=2')).toEqual({ transport: 'rtu', path: '/dev/ttyUSB0', baudRate: 9600, parity: 'none', dataBits: 8, stopBits: 2 });
    expect(parseDeviceUrl('rtu:/dev/ttyS1')).toMatchObject({ baudRate: 19200, parity: 'even' });
    expect(() => parseDeviceUrl('rtu:/dev/ttyS1?speed=9600')).toThrow(/unknown serial setting "speed"/);
  });
});

describe('deviceUrl (the console offers configured devices by it)', () => {
  it('writes the URL parseDeviceUrl reads back to the same endpoint, serial settings and IPv6 included', () => {
    const endpoints = [
      { transport: 'tcp', host: '192.168.10.21', port: 502 },
      { transport: 'rtu_over_tcp', host: 'moxa.plant', port: 4001 },
      { transport: 'tcp', host: 'fd00::21', port: 1502 },
      { transport: 'rtu', path: '/dev/ttyUSB0', baudRate: 9600, parity: 'none', dataBits: 8, stopBits: 2 },
    ] as const;
    for (const e of endpoints) expect(parseDeviceUrl(deviceUrl(e))).toEqual(e);
    expect(deviceUrl(endpoints[3])).toBe('rtu:/dev/ttyUSB0?baud=9600&parity=none&data_bits=8&stop_bits=2');
    expect(deviceUrl(endpoints[2])).toBe('tcp://[fd00::21]:1502');
  });
});
