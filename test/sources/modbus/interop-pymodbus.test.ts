import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runModbusProbeCli } from '../../../src/sources/modbus/probe-cli.js';
import { memorySink, startModbus, waitFor } from './helpers.js';

/**
 * Interoperability: the source against a Modbus server that is not part of this project, Debian's
 * python3-pymodbus, whose values are encoded by pymodbus' own BinaryPayloadBuilder.
 */
const PYTHON = '/usr/bin/python3';
const FIXTURE = fileURLToPath(new URL('./fixtures/pymodbus_server.py', import.meta.url));
const havePymodbus = spawnSync(PYTHON, ['-c', 'import pymodbus'], { stdio: 'ignore' }).status === 0;
if (!havePymodbus) {
  if (process.env.CI) throw new Error(`${PYTHON} cannot import pymodbus; CI must install Debian's python3-pymodbus for the Modbus interoperability test`);
  console.warn(`SKIPPING Modbus interoperability test: ${PYTHON} cannot import pymodbus (apt-get install python3-pymodbus)`);
}

interface Layout {
  port: number;
  values: Array<{ key: string; type: string; order: string; address: number; value: number }>;
  coils: { address: number; bits: boolean[] };
}

describe.skipIf(!havePymodbus)('modbus interoperability with pymodbus (Debian python3-pymodbus)', () => {
  let server: ChildProcessWithoutNullStreams;
  let layout: Layout;

  beforeAll(async () => {
    server = spawn(PYTHON, [FIXTURE, '0'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    server.stderr.on('data', (d) => (stderr += String(d)));
    const firstLine = await new Promise<string>((resolve, reject) => {
      const rl = createInterface({ input: server.stdout });
      rl.once('line', resolve);
      server.once('exit', (code) => reject(new Error(`pymodbus server exited with ${code}: ${stderr}`)));
      setTimeout(() => reject(new Error(`pymodbus server did not start: ${stderr}`)), 20_000);
    });
    layout = JSON.parse(firstLine) as Layout;
  });

  afterAll(async () => {
    if (!server || server.exitCode !== null) return;
    const exited = new Promise((r) => server.once('exit', r));
    server.stdin.end();
    setTimeout(() => server.kill('SIGKILL'), 3_000).unref();
    await exited;
  });

  it('decodes every type and byte order pymodbus encoded, from holding and input registers, and its coils', async () => {
    expect(layout.values).toHaveLength(32);
    const registers = [
      ...layout.values.map((v) => ({ variable: `mvr_h_${v.key}`, table: 'holding', address: v.address, type: v.type, byte_order: v.order })),
      ...layout.values.map((v) => ({ variable: `mvr_i_${v.key}`, table: 'input', address: v.address, type: v.type, byte_order: v.order })),
      ...layout.coils.bits.map((_, i) => ({ variable: `mvr_c_${i}`, table: 'coil', address: layout.coils.address + i })),
    ];
    const { sink, samples } = memorySink();
    const m = await startModbus({ devices: [{ name: 'pymodbus', host: '127.0.0.1', port: layout.port, poll_interval: 200, timeout: 1000, registers }] }, sink);
    try {
      await waitFor(() => new Set(samples.map((s) => s.variable)).size === registers.length, 'every value from pymodbus', 20_000);
      const got = new Map(samples.map((s) => [s.variable, s.value]));
      for (const v of layout.values) {
        expect([v.key, got.get(`mvr_h_${v.key}`)]).toEqual([v.key, v.value]);
        expect([v.key, got.get(`mvr_i_${v.key}`)]).toEqual([v.key, v.value]);
      }
      layout.coils.bits.forEach((b, i) => expect(got.get(`mvr_c_${i}`)).toBe(b ? 1 : 0));
      expect(m.source.status().lastError).toBeNull();
    } finally {
      await m.close();
    }
  });

  it('modbus-probe shows the pymodbus value in the right row and column', async () => {
    const float = layout.values.find((v) => v.key === 'float32_CDAB')!;
    let out = '';
    const code = await runModbusProbeCli(['--device', `tcp://127.0.0.1:${layout.port}`, '--address', String(float.address), '--count', '2'], { out: (t) => (out += t), err: (t) => (out += t) });
    expect(code).toBe(0);
    const row = out.split('\n').find((l) => l.startsWith(`${float.address} `) && / float32 /.test(l))!;
    const cells = row.trim().split(/\s+/);
    expect(cells[2 + ['ABCD', 'DCBA', 'BADC', 'CDAB'].indexOf('CDAB')]).toBe('3.14159');
  });
});
