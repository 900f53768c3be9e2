import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import type { FleetRow } from '../../src/fleet/view.js';
import { freePort } from '../../src/sim/modbus-device.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';
import { connectClient, endClient, mosquittoAvailable, startMosquitto, type Mosquitto } from '../sources/mqtt/helpers.js';

/**
 * Issue 21 §5: the broker ACL docs/scale-out.md tells a plant to use, taken from the document as
 * it stands and loaded into a real mosquitto. Two gateways (one user each, named like the
 * gateway) share the budget and see each other's status; a leaked gateway password cannot
 * announce under another name; the viewer account can read the table and nothing else.
 */
const run = mosquittoAvailable() ? describe : describe.skip;
const PREFIX = 'edge-gateway/fleet';
const USERS = { 'line-1': 'pw-line-1', 'line-2': 'pw-line-2', 'fleet-viewer': 'pw-viewer' };

function documentedAcl(): string {
  const doc = readFileSync(join(ROOT, 'docs', 'scale-out.md'), 'utf8');
  const m = /```\n(# \/etc\/mosquitto\/acl[^]*?)```/.exec(doc);
  if (!m) throw new Error('docs/scale-out.md has no ACL block starting "# /etc/mosquitto/acl"');
  return m[1];
}

let broker: Mosquitto;
let emu: EmulatorHandle;
const gws: TestGateway[] = [];
let port1 = 0;

run('the plant broker ACL of docs/scale-out.md (mosquitto)', () => {
  beforeAll(async () => {
    emu = await startEmulator({ port: 0 });
    broker = await startMosquitto({ users: USERS });
    // The ACL file goes next to the broker's configuration; mosquitto reads it on start.
    writeFileSync(join(broker.dir, 'acl'), documentedAcl());
    await broker.stop();
    writeFileSync(join(broker.dir, 'mosquitto.conf'), `${readFileSync(join(broker.dir, 'mosquitto.conf'), 'utf8')}acl_file ${join(broker.dir, 'acl')}\n`);
    await broker.restart();
    for (const name of ['line-1', 'line-2'] as const) {
      const port = await freePort();
      if (name === 'line-1') port1 = port;
      gws.push(
        await startTestGateway(emu, {
          gateway: { name },
          http: { enabled: true, port },
          uplink: { requests_per_minute: 1_400, budget_sharing: { mode: 'fleet', group: 'nat', announce_interval: 500 } },
          fleet: { mqtt: { url: broker.url, username: name, password: USERS[name], interval: '1s', keepalive: '5s' } },
        }),
      );
    }
  }, 90_000);

  afterAll(async () => {
    for (const g of gws) await g.destroy();
    await broker?.stop();
    await emu?.close();
  });

  it('lets each gateway write its own subtree and read the others; nothing else', async () => {
    // Budget sharing works: each reads the other's announcement and writes its own.
    await waitFor(() => gws.every((g) => g.handle.status().fleet?.budget_sharing?.members.length === 2), { timeoutMs: 30_000, what: 'both gateways counting each other' });
    // The console's Fleet page: statuses and last statuses readable, own ones writable; no twin suspected.
    const rows = await waitFor(async () => {
      const body = (await (await fetch(`http://127.0.0.1:${port1}/console/api/fleet`)).json()) as { broker: { subscription: string }; rows: FleetRow[] };
      return body.broker.subscription === 'ok' && body.rows.filter((r) => r.state === 'online').length === 2 ? body.rows : null;
    }, { timeoutMs: 30_000, intervalMs: 300, what: 'both gateways online on line-1\'s Fleet page' });
    expect(rows.map((r) => r.gateway).sort()).toEqual(['line-1', 'line-2']);
    for (const g of gws) expect(g.handle.status().fleet!.broker.duplicate_name).toBeNull();

    // line-1's password leaks: its holder cannot announce under another name.
    const observer = await connectClient(broker.url, { username: 'line-2', password: USERS['line-2'], clientId: 'observer' });
    const seen: string[] = [];
    observer.on('message', (t) => seen.push(t));
    await observer.subscribeAsync(`${PREFIX}/+/budget`, { qos: 1 });
    const leaked = await connectClient(broker.url, { username: 'line-1', password: USERS['line-1'], clientId: 'leaked' });
    await leaked.publishAsync(`${PREFIX}/fake-9/budget`, JSON.stringify({ group: 'nat', demand_per_min: 1_400, lease_ms: 600_000 }), { qos: 1 });
    await leaked.publishAsync(`${PREFIX}/line-2/status`, JSON.stringify({ v: 1, state: 'offline', at: new Date().toISOString() }), { qos: 1 });
    // After those, on the same connection: an announcement it may send (line-1's own, unchanged).
    await leaked.publishAsync(`${PREFIX}/line-1/budget`, JSON.stringify({ group: 'nat', demand_per_min: 1_400, lease_ms: 15_000 }), { qos: 1 });
    await waitFor(() => seen.filter((t) => t === `${PREFIX}/line-1/budget`).length > 0, { timeoutMs: 10_000, what: 'the allowed announcement delivered' });
    expect(seen).not.toContain(`${PREFIX}/fake-9/budget`);
    expect(broker.log()).toMatch(/Denied PUBLISH from leaked .*edge-gateway\/fleet\/fake-9\/budget/);
    expect(broker.log()).toMatch(/Denied PUBLISH from leaked .*edge-gateway\/fleet\/line-2\/status/);
    expect(gws[1].handle.status().fleet!.budget_sharing!.members.map((m) => m.name).sort()).toEqual(['line-1', 'line-2']);
    await endClient(leaked);
    await endClient(observer);

    // The viewer account reads the table (and may not write).
    const r = await runCli(['fleet', '--broker', broker.url, '--prefix', PREFIX, '--username', 'fleet-viewer', '--json', '--wait', '1'], { env: { FLEET_MQTT_PASSWORD: USERS['fleet-viewer'] }, timeoutMs: 30_000 });
    expect(r.code).toBe(0);
    expect((JSON.parse(r.out) as FleetRow[]).map((x) => `${x.gateway}:${x.state}`).sort()).toEqual(['line-1:online', 'line-2:online']);
    const viewer = await connectClient(broker.url, { username: 'fleet-viewer', password: USERS['fleet-viewer'], clientId: 'viewer-writes' });
    await viewer.publishAsync(`${PREFIX}/line-1/status`, '', { qos: 1, retain: true });
    await endClient(viewer);
    expect(broker.log()).toMatch(/Denied PUBLISH from viewer-writes .*edge-gateway\/fleet\/line-1\/status/);
  }, 120_000);
});
