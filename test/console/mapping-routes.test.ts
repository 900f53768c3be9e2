import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify as toYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfigFile } from '../../src/config/load.js';
import { silentLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startGateway, type GatewayHandle } from '../../src/runtime/gateway.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, testConfigInput, type TestGateway } from '../helpers/gateway.js';

/**
 * The Build page's routes over real HTTP (issue 24 §3): the mappings of the configuration file as
 * a CSV download, the probe's list of configured devices, the merge of a device given by its probe
 * URL, and the import's refusals (a CSV that cannot be read, a body over the limit).
 */
let emu: EmulatorHandle;
let gw: GatewayHandle;
let bare: TestGateway;
let dir: string;
let file: string;
let deadPort: number;

const modbus = (port: number) => ({
  name: 'modbus',
  devices: [
    {
      name: 'meter',
      host: '127.0.0.1',
      port,
      unit_id: 3,
      address_base: 1,
      byte_order: 'CDAB',
      registers: [
        { variable: 'mvr_meter_kwh', table: 'input', address: 1, type: 'uint32' },
        { variable: 'mvr_meter_alarm', table: 'holding', address: 10, type: 'bit', bit: 2 },
      ],
    },
  ],
});

beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
  deadPort = await freePort();
  dir = mkdtempSync(join(tmpdir(), 'mapping-routes-'));
  file = join(dir, 'gateway.yaml');
  writeFileSync(file, `${toYaml(testConfigInput(emu, dir, { http: { enabled: true, port: 0 }, modbus: modbus(deadPort) }))}`.replace('      unit_id: 3\n', '      unit_id: 3   # the energy meter\n'));
  gw = await startGateway(loadConfigFile(file).config, { configPath: file, logger: silentLogger() });
  bare = await startTestGateway(emu, { http: { enabled: true, port: 0 }, modbus: modbus(deadPort) }, { dir: mkdtempSync(join(tmpdir(), 'mapping-routes-bare-')) });
});

afterAll(async () => {
  await gw?.close();
  await bare?.destroy();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const post = (base: string, path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('Build page routes', () => {
  it('GET /console/api/config/mappings.csv: the file\'s mappings as a UTF-8 download Excel reads', async () => {
    const r = await fetch(`${gw.httpUrl}/console/api/config/mappings.csv`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(r.headers.get('content-disposition')).toBe('attachment; filename="mappings.csv"');
    const bytes = new Uint8Array(await r.arrayBuffer());
    expect([...bytes.slice(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    const lines = new TextDecoder().decode(bytes).split('\r\n');
    expect(lines.slice(1, 4)).toEqual([
      `modbus,meter,mvr_meter_kwh,,input,1,uint32,,CDAB,,,,,,,tcp,127.0.0.1,${deadPort},,3,,,`,
      `modbus,meter,mvr_meter_alarm,,holding,10,bit,2,CDAB,,,,,,,tcp,127.0.0.1,${deadPort},,3,,,`,
      '',
    ]);
  });

  it('GET /console/api/config/mappings.csv without a configuration file: the running configuration\'s', async () => {
    const text = new TextDecoder().decode(await (await fetch(`${bare.handle.httpUrl}/console/api/config/mappings.csv`)).arrayBuffer());
    expect(text.split('\r\n')[1]).toBe(`modbus,meter,mvr_meter_kwh,,input,1,uint32,,CDAB,,,,,,,tcp,127.0.0.1,${deadPort},,3,,,`);
  });

  it('GET /console/api/modbus/devices: each device with its probe URL, base and what it reads (protocol addresses)', async () => {
    const r = (await (await fetch(`${gw.httpUrl}/console/api/modbus/devices`)).json()) as unknown;
    expect(r).toEqual({
      devices: [
        {
          name: 'meter',
          url: `tcp://127.0.0.1:${deadPort}`,
          transport: 'tcp',
          unit_id: 3,
          address_base: 1,
          byte_order: 'CDAB',
          registers: [
            { variable: 'mvr_meter_kwh', table: 'input', address: 0, count: 2, type: 'uint32' },
            { variable: 'mvr_meter_alarm', table: 'holding', address: 9, count: 1, type: 'bit', bit: 2 },
          ],
        },
      ],
    });
  });

  it('POST /console/api/config/merge: a configured device named by its probe URL is extended in its base; a serial URL creates a serial device', async () => {
    const yaml = readFileSync(file, 'utf8');
    const same = (await (await post(gw.httpUrl!, '/console/api/config/merge', { yaml, modbus: { device: { name: 'x', url: `tcp://127.0.0.1:${deadPort}`, unit_id: 3 }, registers: [{ variable: 'mvr_meter_v', table: 'input', address: 4, type: 'float32', byte_order: 'CDAB' }] } })).json()) as { target: string; created: boolean; diff: string };
    expect(same).toMatchObject({ target: 'modbus.devices[0]', created: false });
    expect(same.diff).toContain('+        - variable: mvr_meter_v\n+          table: input\n+          address: 5\n+          type: float32\n');
    const serial = (await (await post(gw.httpUrl!, '/console/api/config/merge', { yaml, modbus: { device: { name: 'boiler', url: 'rtu:/dev/ttyUSB9?baud=9600&parity=none', unit_id: 7 }, registers: [{ variable: 'mvr_boiler_t', table: 'holding', address: 0, type: 'int16' }] } })).json()) as { yaml: string };
    expect(parse(serial.yaml).modbus.devices[1]).toEqual({ name: 'boiler', transport: 'rtu', serial: { path: '/dev/ttyUSB9', baud_rate: 9600, parity: 'none', data_bits: 8, stop_bits: 1 }, unit_id: 7, registers: [{ variable: 'mvr_boiler_t', table: 'holding', address: 0, type: 'int16' }] });
    const bad = await post(gw.httpUrl!, '/console/api/config/merge', { yaml, modbus: { device: { name: 'x', url: 'modbus://h', unit_id: 1 }, registers: [{ variable: 'mvr_a', table: 'coil', address: 0 }] } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string; field: string } }).error).toEqual({ code: 'bad_request', field: 'modbus.device.url', message: 'modbus.device.url: "modbus://h" is not tcp://HOST[:PORT], rtu-over-tcp://HOST:PORT or rtu:PATH?baud=9600' });
  });

  it('POST /console/api/config/import-csv: rows into the text with the diff; a CSV that cannot be read and a body over the limit are refused whole', async () => {
    const yaml = readFileSync(file, 'utf8');
    const ok = (await (await post(gw.httpUrl!, '/console/api/config/import-csv', { yaml, csv: 'source,variable,table,address,type\nmeter,mvr_meter_kvar,input,7,uint32\n' })).json()) as { added: number; diff: string; yaml: string };
    expect(ok.added).toBe(1);
    expect(ok.diff).toContain('+        - variable: mvr_meter_kvar\n+          table: input\n+          address: 7\n');
    expect(ok.yaml).toContain('      unit_id: 3   # the energy meter\n');
    const unreadable = await post(gw.httpUrl!, '/console/api/config/import-csv', { yaml, csv: 'source,variable,address\nmeter,"mvr_x,1\n' });
    expect(unreadable.status).toBe(400);
    expect(((await unreadable.json()) as { error: unknown }).error).toEqual({ code: 'bad_request', field: 'csv', message: 'CSV row 2: a quoted field is not closed (a " is missing)' });
    const big = await post(gw.httpUrl!, '/console/api/config/import-csv', { yaml, csv: 'source,variable,address\n'.padEnd(70_000, 'x') });
    expect(big.status).toBe(413);
    expect(readFileSync(file, 'utf8')).toBe(yaml);
  });
});
