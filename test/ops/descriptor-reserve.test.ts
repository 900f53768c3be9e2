import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_FIXTURE, startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { openSockets, type Flood } from '../helpers/flood.js';
import { requestOnce } from '../helpers/http-once.js';
import { BROKER_PASSWORD, ENOUGH_FDS, HARD_FD_LIMIT, startLimitedGateway } from '../helpers/limited-gateway.js';
import { plcConnect, plcSession } from '../helpers/mqtt-wire.js';
import { waitFor } from '../helpers/wait.js';

/**
 * (b3) The gateway keeps descriptors for itself: a real `edge-gateway run` child limited to 1,024
 * open files (prlimit) takes 1,100 idle sockets on the embedded broker's WebSocket port from one
 * address (127.0.0.2); a PLC's TCP CONNECT from 127.0.0.1 still succeeds and /healthz answers.
 * Before, the WebSocket listener counted only upgraded sockets: the idle ones took every
 * descriptor, the PLC's connection was reset at accept and /healthz went dark.
 */

const dir = mkdtempSync(join(tmpdir(), 'gw-fd-reserve-'));
const children: ChildProcess[] = [];
const floods: Flood[] = [];
const cleanupSockets: Socket[][] = [];
let emu: EmulatorHandle | undefined;
afterAll(async () => {
  for (const f of floods) f.stop();
  for (const list of cleanupSockets) for (const s of list) s.destroy();
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await emu?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(name: string) {
  emu ??= await startEmulator({ port: 0, fixture: DEMO_FIXTURE });
  return startLimitedGateway({ name, dir, emu, children });
}

if (!ENOUGH_FDS) console.warn(`SKIPPING the descriptor-reserve test: the hard descriptor limit is ${HARD_FD_LIMIT}, the attacking sockets need 4,096`);

describe.skipIf(!ENOUGH_FDS)('descriptor reserve (open-file limit 1,024)', () => {
  it('(b3) 1,100 idle sockets on the broker\'s WebSocket port: a PLC\'s TCP CONNECT succeeds and /healthz answers', async () => {
    const gw = await start('gw-ws-flood');
    // The limit is the child's: the listeners' caps were lowered below it, and it says so.
    expect(readFileSync(`/proc/${gw.child.pid}/limits`, 'utf8')).toMatch(/Max open files\s+1024\s+1024/);
    expect(gw.out()).toContain('mqtt.broker.max_clients 1000 is lowered to 576');
    expect(gw.out()).toContain('http.max_connections 256 is lowered to 192');

    const attack = await openSockets(1_100, { port: gw.broker.websocket.port, from: '127.0.0.2' });
    floods.push(attack);
    expect(attack.connected + attack.closed).toBeGreaterThanOrEqual(1_100);
    // Until the gateway has taken in what it will of the attack: it holds its share (16 from one
    // address) or, without limits, every descriptor up to the process's limit.
    await waitFor(() => attack.open <= 16 || gw.descriptors() >= 1_000, { timeoutMs: 60_000, what: `the attack taken in (open: ${attack.open}, descriptors: ${gw.descriptors()})` });

    // A PLC sending CONNECT at once over TCP, and the orchestrator's health check, from 127.0.0.1.
    const [code, health] = await Promise.all([plcConnect({ port: gw.broker.port, clientId: 'plc-1', username: 'plc', password: BROKER_PASSWORD }), requestOnce(`${gw.url}/healthz`)]);
    expect({ code, health }).toEqual({ code: 0, health: 200 });
    expect(gw.child.exitCode).toBeNull();

    // The attacker kept only its share; the process stayed far below its limit.
    await waitFor(() => attack.open <= 16, { timeoutMs: 30_000, what: `the attacker held to 16 sockets (open: ${attack.open})` });
    expect(gw.descriptors()).toBeLessThan(1_024 - 256);
    await waitFor(() => gw.out().includes('"remote":"127.0.0.2"'), { timeoutMs: 10_000, what: 'a refusal logged with the attacker\'s address' });
    await gw.stop();
  }, 180_000);

  it('1,100 authenticated clients from 11 addresses: the broker holds its 576, the process keeps its reserve, /healthz answers', async () => {
    const gw = await start('gw-client-flood');
    const sessions: Socket[] = [];
    cleanupSockets.push(sessions);
    let accepted = 0;
    for (let a = 0; a < 11; a++) {
      const from = `127.0.0.${20 + a}`;
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => plcSession({ port: gw.broker.port, localAddress: from, clientId: `c-${a}-${i}`, username: 'plc', password: BROKER_PASSWORD })));
      for (const r of results) {
        if (r.code === 0) {
          accepted += 1;
          sessions.push(r.socket);
        }
      }
    }
    // max_clients 1,000 lowered to 576 by the open-file limit: the rest refused at accept.
    expect(accepted).toBe(576);
    expect(gw.descriptors()).toBeLessThan(1_024 - 128);
    expect(await requestOnce(`${gw.url}/healthz`)).toBe(200);
    await waitFor(() => gw.out().includes('mqtt.broker.max_clients reached (all of them authenticated)'), { timeoutMs: 10_000, what: 'the refusal logged' });
    // The buffer still opens what it needs: samples keep being committed and delivered.
    const before = emu!.valueCounts()['mvr_gen_1'] ?? 0;
    await waitFor(() => (emu!.valueCounts()['mvr_gen_1'] ?? 0) > before + 20, { timeoutMs: 30_000, what: 'deliveries while the broker is full' });
    await gw.stop();
  }, 180_000);
});
