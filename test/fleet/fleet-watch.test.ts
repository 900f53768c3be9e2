import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { FleetLink } from '../../src/fleet/broker-link.js';
import { fleetMqttSchema } from '../../src/fleet/config.js';
import { fleetStatusFrom } from '../../src/fleet/status-doc.js';
import type { FleetRow } from '../../src/fleet/view.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { connectClient, endClient, startAedes, type TestAedes } from '../sources/mqtt/helpers.js';

/**
 * The server side of the console's Fleet page over real HTTP and a real broker (aedes): the
 * gateway keeps the table from its own plant-broker link (its own row included), a cleared
 * retained status removes a gateway, and a subscription the broker's ACL refuses (SUBACK 0x80,
 * MQTT 3.1.1 §3.9.3) is reported instead of showing an empty fleet as if all were well.
 */
const PREFIX = 'site/fleet';
type FleetApi = { configured: boolean; self: string; broker: { connected: boolean; subscription: string; prefix: string }; rows: FleetRow[] };

let emu: EmulatorHandle;
let broker: TestAedes;
let dir: string;
const gateways: TestGateway[] = [];

async function gateway(name: string): Promise<{ gw: TestGateway; api: () => Promise<FleetApi> }> {
  const port = await freePort();
  const gw = await startTestGateway(
    emu,
    { gateway: { name }, http: { enabled: true, port }, generator: [{ name: 'gen', variables: ['mvr_w_1'], interval: '500ms' }], fleet: { mqtt: { url: broker.url, prefix: PREFIX, interval: '1s', keepalive: '5s' } } },
    { dir: join(dir, name) },
  );
  gateways.push(gw);
  return { gw, api: async () => (await (await fetch(`http://127.0.0.1:${port}/console/api/fleet`)).json()) as FleetApi };
}

describe('console fleet table (GET /console/api/fleet)', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fleet-watch-'));
    emu = await startEmulator({ port: 0 });
    broker = await startAedes();
    // The plant broker's ACL: the gateway "no-read" may not read the fleet subtree.
    broker.aedes.authorizeSubscribe = (client, sub, cb) => cb(null, client?.id === 'edge-gateway-fleet-no-read' ? null : sub);
  }, 60_000);

  afterAll(async () => {
    for (const g of gateways) await g.close();
    await broker?.close();
    await emu?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists this gateway and its peers; a cleared retained status removes a gateway', async () => {
    const subscribed: string[] = [];
    broker.aedes.on('subscribe', (subs, client) => subscribed.push(...subs.map((x) => `${client?.id} ${x.topic}`)));
    const { gw, api } = await gateway('cell-1');
    // Connected and publishing, but not subscribed to the plant's statuses while nobody asks: only
    // to its own status topic (where a second gateway with its name would show, issue 21 §5).
    const ownTopic = `edge-gateway-fleet-cell-1 ${PREFIX}/cell-1/status`;
    await waitFor(() => (gw.handle.status().fleet?.broker.connected && subscribed.includes(ownTopic) ? true : null), { timeoutMs: 20_000, what: 'cell-1 connected to the plant broker' });
    expect(subscribed.filter((x) => x.startsWith('edge-gateway-fleet-cell-1 '))).toEqual([ownTopic]);
    // A peer published with src/fleet's own code.
    const base = gw.handle.status();
    const peer = new FleetLink({ config: fleetMqttSchema.parse({ url: broker.url, prefix: PREFIX }), gateway: 'cell-2', sharing: false, logger: silentLogger(), metrics: createMetrics(), clock: systemClock });
    peer.start();
    await waitFor(() => peer.connected, { timeoutMs: 10_000, what: 'cell-2 connected' });
    expect(peer.publishStatus(fleetStatusFrom({ ...base, gateway: { ...base.gateway, name: 'cell-2' } }, null, 10_000, Date.now()))).toBe(true);

    const body = await waitFor(async () => {
      const b = await api();
      return b.rows.length === 2 && b.rows.every((r) => r.state === 'online') ? b : null;
    }, { timeoutMs: 30_000, intervalMs: 300, what: 'cell-1 and cell-2 online in the console fleet table' });
    expect(subscribed.filter((x) => x.startsWith('edge-gateway-fleet-cell-1 ')).sort()).toEqual([`edge-gateway-fleet-cell-1 ${PREFIX}/+/last`, `edge-gateway-fleet-cell-1 ${PREFIX}/+/status`, ownTopic]);
    expect(body.configured).toBe(true);
    expect(body.self).toBe('cell-1');
    expect(body.broker).toMatchObject({ connected: true, subscription: 'ok', prefix: PREFIX });
    const own = body.rows.find((r) => r.gateway === 'cell-1')!;
    expect(own.sources_up).toBe(1);
    expect(own.version).toMatch(/^\d+\.\d+\.\d+/);

    // An operator removes a decommissioned gateway by clearing its retained status (§3.3.1.3).
    await peer.close();
    const admin = await connectClient(broker.url);
    await admin.publishAsync(`${PREFIX}/cell-2/status`, '', { qos: 1, retain: true });
    await endClient(admin);
    await waitFor(async () => ((await api()).rows.map((r) => r.gateway).join() === 'cell-1' ? true : null), { timeoutMs: 20_000, intervalMs: 300, what: 'cell-2 gone from the table' });
  }, 90_000);

  it('a console started after a gateway crashed shows it offline with its last figures (the last topic)', async () => {
    const base = gateways[0].handle.status();
    const peer = new FleetLink({ config: fleetMqttSchema.parse({ url: broker.url, prefix: PREFIX }), gateway: 'cell-3', sharing: false, logger: silentLogger(), metrics: createMetrics(), clock: systemClock });
    peer.start();
    await waitFor(() => peer.connected, { timeoutMs: 10_000, what: 'cell-3 connected' });
    const doc = { ...fleetStatusFrom({ ...base, gateway: { ...base.gateway, name: 'cell-3' } }, null, 10_000, Date.now()), backlog: 4_321, last_error: 'uplink retrying: 503' };
    expect(peer.publishStatus(doc)).toBe(true);
    // Wait until the broker holds it retained, then drop the connection without DISCONNECT: the
    // broker publishes the will (MQTT 3.1.1 §3.1.2.5).
    const watcher = await connectClient(broker.url);
    const seen = new Map<string, string>();
    watcher.on('message', (t, p) => seen.set(t, p.toString()));
    await watcher.subscribeAsync(`${PREFIX}/cell-3/+`, { qos: 1 });
    await waitFor(() => (seen.get(`${PREFIX}/cell-3/last`)?.includes('4321') ? true : null), { timeoutMs: 10_000, what: 'the last status retained' });
    const clients = (broker.aedes as unknown as { clients: Record<string, { close(): void }> }).clients;
    clients['edge-gateway-fleet-cell-3'].close();
    await waitFor(() => (seen.get(`${PREFIX}/cell-3/status`)?.includes('"offline"') ? true : null), { timeoutMs: 10_000, what: "cell-3's will" });
    await peer.close();
    await endClient(watcher);

    const { api } = await gateway('late-viewer');
    const row = await waitFor(async () => (await api()).rows.find((r) => r.gateway === 'cell-3') ?? null, { timeoutMs: 30_000, intervalMs: 300, what: 'cell-3 in the late console' });
    expect(row.state).toBe('offline');
    expect(row.reason).toMatch(/last will/);
    expect(row.backlog).toBe(4_321);
    expect(row.last_error).toBe('uplink retrying: 503');
    expect(row.sources_up).toBe(1);
    expect(row.last_status_at).toBe(doc.at);
  }, 90_000);

  it('says so when the broker refuses the read of the status topics', async () => {
    const { api } = await gateway('no-read');
    const body = await waitFor(async () => {
      const b = await api();
      return b.broker.subscription === 'refused' ? b : null;
    }, { timeoutMs: 30_000, intervalMs: 300, what: 'the refused subscription reported' });
    expect(body.configured).toBe(true);
    expect(body.broker.connected).toBe(true);
    expect(body.rows).toEqual([]);
  }, 60_000);
});
