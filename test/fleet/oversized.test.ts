import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { captureLogger, mosquittoAvailable, startAedes, startMosquitto } from '../sources/mqtt/helpers.js';
import { publishRetainedFromAnotherProcess } from './rogue-publisher.js';

/**
 * Issue 21 §5: a 64 MB retained message under the fleet prefix cost every gateway with budget
 * sharing on 270 MB (received, decoded into a string, parsed) and, as a valid announcement, a
 * member's place. The fleet connection now speaks MQTT 5 with a Maximum Packet Size, so the broker
 * does not send it at all (mosquitto), and on a 3.1.1 broker (aedes) it is dropped by its size
 * before a byte is decoded. The rogue message comes from another process.
 */
const PREFIX = 'plant/fleet';
const BUDGET = 1_400;
const BIG = 64 * 1024 * 1024;
const sharing = { requests_per_minute: BUDGET, batch_size: 5, flush_interval: 0, max_in_flight: 2, backfill: { enabled: false }, budget_sharing: { mode: 'fleet', group: 'nat', announce_interval: 500 } };
const rogueAnnouncement = { group: 'nat', demand_per_min: BUDGET, lease_ms: 600_000 };
const rogueStatus = { v: 1, gateway: 'rogue', state: 'online', at: new Date().toISOString(), uplink: 'ok' };

/** Peak growth of RSS and of the V8 heap over a baseline, sampled every 10 ms. */
function memoryWatch() {
  const base = process.memoryUsage();
  let rss = 0;
  let heap = 0;
  const timer = setInterval(() => {
    const m = process.memoryUsage();
    rss = Math.max(rss, m.rss - base.rss);
    heap = Math.max(heap, m.heapUsed - base.heapUsed);
  }, 10);
  return { stop: () => (clearInterval(timer), { rssMb: rss / 2 ** 20, heapMb: heap / 2 ** 20 }) };
}

let emu: EmulatorHandle;
let dir: string;
const gateways: TestGateway[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'fleet-oversized-'));
  emu = await startEmulator({ port: 0 });
});

afterAll(async () => {
  for (const g of gateways) await g.close();
  await emu?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function gateway(name: string, url: string, logger = captureLogger()) {
  const port = await freePort();
  const gw = await startTestGateway(emu, { gateway: { name }, http: { enabled: true, port }, uplink: sharing, fleet: { mqtt: { url, prefix: PREFIX, interval: '1s', keepalive: '5s' } } }, { dir: join(dir, name), logger: logger.logger });
  gateways.push(gw);
  await gw.handle.buffer.append(Array.from({ length: 20_000 }, (_, i) => ({ variable: `mvr_gen_${(i % 20) + 1}`, ts: Date.UTC(2026, 0, 1) + i * 10, value: i })));
  await waitFor(() => gw.handle.status().fleet?.broker.connected && gw.handle.budget.ratePerMinute > BUDGET * 0.9, { timeoutMs: 30_000, what: `${name} connected, alone with the whole budget` });
  // The console's Fleet page asks: the gateway now also reads every status and last status.
  await fetch(`http://127.0.0.1:${port}/console/api/fleet`);
  return { gw, log: logger, api: async () => (await (await fetch(`http://127.0.0.1:${port}/console/api/fleet`)).json()) as { rows: Array<{ gateway: string }> } };
}

describe('a 64 MB retained message under the fleet prefix', () => {
  (mosquittoAvailable() ? it : it.skip)('MQTT 5 broker (mosquitto): never sent to the gateway (maximum packet size)', async () => {
    const broker = await startMosquitto();
    try {
      const { gw, api } = await gateway('line-1', broker.url);
      const mem = memoryWatch();
      await publishRetainedFromAnotherProcess(broker.url, { kind: 'big', topic: `${PREFIX}/rogue/budget`, json: rogueAnnouncement, bytes: BIG });
      await publishRetainedFromAnotherProcess(broker.url, { kind: 'big', topic: `${PREFIX}/rogue/status`, json: rogueStatus, bytes: BIG });
      const dropped = () => broker.log().split('\n').filter((l) => l.includes('Dropping too large outgoing PUBLISH for edge-gateway-fleet-line-1')).length;
      // Either the broker refused to send both (today) or the gateway took the rogue in (before).
      await waitFor(() => dropped() >= 2 || (gw.handle.status().fleet?.budget_sharing?.members.length ?? 0) > 1, { timeoutMs: 30_000, what: 'the rogue messages dropped or delivered' });
      const grew = mem.stop();
      expect(gw.handle.status().fleet!.budget_sharing!.members.map((m) => m.name)).toEqual(['line-1']);
      expect(dropped()).toBeGreaterThanOrEqual(2);
      expect(grew.rssMb, 'RSS growth (MB) while the rogue messages were published').toBeLessThan(40);
      expect(gw.handle.budget.ratePerMinute).toBeGreaterThan(BUDGET * 0.9);
      expect((await api()).rows.map((r) => r.gateway)).toEqual(['line-1']);
      expect(gw.handle.status().fleet!.broker.protocol).toBe('MQTT 5');
    } finally {
      await broker.stop();
    }
  }, 90_000);

  it('MQTT 3.1.1 broker (aedes): dropped by its size before it is decoded', async () => {
    const broker = await startAedes();
    try {
      const { gw, log, api } = await gateway('line-2', broker.url);
      const mem = memoryWatch();
      await publishRetainedFromAnotherProcess(broker.url, { kind: 'big', topic: `${PREFIX}/rogue/budget`, json: rogueAnnouncement, bytes: BIG });
      const warned = () => log.lines.find((l) => String(l.msg).startsWith('ignoring an oversized message') && l.topic === `${PREFIX}/rogue/budget`);
      await waitFor(() => warned() || (gw.handle.status().fleet?.budget_sharing?.members.length ?? 0) > 1, { timeoutMs: 30_000, what: 'the rogue announcement dropped or counted' });
      const grew = mem.stop();
      expect(gw.handle.status().fleet!.budget_sharing!.members.map((m) => m.name)).toEqual(['line-2']);
      expect(warned()).toMatchObject({ bytes: expect.any(Number), limit: 65_536 });
      expect(warned()!.bytes as number).toBeGreaterThan(BIG);
      // Never turned into a string: before, 64 MB twice over (toString, then JSON.parse) in the V8 heap.
      expect(grew.heapMb, 'V8 heap growth (MB) while the rogue message arrived').toBeLessThan(40);
      expect(gw.handle.budget.ratePerMinute).toBeGreaterThan(BUDGET * 0.9);
      expect((await api()).rows.map((r) => r.gateway)).toEqual(['line-2']);
      // It asked for MQTT 5 first; aedes speaks 3.1.1 only, so it fell back.
      expect(gw.handle.status().fleet!.broker.protocol).toBe('MQTT 3.1.1');
      expect(log.text()).toContain('the plant broker refused MQTT 5');
    } finally {
      await broker.close();
    }
  }, 90_000);
});
