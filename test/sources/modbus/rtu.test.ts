import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { knownValues } from '../../../src/sim/modbus-device.js';
import { SimulatedDevice } from '../../../src/sim/modbus-model.js';
import { startModbusRtuOverTcpSimulator, startModbusRtuSerialSimulator } from '../../../src/sim/modbus-rtu.js';
import { deviceStatus, memorySink, startModbus, waitFor, type StartedModbus } from './helpers.js';

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  while (cleanups.length) await Promise.resolve(cleanups.pop()!()).catch(() => undefined);
});

const haveSocat = spawnSync('socat', ['-V'], { stdio: 'ignore' }).status === 0;
if (!haveSocat) {
  if (process.env.CI) throw new Error('socat is required in CI for the Modbus RTU serial tests (apt-get install socat)');
  console.warn('SKIPPING Modbus RTU serial tests: socat is not installed (apt-get install socat)');
}

/** A virtual null-modem cable: two ptys joined by socat (one end for the device, one for the gateway). */
async function startSocat(dir: string): Promise<{ device: string; gateway: string; stop(): Promise<void> }> {
  const device = join(dir, 'device');
  const gateway = join(dir, 'gateway');
  for (const p of [device, gateway]) rmSync(p, { force: true });
  const child: ChildProcess = spawn('socat', [`pty,raw,echo=0,link=${device}`, `pty,raw,echo=0,link=${gateway}`], { stdio: 'ignore' });
  await waitFor(() => existsSync(device) && existsSync(gateway), 'socat ptys');
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
  return { device, gateway, stop };
}

async function modbus(raw: unknown, sink: Parameters<typeof startModbus>[1]): Promise<StartedModbus> {
  const m = await startModbus(raw, sink);
  cleanups.push(() => m.close());
  return m;
}

const KNOWN = knownValues('holding').filter((k) => ['float32', 'int32', 'uint16', 'float64', 'int64'].some((t) => k.key.startsWith(`${t}_`)));
const knownRegisters = (prefix: string) => KNOWN.map((k) => ({ variable: `mvr_${prefix}_${k.key}`, table: 'holding', address: k.address, type: k.type, byte_order: k.order }));

describe.skipIf(!haveSocat)('modbus RTU on a serial port (socat pty pair)', () => {
  it('reads two units on one bus, and recovers after the adapter is unplugged and plugged back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-modbus-rtu-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    let cable = await startSocat(dir);
    cleanups.push(() => cable.stop());
    const model = new SimulatedDevice();
    let sim = await startModbusRtuSerialSimulator({ path: cable.device, baudRate: 9600, parity: 'none', unitId: 255, device: model });
    cleanups.push(() => sim.close());

    const { sink, samples } = memorySink();
    const serial = { path: cable.gateway, baud_rate: 9600, parity: 'none' };
    const m = await modbus(
      {
        reconnect: { initial_delay: 200, max_delay: 500 },
        devices: [
          { name: 'unit1', transport: 'rtu', serial, unit_id: 1, poll_interval: 100, timeout: 300, registers: knownRegisters('u1') },
          { name: 'unit2', transport: 'rtu', serial, unit_id: 2, poll_interval: 100, timeout: 300, registers: [{ variable: 'mvr_u2_coil', table: 'coil', address: 1000 }] },
        ],
      },
      sink,
    );
    await waitFor(() => KNOWN.every((k) => samples.some((x) => x.variable === `mvr_u1_${k.key}`)) && samples.some((x) => x.variable === 'mvr_u2_coil'), 'values of both units');
    for (const k of KNOWN) expect(samples.find((x) => x.variable === `mvr_u1_${k.key}`)!.value).toBe(k.expected);
    expect(samples.find((x) => x.variable === 'mvr_u2_coil')!.value).toBe(1);
    expect(model.requestCount({ unitId: 1 })).toBeGreaterThan(0);
    expect(model.requestCount({ unitId: 2 })).toBeGreaterThan(0);
    expect((m.source.status().detail?.connections as unknown[]).length).toBe(1);

    // Unplug: the serial device disappears.
    await cable.stop();
    await sim.close();
    await waitFor(() => deviceStatus(m.source, 'unit1').state === 'disconnected' && deviceStatus(m.source, 'unit2').state === 'disconnected', 'both units waiting for the port');
    expect(m.source.status().state).toBe('disconnected');
    // Reopen attempts fail while the port is gone, and say so.
    await waitFor(() => m.lines.some((l) => l.msg === 'modbus connection failed; retrying with backoff'), 'a failed reopen attempt logged');

    // Plug back in.
    cable = await startSocat(dir);
    sim = await startModbusRtuSerialSimulator({ path: cable.device, baudRate: 9600, parity: 'none', unitId: 255, device: model });
    const n = samples.length;
    await waitFor(() => samples.slice(n).some((x) => x.variable === 'mvr_u1_float32_ABCD') && samples.slice(n).some((x) => x.variable === 'mvr_u2_coil'), 'values after replugging', 20_000);
    await waitFor(() => m.source.status().state === 'connected', 'source connected again');
  });

  it('reports a unit that does not answer on the bus without stopping the other', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-modbus-rtu-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const cable = await startSocat(dir);
    cleanups.push(() => cable.stop());
    const sim = await startModbusRtuSerialSimulator({ path: cable.device, unitId: 1 });
    cleanups.push(() => sim.close());
    const { sink, samples } = memorySink();
    const m = await modbus(
      {
        reconnect: { initial_delay: 500, max_delay: 2000 },
        devices: [
          { name: 'present', transport: 'rtu', serial: { path: cable.gateway }, unit_id: 1, poll_interval: 100, timeout: 300, registers: [{ variable: 'mvr_p', table: 'holding', address: 1000, type: 'int16' }] },
          { name: 'absent', transport: 'rtu', serial: { path: cable.gateway }, unit_id: 9, poll_interval: 100, timeout: 200, retries: 0, registers: [{ variable: 'mvr_a', table: 'holding', address: 1000 }] },
        ],
      },
      sink,
    );
    await waitFor(() => deviceStatus(m.source, 'absent').state === 'offline', 'absent unit offline');
    const from = samples.length;
    // The present unit keeps delivering on the shared bus while the absent one times out.
    await waitFor(() => samples.length - from > 5, 'six more values from the present unit');
    expect(samples.every((x) => x.variable === 'mvr_p' && x.value === -12345)).toBe(true);
    expect(deviceStatus(m.source, 'present').state).toBe('connected');
    expect(m.lines.some((l) => /device "absent" \(unit 9 at rtu:.*\) did not answer a read of holding register 1000 within 200 ms/.test(String(l.msg)))).toBe(true);
  });
});

describe('modbus RTU over TCP (serial device server in raw mode)', () => {
  it('reads RTU frames over TCP, names exceptions and reconnects after the server restarts', async () => {
    const model = new SimulatedDevice();
    const first = await startModbusRtuOverTcpSimulator({ device: model, unitId: 3 });
    cleanups.push(() => first.close());
    model.injectFault({ table: 'input', from: 5, to: 5, exception: 2 });
    const { sink, samples } = memorySink();
    const m = await modbus(
      {
        reconnect: { initial_delay: 200, max_delay: 500 },
        devices: [
          {
            name: 'meter',
            transport: 'rtu_over_tcp',
            host: '127.0.0.1',
            port: first.port,
            unit_id: 3,
            poll_interval: 100,
            timeout: 300,
            registers: [...knownRegisters('m'), { variable: 'mvr_missing', table: 'input', address: 5 }],
          },
        ],
      },
      sink,
    );
    await waitFor(() => KNOWN.every((k) => samples.some((x) => x.variable === `mvr_m_${k.key}`)), 'known values');
    for (const k of KNOWN) expect(samples.find((x) => x.variable === `mvr_m_${k.key}`)!.value).toBe(k.expected);
    await waitFor(() => m.lines.some((l) => l.exception === 'illegal data address' && l.range === 'input register 5'), 'exception named');
    // No MBAP header on the wire: the simulator parsed plain RTU frames with valid CRCs.
    expect(model.requestCount({ unitId: 3, functionCode: 3 })).toBeGreaterThan(0);

    await first.close();
    await waitFor(() => deviceStatus(m.source, 'meter').state === 'disconnected', 'loss noticed');
    const second = await startModbusRtuOverTcpSimulator({ device: model, unitId: 3, port: first.port });
    cleanups.push(() => second.close());
    const n = samples.length;
    await waitFor(() => samples.length > n + 5, 'values after restart', 20_000);
  });
});
