import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { DEMO_API_KEY, call, client, item, manualClock, withEmulator } from './helpers.js';

const V = 'mvr_press1_speed';
const T0 = '2026-01-01T00:00:00.000Z';

/** A request whose socket the emulator destroys rejects (no status). */
async function expectDropped(p: Promise<unknown>) {
  await expect(p).rejects.toThrow(/other side closed|socket|ECONNRESET|terminated/i);
}

describe('faults (/_emulator/faults and the handle)', () => {
  let em: EmulatorHandle;
  let c: ReturnType<typeof client>;
  let r = 0.5;
  const clock = manualClock();
  beforeAll(async () => {
    // Deterministic "random": tests set `r` to steer the fractional faults.
    em = await withEmulator({ random: () => r, clock });
    c = client(em, DEMO_API_KEY);
  });
  beforeEach(async () => {
    em.clearFaults();
    await em.reset();
    r = 0.5;
  });
  afterAll(() => em.close());

  it('GET shows the defaults; POST merges; DELETE clears', async () => {
    const g = await call(`${em.inspectUrl}/faults`);
    expect(g.body).toEqual({ error_rate: 0, status: 500, latency_ms: 0, drop_connection_rate: 0, outage_seconds: 0, force_429_seconds: 0, job_failure_rate: 0, neighbour_per_minute: 0, refusal_wording: 'detailed', paths: null, fail_next: [] });
    expect((await call(`${em.inspectUrl}/faults`, { method: 'POST', json: { error_rate: 0.25, status: 503 } })).status).toBe(200);
    const p = await call(`${em.inspectUrl}/faults`, { method: 'POST', json: { latency_ms: 5 } });
    expect(p.body).toMatchObject({ error_rate: 0.25, status: 503, latency_ms: 5 });
    expect(em.faults()).toMatchObject({ error_rate: 0.25, status: 503, latency_ms: 5 });
    const d = await call(`${em.inspectUrl}/faults`, { method: 'DELETE' });
    expect(d.body).toEqual(g.body);
  });

  it('refuses bad fault settings with a 400 naming the field', async () => {
    for (const [body, field] of [
      [{ error_rate: 1.5 }, 'error_rate'],
      [{ status: 200 }, 'status'],
      [{ latency_ms: -1 }, 'latency_ms'],
      [{ paths: ['machines'] }, 'paths[0]'],
      [{ eror_rate: 1 }, 'eror_rate'],
    ] as const) {
      const res = await call(`${em.inspectUrl}/faults`, { method: 'POST', json: body });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.message.startsWith(`${field}:`), res.body.message).toBe(true);
    }
    expect(() => em.setFaults({ error_rate: 2 })).toThrow(/error_rate/);
  });

  it('error_rate answers that fraction with `status` and processes nothing', async () => {
    em.setFaults({ error_rate: 0.3, status: 503 });
    r = 0.29; // below the rate: injected
    const bad = await c.batch([item(V, T0, 1)]);
    expect(bad.status).toBe(503);
    expect(bad.body).toEqual({ code: 'service_unavailable', message: 'injected fault (error_rate)' });
    expect(bad.headers['service-request-id']).toMatch(/^req_/);
    expect(em.values(V)).toEqual([]);
    r = 0.3; // not below: processed
    expect((await c.batch([item(V, T0, 1)])).status).toBe(200);
    expect(em.values(V)).toHaveLength(1);
    em.setFaults({ status: 500 });
    r = 0;
    const e500 = await c.get('/machines');
    expect(e500.status).toBe(500);
    expect(e500.body.code).toBe('internal_server_error');
    expect(em.stats().requests['POST /machine-data/batch']).toEqual({ '200': 1, '503': 1 });
  });

  it('error_rate with status 429 uses the rate-limit envelope', async () => {
    em.setFaults({ error_rate: 1, status: 429 });
    const res = await c.get('/machines');
    expect(res.status).toBe(429);
    expect(res.body.error).toMatchObject({ type: 'rate_limit', code: 'rate_limit_exceeded' });
    expect(res.headers['retry-after']).toBe('1');
  });

  it('error_rate over real randomness hits about that fraction', async () => {
    const em2 = await withEmulator();
    try {
      em2.setFaults({ error_rate: 0.5 });
      const c2 = client(em2, DEMO_API_KEY);
      let errors = 0;
      for (let i = 0; i < 200; i++) if ((await c2.get('/machines')).status === 500) errors++;
      expect(errors).toBeGreaterThan(60);
      expect(errors).toBeLessThan(140);
    } finally {
      await em2.close();
    }
  });

  it('latency_ms delays the answer', async () => {
    em.setFaults({ latency_ms: 800 });
    const t0 = performance.now();
    const slow = c.get('/machines');
    const t1 = performance.now();
    await call(`${em.inspectUrl}/stats`); // never delayed
    expect(performance.now() - t1).toBeLessThan(400);
    expect((await slow).status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(790);
  });

  it('drop_connection_rate destroys the socket without an answer and stores nothing', async () => {
    em.setFaults({ drop_connection_rate: 0.5 });
    r = 0.4;
    await expectDropped(request(`${em.baseUrl}/machine-data/batch`, { method: 'POST', headers: { authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo', 'content-type': 'application/json' }, body: JSON.stringify({ items: [item(V, T0, 1)] }) }));
    expect(em.values(V)).toEqual([]);
    r = 0.6;
    expect((await c.batch([item(V, T0, 1)])).status).toBe(200);
    expect(em.stats()).toMatchObject({ dropped_connections: 1 });
    expect(em.stats().requests['POST /machine-data/batch']).toEqual({ dropped: 1, '200': 1 });
  });

  it('outage_seconds makes every request fail without an answer for that long; /_emulator stays up', async () => {
    em.setFaults({ outage_seconds: 30 });
    expect(em.faults().outage_seconds).toBe(30);
    await expectDropped(request(`${em.baseUrl}/machines`, { headers: { authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } }));
    await expectDropped(request(em.tokenUrl, { method: 'POST' }));
    expect((await call(`${em.inspectUrl}/stats`)).status).toBe(200);
    clock.advance(29_000);
    expect(em.faults().outage_seconds).toBe(1);
    await expectDropped(request(`${em.baseUrl}/machines`, { headers: { authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } }));
    clock.advance(1_000);
    expect(em.faults().outage_seconds).toBe(0);
    expect((await c.get('/machines')).status).toBe(200);
  });

  it('force_429_seconds answers 429 with Retry-After for that long', async () => {
    em.setFaults({ force_429_seconds: 10 });
    const res = await c.batch([item(V, T0, 1)]);
    expect(res.status).toBe(429);
    expect(res.body).toEqual({ error: { type: 'rate_limit', code: 'rate_limit_exceeded', message: expect.any(String), request_id: res.headers['service-request-id'] } });
    expect(res.headers['retry-after']).toBe('10');
    clock.advance(7_500);
    expect((await c.get('/machines')).headers['retry-after']).toBe('3');
    clock.advance(2_500);
    expect((await c.batch([item(V, T0, 1)])).status).toBe(200);
    expect(em.values(V)).toHaveLength(1);
    expect(em.stats().rate_limited).toBe(0); // forced 429s are not the rate limit
  });

  it('paths restricts the faults to path prefixes (full or relative to /tracking/v1)', async () => {
    em.setFaults({ error_rate: 1, paths: ['/machine-data/batch', '/oauth2/'] });
    expect((await c.batch([item(V, T0, 1)])).status).toBe(500);
    expect((await c.get('/machines')).status).toBe(200);
    expect((await call(em.tokenUrl, { method: 'POST' })).status).toBe(500);
    em.setFaults({ paths: ['/tracking/v1/machines'] });
    expect((await c.get('/machines')).status).toBe(500);
    expect((await c.batch([item(V, T0, 1)])).status).toBe(200);
    em.setFaults({ paths: null });
    expect((await c.get('/machine-variables')).status).toBe(500);
  });

  it('faults never apply to /_emulator/', async () => {
    em.setFaults({ error_rate: 1, outage_seconds: 100, force_429_seconds: 100, drop_connection_rate: 1 });
    for (const path of ['/stats', '/values', '/annotations', '/import-jobs', '/faults']) expect((await call(em.inspectUrl + path)).status).toBe(200);
  });
});

describe('inspection API', () => {
  let em: EmulatorHandle;
  beforeAll(async () => {
    em = await withEmulator();
  });
  afterAll(() => em.close());

  it('stats, values, annotations over HTTP, then reset clears data and counters', async () => {
    const c = client(em, DEMO_API_KEY);
    await c.batch([item(V, '2026-01-01T00:00:01.000Z', 2), item(V, T0, 1), item('mvr_press1_state', T0, 3)]);
    await c.batch([item(V, T0, 5)]);
    await c.post('/machine-data-annotations', { type: 'instant', occurred_at: T0, text: 'x', machine_variables: [], site: { id: 'ste_demo1' } });

    const stats = (await call(`${em.inspectUrl}/stats`)).body;
    expect(stats).toMatchObject({ values_stored: 3, values_overwritten: 1, batches_accepted: 2, rate_limited: 0, annotations: 1, import_jobs: { accepted: 0, processing: 0, finished: 0, failed: 0 } });
    expect(stats.requests).toEqual({ 'POST /machine-data/batch': { '200': 2 }, 'POST /machine-data-annotations': { '201': 1 } });

    const values = await call(`${em.inspectUrl}/values?machine_variable_id=${V}`);
    expect(values.body).toEqual([
      { timestamp: T0, value: 5, writes: 2 },
      { timestamp: '2026-01-01T00:00:01.000Z', value: 2, writes: 1 },
    ]);
    expect((await call(`${em.inspectUrl}/values`)).body).toEqual({ [V]: 2, mvr_press1_state: 1 });
    expect((await call(`${em.inspectUrl}/values?machine_variable_id=mvr_nope`)).status).toBe(404);
    const ann = await call(`${em.inspectUrl}/annotations`);
    expect(ann.body).toEqual([expect.objectContaining({ organisation_id: 'org_demo', type: 'instant', text: 'x' })]);

    expect((await call(`${em.inspectUrl}/reset`, { method: 'POST' })).status).toBe(200);
    const after = (await call(`${em.inspectUrl}/stats`)).body;
    expect(after).toEqual({ values_stored: 0, values_overwritten: 0, batches_accepted: 0, requests: {}, rate_limited: 0, dropped_connections: 0, import_jobs: { accepted: 0, processing: 0, finished: 0, failed: 0 }, annotations: 0, tokens_issued: 0, neighbour: { admitted: 0, rate_limited: 0 } });
    expect((await call(`${em.inspectUrl}/values`)).body).toEqual({});
    expect((await call(`${em.inspectUrl}/annotations`)).body).toEqual([]);
    // An annotation external_id is free again after a reset.
    const again = await c.post('/machine-data-annotations', { type: 'instant', occurred_at: T0, text: 'x', machine_variables: [], site: { id: 'ste_demo1' }, external_id: 'e1' });
    expect(again.status).toBe(201);
  });

  it('needs no credentials, is not counted, and answers 404/405 as JSON', async () => {
    const before = em.stats().requests;
    await call(`${em.inspectUrl}/stats`);
    expect(em.stats().requests).toEqual(before);
    expect((await call(`${em.inspectUrl}/nothing`)).status).toBe(404);
    const m = await call(`${em.inspectUrl}/reset`);
    expect(m.status).toBe(405);
    expect(m.body.code).toBe('method_not_allowed');
    expect((await call(`${em.inspectUrl}/`)).body.endpoints).toContain('POST /_emulator/reset');
  });

  it('refusal_wording terse: a refused batch item gets only {code, message}, naming neither the item nor the reason (§7)', async () => {
    const em = await withEmulator();
    try {
      const c = client(em, DEMO_API_KEY);
      const items = [{ timestamp: '2026-03-01T00:00:00.000Z', machine_variable_id: 'mvr_gen_1', value: 1 }, { timestamp: '2026-03-01T00:00:00.000Z', machine_variable_id: 'mvr_nope', value: 1 }];
      const detailed = await c.post('/machine-data/batch', { items });
      expect(detailed.body).toEqual({ code: 'bad_request', message: 'items[1].machine_variable_id: unknown machine variable "mvr_nope"' });
      expect((await call(`${em.inspectUrl}/faults`, { method: 'POST', json: { refusal_wording: 'terse' } })).status).toBe(200);
      const terse = await c.post('/machine-data/batch', { items });
      expect(terse.status).toBe(400);
      expect(terse.body).toEqual({ code: 'bad_request', message: 'The request payload is invalid.' });
      expect(em.valueCounts()).toEqual({});
      expect((await call(`${em.inspectUrl}/faults`, { method: 'POST', json: { refusal_wording: 'vague' } })).status).toBe(400);
    } finally {
      await em.close();
    }
  });
});
