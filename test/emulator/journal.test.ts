import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { basic, call, client, DEMO_API_KEY, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, fileForm, getToken, item, withEmulator } from './helpers.js';

/** The request journal, GET /_emulator/requests, and one debug log line per request. */
let em: EmulatorHandle | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

describe('request journal (GET /_emulator/requests)', () => {
  it('records method, path, status, request id, redacted headers and a body summary of every request', async () => {
    em = await withEmulator();
    const token = await getToken(em);
    const c = client(em, token);
    const ok = await c.batch([item('mvr_gen_1', '2026-01-01T00:00:00.000Z', 1), item('mvr_gen_2', '2026-01-01T00:00:01.000Z', 2)]);
    expect(ok.status).toBe(200);
    const bad = await c.batch([item('mvr_nope', '2026-01-01T00:00:00.000Z', 1)]);
    expect(bad.status).toBe(400);
    await c.post('/machine-data-annotations', { type: 'instant', occurred_at: '2026-01-01T00:00:00.000Z', text: 'stop', machine_variables: [], site: { id: 'ste_demo1' }, external_id: 'ann-1' });
    await c.upload('/machine-data/import-jobs', fileForm(JSON.stringify({ items: [item('mvr_gen_1', '2026-01-02T00:00:00.000Z', 3)] })));
    await call(`${em.baseUrl}/machines`, { headers: { authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } });
    await call(`${em.baseUrl}/machines`); // no credential: 401

    const r = await call(`${em.inspectUrl}/requests`);
    expect(r.status).toBe(200);
    const list = r.body.requests as any[];
    expect(list.map((e) => `${e.method} ${e.path} ${e.status}`)).toEqual([
      'POST /oauth2/token 200',
      'POST /tracking/v1/machine-data/batch 200',
      'POST /tracking/v1/machine-data/batch 400',
      'POST /tracking/v1/machine-data-annotations 201',
      'POST /tracking/v1/machine-data/import-jobs 202',
      'GET /tracking/v1/machines 200',
      'GET /tracking/v1/machines 401',
    ]);
    expect(r.body.recorded).toBe(7);
    // The request id is the one the client got in Service-Request-Id.
    expect(list[1].request_id).toBe(ok.headers['service-request-id']);
    expect(list[2].request_id).toBe(bad.headers['service-request-id']);
    expect(list[0]).toMatchObject({ client: DEMO_CLIENT_ID, body: { grant_type: 'client_credentials', audience: 'com.service.tracking' } });
    expect(list[0].headers.authorization).toBe('Basic [redacted]');
    expect(list[1]).toMatchObject({
      client: DEMO_CLIENT_ID,
      organisation_id: 'org_demo',
      error: null,
      fault: null,
      body: { items: 2, machine_variables: 2, first_timestamp: '2026-01-01T00:00:00.000Z', last_timestamp: '2026-01-01T00:00:01.000Z', content_type: 'application/json' },
    });
    expect(list[1].body.bytes).toBeGreaterThan(100);
    expect(list[1].headers.authorization).toBe('Bearer [redacted]');
    expect(list[1].headers['service-organisation-id']).toBe('org_demo');
    expect(list[2].error).toEqual({ code: 'bad_request', message: expect.stringContaining('items[0].machine_variable_id') });
    expect(list[3].body).toMatchObject({ type: 'instant', external_id: 'ann-1', machine_variables: 0 });
    expect(list[4].body).toMatchObject({ items_received: 1, job_id: expect.stringMatching(/^job_/) });
    expect(list[4].body.file_bytes).toBeGreaterThan(50);
    expect(list[5].client).toBe('api key');
    expect(list[6]).toMatchObject({ client: null, error: { code: 'unauthorized' } });
    for (const e of list) {
      expect(e.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(e.duration_ms).toBeGreaterThanOrEqual(0);
    }
    // No credential anywhere in the journal.
    const text = r.text;
    for (const secret of [DEMO_CLIENT_SECRET, token, DEMO_API_KEY, Buffer.from(`${DEMO_CLIENT_ID}:${DEMO_CLIENT_SECRET}`).toString('base64')]) expect(text).not.toContain(secret);
  });

  it('filters by path, status and limit, marks faults and dropped requests, and clears', async () => {
    em = await withEmulator({ journalSize: 5 });
    const c = client(em, DEMO_API_KEY);
    em.setFaults({ fail_next: [{ count: 1, status: 503, path: '/machine-data/batch' }, { count: 1, status: 'drop', path: '/machines' }] });
    expect((await c.batch([item('mvr_gen_1', '2026-01-01T00:00:00.000Z', 1)])).status).toBe(503);
    await expect(c.get('/machines')).rejects.toThrow();
    for (let i = 0; i < 4; i++) expect((await c.batch([item('mvr_gen_1', `2026-01-01T00:00:0${i}.000Z`, i)])).status).toBe(200);

    const all = (await call(`${em.inspectUrl}/requests`)).body;
    // Capacity 5: the oldest of 6 is gone, but counted.
    expect(all.capacity).toBe(5);
    expect(all.recorded).toBe(6);
    expect(all.requests).toHaveLength(5);
    expect(all.requests[0]).toMatchObject({ path: '/tracking/v1/machines', status: 'dropped', fault: 'fail_next' });

    const dropped = (await call(`${em.inspectUrl}/requests?status=dropped`)).body.requests;
    expect(dropped).toHaveLength(1);
    const last2 = (await call(`${em.inspectUrl}/requests?path=/machine-data/batch&limit=2`)).body.requests;
    expect(last2.map((e: any) => e.body.first_timestamp)).toEqual(['2026-01-01T00:00:02.000Z', '2026-01-01T00:00:03.000Z']);
    expect((await call(`${em.inspectUrl}/requests?path=/tracking/v1/machine-data/batch&status=200`)).body.requests).toHaveLength(4);

    const badLimit = await call(`${em.inspectUrl}/requests?limit=0`);
    expect(badLimit.status).toBe(400);
    expect(badLimit.body.message).toContain('limit: "0"');
    expect((await call(`${em.inspectUrl}/requests?status=abc`)).body.message).toContain('status: "abc"');

    expect((await call(`${em.inspectUrl}/requests`, { method: 'DELETE' })).status).toBe(200);
    expect((await call(`${em.inspectUrl}/requests`)).body).toMatchObject({ requests: [], recorded: 0 });
    // Inspection calls are not journalled.
    expect(em.requests()).toEqual([]);
  });

  it('the fault that answered is named: error_rate', async () => {
    em = await withEmulator({ random: () => 0 });
    em.setFaults({ error_rate: 1, status: 502 });
    const r = await client(em, DEMO_API_KEY).get('/machines');
    expect(r.status).toBe(502);
    expect(em.requests()[0]).toMatchObject({ status: 502, fault: 'error_rate', error: { code: 'bad_gateway', message: 'injected fault (error_rate)' } });
  });

  it('writes one debug log line per request, without credentials', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        cb();
      },
    });
    em = await withEmulator({ logger: createLogger({ level: 'debug', format: 'json', destination: sink }) });
    const token = await getToken(em);
    const r = await client(em, token).batch([item('mvr_gen_1', '2026-01-01T00:00:00.000Z', 1)]);
    const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request');
    expect(requests).toHaveLength(2);
    expect(requests[1]).toMatchObject({ level: 'debug', method: 'POST', path: '/tracking/v1/machine-data/batch', status: 200, request_id: r.headers['service-request-id'], client: DEMO_CLIENT_ID, body: { items: 1 } });
    const all = lines.join('\n');
    expect(all).not.toContain(token);
    expect(all).not.toContain(DEMO_CLIENT_SECRET);
    expect(all).not.toContain(basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET).slice(6));
  });
});
