import { existsSync, readdirSync } from 'node:fs';
import { FormData } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { holdsFor } from '../helpers/wait.js';
import { call, client, eventually, fileForm, getToken, item, sleep, withEmulator } from './helpers.js';

const V = 'mvr_press1_temperature';
const ts = (i: number) => new Date(Date.parse('2026-01-01T00:00:00.000Z') + i * 1000).toISOString();
const file = (items: unknown[]) => JSON.stringify({ items });
const JOB_VIEW_KEYS = ['job_id', 'status', 'items_received', 'created_at', 'items_accepted', 'items_rejected', 'errors', 'finished_at'].sort();

describe('import jobs (CONTRACT.md, §2.9, §4.7)', () => {
  let em: EmulatorHandle;
  let c: ReturnType<typeof client>;
  beforeAll(async () => {
    em = await withEmulator({ jobProcessingDelayMs: 5 });
    c = client(em, await getToken(em));
  });
  beforeEach(async () => {
    em.clearFaults();
    await em.reset();
  });
  afterAll(() => em.close());

  const upload = (content: string | Buffer, filename?: string, field?: string) => c.upload('/machine-data/import-jobs', fileForm(content, filename, field));

  it('202 with the job accepted, then processing, then finished; values stored like batch items', async () => {
    const items = Array.from({ length: 50 }, (_, i) => item(V, ts(i), i));
    items.push(item(V, '2026-01-01T01:00:00.000+01:00', 99)); // same instant as ts(0): replaces it
    const slow = await withEmulator({ jobProcessingDelayMs: 400 }); // accepted 400 ms, then processing >= 400 ms
    onTestFinished(() => slow.close());
    const sc = client(slow, await getToken(slow));
    const r = await sc.upload('/machine-data/import-jobs', fileForm(file(items)));
    expect(r.status).toBe(202);
    expect(Object.keys(r.body).sort()).toEqual(JOB_VIEW_KEYS);
    expect(r.body).toEqual({
      job_id: expect.stringMatching(/^job_[0-9a-z]{26}$/),
      status: 'accepted',
      items_received: 51,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      items_accepted: null,
      items_rejected: null,
      errors: null,
      finished_at: null,
    });
    const id = r.body.job_id;
    // Poll the status endpoint and record every view until the job ends.
    const seen: any[] = [];
    const t0 = performance.now();
    for (;;) {
      const view = (await sc.get(`/v1/machine-data/import-jobs/${id}`)).body;
      if (seen.length === 0 || seen[seen.length - 1].status !== view.status) seen.push({ ...view, at: performance.now() - t0, stored: slow.values(V).length });
      if (view.status === 'finished' || view.status === 'failed') break;
      if (performance.now() - t0 > 10_000) throw new Error(`job stuck: ${JSON.stringify(seen)}`);
      await sleep(20);
    }
    expect(seen.map((v) => v.status)).toEqual(['accepted', 'processing', 'finished']);
    const [accepted, processing, done] = seen;
    for (const v of [accepted, processing]) {
      expect(v).toMatchObject({ items_accepted: null, items_rejected: null, errors: null, finished_at: null, stored: 0 });
    }
    // accepted for the delay, then processing for at least as long (t0 is just after the 202).
    expect(processing.at).toBeGreaterThanOrEqual(350);
    expect(done.at).toBeGreaterThanOrEqual(750);
    expect(done).toMatchObject({ job_id: id, status: 'finished', items_received: 51, items_accepted: 51, items_rejected: 0, errors: [], created_at: r.body.created_at });
    expect(done.finished_at).toMatch(/Z$/);
    expect(slow.values(V)).toHaveLength(50);
    expect(slow.value(V, ts(0))).toEqual({ value: 99, writes: 2 });
    expect(slow.stats().import_jobs).toEqual({ accepted: 0, processing: 0, finished: 1, failed: 0 });
    expect(readdirSync(slow.tempDir)).toEqual([]); // the uploaded file is deleted after the job
  });

  it('answers the status on both paths (with and without the extra v1)', async () => {
    const r = await upload(file([item(V, ts(0), 1)]));
    const id = r.body.job_id;
    await em.waitForJob(id); // so both answers show the same state
    const a = await c.get(`/v1/machine-data/import-jobs/${id}`);
    const b = await c.get(`/machine-data/import-jobs/${id}`);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(a.body.job_id).toBe(id);
    expect(b.body).toEqual(a.body);
    const stats = em.stats().requests;
    expect(stats['GET /v1/machine-data/import-jobs/{job_id}']).toEqual({ '200': 1 });
    expect(stats['GET /machine-data/import-jobs/{job_id}']).toEqual({ '200': 1 });
  });

  it('unknown job and a job of another organisation are 404 {code: "not_found"}', async () => {
    const nf = await c.get('/v1/machine-data/import-jobs/job_nope');
    expect(nf.status).toBe(404);
    expect(nf.body).toEqual({ code: 'not_found', message: 'import job "job_nope" not found' });
    // A second organisation with its own client.
    const em2 = await withEmulator({
      jobProcessingDelayMs: 10,
      fixture: {
        clients: [
          { client_id: 'a', client_secret: 'a', organisations: ['org_a'] },
          { client_id: 'b', client_secret: 'b', organisations: ['org_b'] },
        ],
        organisations: [
          { id: 'org_a', name: 'A' },
          { id: 'org_b', name: 'B' },
        ],
        sites: [{ id: 'ste_a', external_id: null, organisation: 'org_a' }],
        machines: [{ id: 'mch_a', name: 'a', site: 'ste_a' }],
        machine_variables: [{ id: 'mvr_a', name: 'a', machine: 'mch_a', unit: '' }],
      },
    });
    try {
      const ca = client(em2, await getToken(em2, 'a', 'a'), 'org_a');
      const cb = client(em2, await getToken(em2, 'b', 'b'), 'org_b');
      const job = await ca.upload('/machine-data/import-jobs', fileForm(file([item('mvr_a', ts(0), 1)])));
      expect(job.status).toBe(202);
      expect((await ca.get(`/v1/machine-data/import-jobs/${job.body.job_id}`)).status).toBe(200);
      const other = await cb.get(`/v1/machine-data/import-jobs/${job.body.job_id}`);
      expect(other.status).toBe(404);
      expect(other.body.code).toBe('not_found');
    } finally {
      await em2.close();
    }
  });

  it('rejects invalid items one by one with errors [{index, code, message}]; the job still finishes', async () => {
    const items: unknown[] = [
      item(V, ts(0), 0),
      item('mvr_x', ts(1), 1),
      item(V, '2026-01-01T00:00:02Z', 2),
      item(V, ts(3), 3),
      item(V, ts(4), 'four'),
      'not an object',
      item('mvr_other1_speed', ts(6), 6),
      item(V, ts(7), 7),
    ];
    const r = await upload(file(items));
    expect(r.body.items_received).toBe(8);
    const done = await em.waitForJob(r.body.job_id);
    expect(done.status).toBe('finished');
    expect(done.items_accepted).toBe(3);
    expect(done.items_rejected).toBe(5);
    expect(done.errors).toEqual([
      { index: 1, code: 'unknown_machine_variable', message: 'items[1].machine_variable_id: unknown machine variable "mvr_x"' },
      { index: 2, code: 'invalid_timestamp', message: expect.stringMatching(/^items\[2\]\.timestamp: /) },
      { index: 4, code: 'invalid_value', message: 'items[4].value: "four" is not a number' },
      { index: 5, code: 'invalid_item', message: expect.stringMatching(/^items\[5\]: must be an object/) },
      { index: 6, code: 'unknown_machine_variable', message: expect.stringMatching(/^items\[6\]\.machine_variable_id: /) },
    ]);
    expect(em.values(V).map((v) => v.value)).toEqual([0, 3, 7]);
  });

  it('lists at most maxJobErrors error objects but counts every rejected item', async () => {
    const em2 = await withEmulator({ jobProcessingDelayMs: 0, maxJobErrors: 3 });
    try {
      const c2 = client(em2, await getToken(em2));
      const r = await c2.upload('/machine-data/import-jobs', fileForm(file(Array.from({ length: 10 }, (_, i) => item('mvr_x', ts(i), i)))));
      const done = await em2.waitForJob(r.body.job_id);
      expect(done).toMatchObject({ status: 'finished', items_accepted: 0, items_rejected: 10 });
      expect(done.errors!.map((e) => e.index)).toEqual([0, 1, 2]);
    } finally {
      await em2.close();
    }
  });

  it.each([
    ['not JSON', 'hello world'],
    ['a JSON array', JSON.stringify([item(V, ts(0), 1)])],
    ['an object without items', JSON.stringify({ data: [] })],
    ['items not an array', JSON.stringify({ items: { a: 1 } })],
    ['truncated JSON', file([item(V, ts(0), 1), item(V, ts(1), 2)]).slice(0, -10)],
    ['a broken element', `{"items":[${JSON.stringify(item(V, ts(0), 1))},{"timestamp":}]}`],
    ['trailing garbage', `${file([item(V, ts(0), 1)])} x`],
    ['an empty file', ''],
  ])('an unreadable file (%s) ends failed and stores nothing', async (_name, content) => {
    const r = await upload(content);
    expect(r.status).toBe(202);
    const done = await em.waitForJob(r.body.job_id);
    expect(done.status).toBe('failed');
    expect(done.finished_at).not.toBeNull();
    expect(done.items_accepted).toBe(0);
    expect(done.errors).toEqual([{ index: null, code: 'unreadable_file', message: expect.stringMatching(/^unreadable file: /) }]);
    expect(em.values(V)).toEqual([]);
  });

  it('accepts other top-level keys and an empty items array', async () => {
    const r = await upload(JSON.stringify({ meta: { source: 'gw', n: [1, 2] }, items: [item(V, ts(0), 1)], more: 'x' }));
    expect((await em.waitForJob(r.body.job_id)).status).toBe('finished');
    const empty = await upload('{"items": []}');
    expect(empty.body.items_received).toBe(0);
    expect(await em.waitForJob(empty.body.job_id)).toMatchObject({ status: 'finished', items_accepted: 0, items_rejected: 0 });
  });

  it('job_failure_rate makes a good file end failed, storing nothing', async () => {
    em.setFaults({ job_failure_rate: 1 });
    const r = await upload(file([item(V, ts(0), 1)]));
    const done = await em.waitForJob(r.body.job_id);
    expect(done.status).toBe('failed');
    expect(done.errors![0].code).toBe('job_failed');
    expect(em.values(V)).toEqual([]);
    em.setFaults({ job_failure_rate: 0 });
    const ok = await upload(file([item(V, ts(0), 1)]));
    expect((await em.waitForJob(ok.body.job_id)).status).toBe('finished');
    expect(em.stats().import_jobs).toMatchObject({ failed: 1, finished: 1 });
  });

  it('accepts machine_data_point_config_id in the file', async () => {
    const r = await upload(file([{ timestamp: ts(0), machine_data_point_config_id: V, value: 5 }]));
    expect(await em.waitForJob(r.body.job_id)).toMatchObject({ status: 'finished', items_accepted: 1 });
    expect(em.value(V, ts(0))).toEqual({ value: 5, writes: 1 });
  });

  it('refuses uploads that are not one multipart part "file"', async () => {
    const json = await c.post('/machine-data/import-jobs', { items: [] });
    expect(json.status).toBe(400);
    expect(json.body.message).toMatch(/multipart\/form-data/);
    const wrongName = await upload(file([]), 'x.json', 'data');
    expect(wrongName.status).toBe(400);
    expect(wrongName.body.message).toMatch(/unknown file part "data"/);
    const noFile = new FormData();
    noFile.append('comment', 'hello');
    const missing = await c.upload('/machine-data/import-jobs', noFile);
    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe('file: required part is missing');
    const asField = new FormData();
    asField.append('file', file([]));
    const field = await c.upload('/machine-data/import-jobs', asField);
    expect(field.status).toBe(400);
    expect(field.body.message).toMatch(/^file: must be a file part/);
    const two = fileForm(file([]));
    two.append('file', new Blob(['{}']), 'b.json');
    const twice = await c.upload('/machine-data/import-jobs', two);
    expect(twice.status).toBe(400);
    expect(em.stats().import_jobs).toEqual({ accepted: 0, processing: 0, finished: 0, failed: 0 });
  });

  it('an API key can upload import jobs', async () => {
    const k = client(em, 'demo-api-key');
    const r = await k.upload('/machine-data/import-jobs', fileForm(file([item(V, ts(0), 1)])));
    expect(r.status).toBe(202);
    expect((await em.waitForJob(r.body.job_id)).status).toBe('finished');
  });

  it('reset cancels a running job (nothing stored, file deleted); the inspection API lists jobs', async () => {
    const slow = await withEmulator({ jobProcessingDelayMs: 300 });
    onTestFinished(() => slow.close());
    const sc = client(slow, await getToken(slow));
    const r = await sc.upload('/machine-data/import-jobs', fileForm(file([item(V, ts(0), 1)])));
    const listed = await call(`${slow.inspectUrl}/import-jobs`);
    expect(listed.body).toEqual([expect.objectContaining({ organisation_id: 'org_demo', job_id: r.body.job_id, status: expect.stringMatching(/^(accepted|processing)$/), items_received: 1 })]);
    expect(readdirSync(slow.tempDir)).toEqual([`${r.body.job_id}.json`]);
    await eventually(() => expect(slow.importJob(r.body.job_id)!.status).toBe('processing'));
    expect((await call(`${slow.inspectUrl}/reset`, { method: 'POST' })).body).toEqual({ reset: true });
    expect(slow.importJobs()).toEqual([]);
    expect(readdirSync(slow.tempDir)).toEqual([]);
    // Past the time the job would have finished, nothing is stored (an absence, watched for a while).
    await holdsFor(() => slow.values(V).length === 0 && slow.stats().values_stored === 0, { forMs: 700, intervalMs: 20, what: 'nothing stored by the cancelled job' });
  });

  it('a client that goes away mid-upload leaves no job and no temp file', async () => {
    const { connect } = await import('node:net');
    const url = new URL(em.baseUrl);
    const token = await getToken(em);
    const boundary = 'xyzzy';
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.json"\r\nContent-Type: application/json\r\n\r\n{"items":[`;
    const socket = connect(Number(url.port), url.hostname);
    await new Promise((r) => socket.once('connect', r));
    socket.write(
      `POST /tracking/v1/machine-data/import-jobs HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${token}\r\nService-Organisation-Id: org_demo\r\n` +
        `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: 10000000\r\n\r\n${head}${JSON.stringify(item(V, ts(0), 1))},`,
    );
    await eventually(() => expect(readdirSync(em.tempDir)).toHaveLength(1)); // the upload is being written
    socket.destroy();
    await eventually(() => expect(readdirSync(em.tempDir)).toEqual([]));
    expect(em.importJobs()).toEqual([]);
  });

  it('close removes the temp folder', async () => {
    const e = await withEmulator();
    expect(existsSync(e.tempDir)).toBe(true);
    await e.close();
    expect(existsSync(e.tempDir)).toBe(false);
  });
});

describe('import-job upload limit', () => {
  it('413 for a file over 128,000,000 bytes; nothing is kept', async () => {
    const em = await withEmulator({ jobProcessingDelayMs: 10 });
    try {
      const big = Buffer.alloc(128_000_001, 0x20);
      const r = await client(em, await getToken(em)).upload('/machine-data/import-jobs', fileForm(big));
      expect(r.status).toBe(413);
      expect(r.body.code).toBe('payload_too_large');
      expect(em.importJobs()).toEqual([]);
    } finally {
      await em.close();
    }
  }, 30_000);
});
