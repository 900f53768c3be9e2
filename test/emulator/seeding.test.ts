import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DEMO_FIXTURE, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, client, DEMO_API_KEY, DEMO_CLIENT_SECRET, getToken, item, withEmulator } from './helpers.js';

/** Fixture seeds (values, annotations, import jobs), GET /_emulator/fixture, reset with tokens/faults. */
const dir = mkdtempSync(join(tmpdir(), 'emulator-seed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let em: EmulatorHandle | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

const seeded = {
  ...DEMO_FIXTURE,
  values: [
    { machine_variable_id: 'mvr_gen_1', timestamp: '2026-01-01T00:00:00.000Z', value: 1.5 },
    { machine_variable_id: 'mvr_gen_1', timestamp: '2026-01-01T01:00:00.000+01:00', value: 2.5 }, // the same instant: replaces
    { machine_variable_id: 'mvr_gen_2', timestamp: '2026-01-01T00:00:05.000Z', value: 7 },
  ],
  annotations: [
    { organisation: 'org_demo', type: 'range', started_at: '2026-01-01T06:00:00Z', ended_at: '2026-01-01T06:20:00Z', text: 'Press 1 not running', machine_variables: [], site: { id: 'ste_demo1' }, external_id: 'gw-downtime-1' },
  ],
  import_jobs: [
    { organisation: 'org_demo', job_id: 'job_seed_done', status: 'finished', items_received: 10, items_rejected: 2, errors: [{ index: 3, code: 'unknown_machine_variable', message: 'items[3]...' }], created_at: '2026-01-01T00:00:00Z' },
    { organisation: 'org_demo', job_id: 'job_seed_stuck', status: 'processing', items_received: 5 },
    { organisation: 'org_demo', job_id: 'job_seed_failed', status: 'failed', items_received: 5 },
  ],
};

describe('fixture seeds', () => {
  it('stored values, annotations and jobs are there from the start, over the real API', async () => {
    const file = join(dir, 'seeded.json');
    writeFileSync(file, JSON.stringify(seeded));
    em = await withEmulator({ fixture: file });
    expect(em.values('mvr_gen_1')).toEqual([{ timestamp: '2026-01-01T00:00:00.000Z', value: 2.5, writes: 2 }]);
    expect(em.values('mvr_gen_2')).toHaveLength(1);
    const c = client(em, await getToken(em));

    // A retry of the seeded annotation is a 409, as for an annotation delivered before a crash.
    const retry = await c.post('/machine-data-annotations', { type: 'range', started_at: '2026-01-01T06:00:00Z', ended_at: '2026-01-01T06:20:00Z', text: 'Press 1 not running', machine_variables: [], site: { id: 'ste_demo1' }, external_id: 'gw-downtime-1' });
    expect(retry.status).toBe(409);
    expect(retry.body).toMatchObject({ code: 'conflict' });

    const done = await c.get('/v1/machine-data/import-jobs/job_seed_done');
    expect(done.status).toBe(200);
    expect(done.body).toEqual({
      job_id: 'job_seed_done',
      status: 'finished',
      items_received: 10,
      items_accepted: 8,
      items_rejected: 2,
      errors: [{ index: 3, code: 'unknown_machine_variable', message: 'items[3]...' }],
      created_at: '2026-01-01T00:00:00.000Z',
      finished_at: '2026-01-01T00:00:00.000Z',
    });
    const stuck = await c.get('/machine-data/import-jobs/job_seed_stuck');
    expect(stuck.body).toMatchObject({ status: 'processing', items_accepted: null, items_rejected: null, errors: null, finished_at: null });
    const failed = await c.get('/machine-data/import-jobs/job_seed_failed');
    expect(failed.body).toMatchObject({ status: 'failed', items_accepted: 0, items_rejected: 0, errors: [{ index: null, code: 'job_failed' }] });
    // Another organisation does not see them.
    const other = await call(`${em.baseUrl}/machine-data/import-jobs/job_seed_done`, { headers: { authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_other' } });
    expect(other.status).toBe(403);

    // A batch overwriting a seeded value counts as an overwrite.
    expect((await c.batch([item('mvr_gen_2', '2026-01-01T00:00:05.000Z', 8)])).status).toBe(200);
    expect(em.value('mvr_gen_2', '2026-01-01T00:00:05.000Z')).toEqual({ value: 8, writes: 2 });

    // Reset: back to the seeds, not to empty.
    expect((await call(`${em.inspectUrl}/reset`, { method: 'POST' })).status).toBe(200);
    expect(em.value('mvr_gen_2', '2026-01-01T00:00:05.000Z')).toEqual({ value: 7, writes: 1 });
    expect(em.annotations()).toHaveLength(1);
    expect(em.importJobs().map((j) => j.job_id).sort()).toEqual(['job_seed_done', 'job_seed_failed', 'job_seed_stuck']);
  });

  it('refuses seeds the service would have refused, naming each entry', async () => {
    const bad = {
      ...DEMO_FIXTURE,
      values: [{ machine_variable_id: 'mvr_gen_1', timestamp: '2026-01-01T00:00:00', value: 1 }, { machine_variable_id: 'mvr_missing', timestamp: '2026-01-01T00:00:00Z', value: 1 }],
      annotations: [{ organisation: 'org_demo', type: 'instant', occurred_at: '2026-01-01T00:00:00Z', text: '  ', machine_variables: [], site: { id: 'ste_demo1' } }, { organisation: 'org_nope', type: 'instant' }],
      import_jobs: [{ organisation: 'org_demo', status: 'finished', items_received: 1, items_accepted: 1, items_rejected: 1 }],
    };
    const err = await withEmulator({ fixture: bad }).then(
      async (e) => {
        await e.close();
        return undefined;
      },
      (e: Error & { problems?: string[] }) => e,
    );
    expect(err).toBeDefined();
    const text = String((err as { problems?: string[] }).problems?.join('\n') ?? err!.message);
    expect(text).toContain('values[0].timestamp');
    expect(text).toContain('values[1].machine_variable_id: unknown machine variable "mvr_missing"');
    expect(text).toContain('annotations[0]: text: must not be blank');
    expect(text).toContain('annotations[1].organisation: unknown organisation "org_nope"');
    expect(text).toContain('import_jobs[0]: items_accepted 1 + items_rejected 1 is more than items_received 1');
  });

  it('GET /_emulator/fixture shows the world and the seeds, with secrets redacted', async () => {
    em = await withEmulator({ fixture: seeded });
    const r = await call(`${em.inspectUrl}/fixture`);
    expect(r.status).toBe(200);
    expect(r.body.organisations.map((o: { id: string }) => o.id)).toEqual(['org_demo', 'org_other']);
    expect(r.body.machine_variables.length).toBe(DEMO_FIXTURE.machine_variables.length);
    expect(r.body.values).toHaveLength(3);
    expect(r.body.annotations[0].external_id).toBe('gw-downtime-1');
    expect(r.body.import_jobs.map((j: { job_id: string }) => j.job_id)).toEqual(['job_seed_done', 'job_seed_stuck', 'job_seed_failed']);
    expect(r.body.clients[0]).toEqual({ client_id: 'demo-gateway', client_secret: '[redacted]', organisations: ['org_demo'] });
    expect(r.text).not.toContain(DEMO_CLIENT_SECRET);
    expect(r.text).not.toContain(DEMO_API_KEY);
    expect((await call(`${em.inspectUrl}/fixture`, { method: 'POST', json: {} })).status).toBe(405);
  });
});

describe('tokens: expire now, and reset with tokens and faults', () => {
  it('POST /_emulator/tokens/expire makes every issued token answer 401 "token expired"; a new token works', async () => {
    em = await withEmulator();
    const t1 = await getToken(em);
    const t2 = await getToken(em);
    expect((await client(em, t1).get('/machines')).status).toBe(200);
    const r = await call(`${em.inspectUrl}/tokens/expire`, { method: 'POST' });
    expect(r.body).toEqual({ expired: 2 });
    for (const t of [t1, t2]) {
      const res = await client(em, t).get('/machines');
      expect(res.status).toBe(401);
      expect(res.body.message).toBe('token expired');
    }
    // API keys are not tokens.
    expect((await client(em, DEMO_API_KEY).get('/machines')).status).toBe(200);
    expect((await client(em, await getToken(em)).get('/machines')).status).toBe(200);
    expect((await call(`${em.inspectUrl}/tokens/expire`)).status).toBe(405);
  });

  it('reset keeps tokens and faults unless asked; {"tokens": true, "faults": true} clears both', async () => {
    em = await withEmulator({ random: () => 0 });
    const token = await getToken(em);
    em.setFaults({ error_rate: 1, paths: ['/machines'] });
    await call(`${em.inspectUrl}/reset`, { method: 'POST' });
    expect((await client(em, token).get('/machine-variables')).status).toBe(200);
    expect((await client(em, token).get('/machines')).status).toBe(500);

    const r = await call(`${em.inspectUrl}/reset`, { method: 'POST', json: { tokens: true, faults: true } });
    expect(r.status).toBe(200);
    expect(em.faults()).toMatchObject({ error_rate: 0, paths: null, fail_next: [] });
    const after = await client(em, token).get('/machines');
    expect(after.status).toBe(401);
    expect(after.body.message).toBe('invalid or expired token');

    const bad = await call(`${em.inspectUrl}/reset`, { method: 'POST', json: { tokens: 'yes' } });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('tokens');
    expect((await call(`${em.inspectUrl}/reset`, { method: 'POST', json: { token: true } })).body.message).toContain('token');
  });
});
