import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt from 'mqtt';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_FIXTURE, startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { BROKER_PASSWORD, ENOUGH_FDS, HARD_FD_LIMIT, startLimitedGateway } from '../helpers/limited-gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 12 §1: with a 1,024 descriptor limit, ~1,000 idle sockets to the embedded broker or ~1,100
 * half-sent HTTP requests used to end the gateway (EMFILE thrown by process.memoryUsage() in the
 * status timer). A real `edge-gateway run` child limited to 1,024 open files takes both attacks and must
 * stay up, keep sampling and keep delivering to the emulator, and still let a PLC with the right
 * password into the broker.
 */

const dir = mkdtempSync(join(tmpdir(), 'gw-exhaust-'));
const children: ChildProcess[] = [];
const sockets: Socket[] = [];
let emu: EmulatorHandle | undefined;
afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await emu?.close();
  rmSync(dir, { recursive: true, force: true });
});

function openIdle(port: number, count: number, first?: string): Promise<number> {
  return new Promise((resolve) => {
    let settled = 0;
    let opened = 0;
    for (let i = 0; i < count; i++) {
      const s = connect(port, '127.0.0.1');
      sockets.push(s);
      let done = false;
      const finish = (ok: boolean) => {
        if (done) return;
        done = true;
        if (ok) opened += 1;
        if (++settled === count) resolve(opened);
      };
      s.on('connect', () => {
        if (first) s.write(first);
        finish(true);
      });
      s.on('error', () => finish(false));
      s.on('close', () => finish(false));
    }
  });
}

const delivered = () => emu!.valueCounts()['mvr_gen_1'] ?? 0;

if (!ENOUGH_FDS) console.warn(`SKIPPING the fd-exhaustion test: the hard descriptor limit is ${HARD_FD_LIMIT}, the attacking sockets need 4,096`);

describe.skipIf(!ENOUGH_FDS)('resource exhaustion does not kill or lock out the gateway (open-file limit 1,024)', () => {
  it('survives ~1,000 idle broker sockets and ~1,100 half-sent HTTP requests, sampling and delivering throughout', async () => {
    emu = await startEmulator({ port: 0, fixture: DEMO_FIXTURE });
    const gw = await startLimitedGateway({ name: 'gw-exhaust', dir, emu, children });
    const { child, url } = gw;
    const broker = gw.broker.port;
    await waitFor(() => delivered() > 0, { timeoutMs: 30_000, what: 'first delivery' });

    // Attack 1: 1,000 idle sockets to the broker, none sending CONNECT.
    await openIdle(broker, 1_000);
    // Attack 2: 1,100 HTTP requests that never finish their headers.
    await openIdle(Number(new URL(url).port), 1_100, 'GET /status HTTP/1.1\r\nHost: x\r\n');

    // Several status-timer ticks under attack; the process must still be running and delivering.
    const before = delivered();
    await waitFor(() => delivered() >= before + 40, { timeoutMs: 60_000, what: `deliveries under attack (output: ${gw.out().slice(-1_500)})` });
    expect(child.exitCode).toBeNull();

    // A PLC with the right password gets in within a few seconds, despite the idle sockets.
    const t0 = performance.now();
    const plc = await mqtt.connectAsync(`mqtt://127.0.0.1:${broker}`, { username: 'plc', password: BROKER_PASSWORD, reconnectPeriod: 500, connectTimeout: 5_000 });
    expect(performance.now() - t0).toBeLessThan(10_000);
    await plc.publishAsync('plant/rate', '7', { qos: 1 });
    await plc.endAsync();
    await waitFor(() => (emu!.valueCounts()['mvr_packer1_rate'] ?? 0) >= 1, { timeoutMs: 30_000, what: 'the PLC value delivered' });

    // Once the attackers go away, the HTTP server answers again.
    for (const s of sockets.splice(0)) s.destroy();
    await waitFor(async () => (await request(`${url}/healthz`)).statusCode === 200, { timeoutMs: 30_000, what: '/healthz after the attack' });
    // All from 127.0.0.1: the per-address limits closed the attackers' own connections.
    expect(gw.out()).toContain('http.max_connections_per_client reached for that address');
    expect(gw.out()).toContain('max_unauthenticated_per_address reached for that address');
    expect(child.exitCode).toBeNull();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }, 180_000);
});
