import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID } from '../../src/emulator/demo-fixture.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, delay, startHarness, stored, waitFor } from './helpers.js';

const ROOT = join(import.meta.dirname, '..', '..');
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function emulator(): Promise<EmulatorHandle> {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  return emu;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-annotations-'));
  cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Posts an annotation straight to the emulator, as an earlier attempt of the gateway would have. */
async function postDirect(emu: EmulatorHandle, body: unknown): Promise<number> {
  const tok = await request(`${emu.authUrl}/oauth2/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${DEMO_CLIENT_ID}:${DEMO_CLIENT_SECRET}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&audience=com.service.tracking',
  });
  const { access_token } = (await tok.body.json()) as { access_token: string };
  const res = await request(`${emu.baseUrl}/machine-data-annotations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${access_token}`, 'service-organisation-id': DEMO_ORGANISATION_ID, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.body.text();
  return res.statusCode;
}

describe('annotation outbox', () => {
  it('queues annotations while the service is down and delivers each exactly once, in creation order, after recovery', async () => {
    const emu = await emulator();
    const h = await startHarness({ emu });
    cleanup.push(() => h.close());
    emu.setFaults({ outage_seconds: 4 });

    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const t0 = Date.now();
      const r = await call(h.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: `During the outage ${i}`, machine: 'press1' });
      expect(r.status).toBe(201);
      expect(Date.now() - t0).toBeLessThan(2_000); // the operator is not kept waiting for the service
      ids.push(r.body.annotation.external_id);
    }
    await call(h.url, 'POST', '/api/machines/mixer1/downtime/start', {});
    await delay(50);
    const stop = await call(h.url, 'POST', '/api/machines/mixer1/downtime/stop', { reason: 'Cleaning' });
    ids.push(stop.body.annotation.external_id);

    // While the outage lasts they stay queued, with failed attempts counted, and the page says offline.
    await waitFor(async () => (await call(h.url, 'GET', `/api/annotations/${ids[0]}`)).body.annotation.attempts >= 1, { what: 'a failed attempt' });
    const during = await call(h.url, 'GET', '/api/panel');
    expect(during.body.counts.queued).toBe(5);
    expect(during.body.uplink.condition).toBe('retrying');
    const first = (await call(h.url, 'GET', `/api/annotations/${ids[0]}`)).body.annotation;
    expect(first.state).toBe('queued');
    expect(first.last_error).toMatch(/no response/);
    expect(emu.annotations()).toHaveLength(0);

    await waitFor(async () => (await call(h.url, 'GET', '/api/annotations?state=delivered')).body.annotations.length === 5, { timeoutMs: 45_000, what: 'all delivered' });
    for (const id of ids) expect(stored(emu, id)).toHaveLength(1);
    expect(emu.annotations()).toHaveLength(5);
    // One at a time, oldest first.
    expect(emu.annotations().map((a) => a.external_id)).toEqual(ids);
    expect(h.gw.handle.status().annotations).toMatchObject({ queued: 0, delivered: 5, refused: 0 });
  });

  it('a 409 on a retry counts as delivered: an earlier attempt stored it but its answer was lost (stop, direct post, restart)', async () => {
    const emu = await emulator();
    const dir = tempDir();
    emu.setFaults({ outage_seconds: 600 });
    const a = await startHarness({ emu, dir });
    const r = await call(a.url, 'POST', '/api/annotations', { type: 'range', started_at: '2026-03-01T08:00:00Z', ended_at: '2026-03-01T08:30:00Z', text: 'Sent once', machine: 'press1' });
    const id = r.body.annotation.external_id;
    await waitFor(async () => (await call(a.url, 'GET', `/api/annotations/${id}`)).body.annotation.attempts >= 1);
    await a.gw.close();

    // What the lost attempt did at the service: stored under the same external_id.
    emu.clearFaults();
    const body = { type: 'range', started_at: '2026-03-01T08:00:00.000Z', ended_at: '2026-03-01T08:30:00.000Z', text: 'Sent once', machine_variables: [{ id: 'mvr_press1_state' }, { id: 'mvr_press1_speed' }], site: { external_id: 'plant-demo' }, external_id: id };
    expect(await postDirect(emu, body)).toBe(201);

    // The restarted gateway still has it queued (durable outbox) and sends the same id: 409 = delivered.
    const b = await startHarness({ emu, dir });
    cleanup.push(() => b.gw.close());
    const after = await waitFor(async () => {
      const g = await call(b.url, 'GET', `/api/annotations/${id}`);
      return g.body.annotation.state === 'delivered' && g.body.annotation;
    });
    expect(after.last_error).toMatch(/409/);
    expect(after.service_id).toBeNull();
    expect(stored(emu, id)).toHaveLength(1);
    const delivered = await b.gw.handle.metrics.annotationsDelivered.get();
    expect(delivered.values.find((v) => v.labels.origin === 'api')?.value).toBe(1);
  });

  it('survives SIGKILL right after the 201: the annotation is delivered once by the next run', async () => {
    const emu = await emulator();
    const dir = tempDir();
    const port = await freePort();
    const file = join(dir, 'gateway.yaml');
    writeFileSync(
      file,
      [
        `gateway: { name: killed-gw, data_dir: "${join(dir, 'data')}", status_interval: 0 }`,
        'log: { level: warn, format: json }',
        `service: { base_url: "${emu.baseUrl}", auth_url: "${emu.authUrl}", organisation_id: ${DEMO_ORGANISATION_ID}, request_timeout: 5s, auth: { mode: client_credentials, client_id: ${DEMO_CLIENT_ID}, client_secret: ${DEMO_CLIENT_SECRET} } }`,
        `buffer: { path: "${join(dir, 'buffer.db')}" }`,
        `http: { host: 127.0.0.1, port: ${port} }`,
        'annotations: { site: { external_id: plant-demo }, machines: [ { key: press1, machine_variables: [mvr_press1_state] } ] }',
      ].join('\n'),
    );
    const url = `http://127.0.0.1:${port}`;
    const run = () => {
      const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), 'run', '--config', file], { cwd: ROOT, stdio: 'ignore' });
      cleanup.push(async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      });
      return child;
    };
    emu.setFaults({ outage_seconds: 600 });
    const first = run();
    await waitFor(() => call(url, 'GET', '/healthz').then((r) => r.status === 200), { timeoutMs: 30_000, what: 'first gateway up' });
    const r = await call(url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'Power cut right after', machine: 'press1' });
    expect(r.status).toBe(201);
    first.kill('SIGKILL');
    await new Promise((res) => first.once('exit', res));
    emu.clearFaults();
    run();
    const id = r.body.annotation.external_id;
    await waitFor(() => stored(emu, id).length === 1, { timeoutMs: 30_000, what: 'delivered by the second run' });
    // Nothing more to send: no second copy can be on its way.
    await waitFor(async () => (await call(url, 'GET', '/api/annotations?state=queued')).body.annotations.length === 0, { what: 'the outbox empty' });
    expect(stored(emu, id)).toHaveLength(1);
    expect((await call(url, 'GET', `/api/annotations/${id}`)).body.annotation.state).toBe('delivered');
  });

  it('keeps an open downtime and queued annotations across a restart', async () => {
    const emu = await emulator();
    const dir = tempDir();
    const a = await startHarness({ emu, dir });
    const start = await call(a.url, 'POST', '/api/machines/press1/downtime/start', { reason: 'Breakdown' });
    const startedMs = start.body.downtime.started_ms;
    emu.setFaults({ outage_seconds: 600 });
    const queued = await call(a.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'Queued across a restart', machine_variables: [] });
    await a.gw.close();
    emu.clearFaults();

    const b = await startHarness({ emu, dir });
    cleanup.push(() => b.gw.close());
    const panel = await call(b.url, 'GET', '/api/panel');
    const press = panel.body.machines.find((m: { key: string }) => m.key === 'press1');
    expect(press.downtime).toMatchObject({ started_ms: startedMs, reason: 'Breakdown' });
    expect(b.gw.handle.status().annotations).toMatchObject({ open_downtimes: [expect.objectContaining({ machine: 'press1' })] });
    const stop = await call(b.url, 'POST', '/api/machines/press1/downtime/stop', { text: 'bearing' });
    expect(stop.body.annotation).toMatchObject({ text: 'Breakdown: bearing', started_at: new Date(startedMs).toISOString() });
    await waitFor(() => stored(emu, stop.body.annotation.external_id).length === 1 && stored(emu, queued.body.annotation.external_id).length === 1);
    expect(emu.annotations().map((x) => x.external_id)).toEqual([queued.body.annotation.external_id, stop.body.annotation.external_id]);
  });

  it('goes ahead of sample traffic in the shared request budget', async () => {
    const emu = await emulator();
    // One request per second for everything; 32 sample batches wait for it at any moment.
    const h = await startHarness({
      emu,
      sections: {
        uplink: { requests_per_minute: 60, batch_size: 1, flush_interval: 0, max_in_flight: 32 },
        generator: [{ name: 'load', variables: { prefix: 'mvr_gen_', count: 20 }, interval: 10 }],
      },
    });
    cleanup.push(() => h.close());
    // The sync path waits for a slot before it claims (sync-sender.ts), so the samples queue in the
    // buffer: 2,000 a second against one request a second.
    await waitFor(() => h.gw.handle.buffer.available >= 200 && h.gw.handle.budget.waiting().data >= 1, { what: 'sample batches waiting for the budget' });
    const t0 = Date.now();
    const r = await call(h.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'Priority', machine_variables: [] });
    await waitFor(() => stored(emu, r.body.annotation.external_id).length === 1, { timeoutMs: 30_000 });
    // Behind the buffered samples it would wait 200+ s (one-sample batches at 1 per second). It waits
    // for at most one sample batch: the order of waiting calls is tested in budget.test.ts.
    expect(Date.now() - t0).toBeLessThan(8_000);
    expect(h.gw.handle.buffer.available).toBeGreaterThanOrEqual(100);
  });
});
