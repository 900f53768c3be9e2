import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { DEMO_API_KEY, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID, basic, call, client, getToken, item, manualClock, sleep, withEmulator } from './helpers.js';

const FORM = 'application/x-www-form-urlencoded';
const GOOD_FORM = 'grant_type=client_credentials&audience=com.service.tracking';

describe('token endpoint (§5.2-5.3)', () => {
  let em: EmulatorHandle;
  beforeAll(async () => {
    em = await withEmulator({ tokenTtlSeconds: 120 });
  });
  afterAll(() => em.close());

  const token = (headers: Record<string, string>, body: string) => call(em.tokenUrl, { method: 'POST', headers, body });

  it('issues a bearer token for good client credentials', async () => {
    expect(em.tokenUrl).toBe(`${em.authUrl}/oauth2/token`);
    const r = await token({ authorization: basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), 'content-type': FORM }, GOOD_FORM);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ access_token: expect.any(String), expires_in: 120, token_type: 'bearer' });
    expect(r.headers['service-request-id']).toMatch(/^req_[0-9a-z]{26}$/);
    // The token works on the API.
    const api = await client(em, r.body.access_token).get('/machines');
    expect(api.status).toBe(200);
  });

  it('refuses a wrong secret and an unknown client with 401 {code, message}', async () => {
    for (const auth of [basic(DEMO_CLIENT_ID, 'wrong'), basic('nobody', DEMO_CLIENT_SECRET)]) {
      const r = await token({ authorization: auth, 'content-type': FORM }, GOOD_FORM);
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ code: 'unauthorized', message: 'invalid client credentials' });
    }
  });

  it('requires HTTP Basic', async () => {
    const none = await token({ 'content-type': FORM }, `${GOOD_FORM}&client_id=${DEMO_CLIENT_ID}&client_secret=${DEMO_CLIENT_SECRET}`);
    expect(none.status).toBe(401);
    expect(none.body.code).toBe('unauthorized');
    expect(none.body.message).toMatch(/Basic/);
    const bearer = await token({ authorization: 'Bearer abc', 'content-type': FORM }, GOOD_FORM);
    expect(bearer.status).toBe(401);
  });

  it('refuses a wrong or missing grant_type with a 400 naming it', async () => {
    const wrong = await token({ authorization: basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), 'content-type': FORM }, 'grant_type=password&audience=com.service.tracking');
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ code: 'bad_request', message: expect.stringMatching(/^grant_type: "password"/) });
    const missing = await token({ authorization: basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), 'content-type': FORM }, 'audience=com.service.tracking');
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/^grant_type: required/);
  });

  it('checks the audience', async () => {
    const wrong = await token({ authorization: basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), 'content-type': FORM }, 'grant_type=client_credentials&audience=com.other');
    expect(wrong.status).toBe(400);
    expect(wrong.body.message).toBe('audience: "com.other" is not com.service.tracking');
    const missing = await token({ authorization: basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), 'content-type': FORM }, 'grant_type=client_credentials');
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/^audience: required field is missing/);
  });

  it('requires a form body, not JSON', async () => {
    const r = await token({ authorization: basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), 'content-type': 'application/json' }, JSON.stringify({ grant_type: 'client_credentials', audience: 'com.service.tracking' }));
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/x-www-form-urlencoded/);
  });

  it('answers 405 for GET on the token endpoint', async () => {
    const r = await call(em.tokenUrl);
    expect(r.status).toBe(405);
    expect(r.body.code).toBe('method_not_allowed');
    expect(r.headers.allow).toBe('POST');
  });
});

describe('token expiry', () => {
  it('a token expires after tokenTtlSeconds (real time, 1 s)', async () => {
    const em = await withEmulator({ tokenTtlSeconds: 1 });
    try {
      const asked = Date.now();
      const t = await getToken(em);
      expect((await client(em, t).get('/machines')).status).toBe(200);
      // Refused once the second is over, and not before.
      let r = await client(em, t).get('/machines');
      for (const deadline = Date.now() + 10_000; r.status === 200 && Date.now() < deadline; r = await client(em, t).get('/machines')) await sleep(25);
      expect(Date.now() - asked).toBeGreaterThanOrEqual(1_000);
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ code: 'unauthorized', message: 'token expired' });
    } finally {
      await em.close();
    }
  });

  it('a token is valid until exactly ttl seconds have passed (manual clock)', async () => {
    const clock = manualClock();
    const em = await withEmulator({ tokenTtlSeconds: 60, clock });
    try {
      const t = await getToken(em);
      clock.advance(59_999);
      expect((await client(em, t).get('/machines')).status).toBe(200);
      clock.advance(1);
      expect((await client(em, t).get('/machines')).status).toBe(401);
    } finally {
      await em.close();
    }
  });
});

describe('bearer credentials and organisation header (§5.5, §5.6, §5.8, §7)', () => {
  let em: EmulatorHandle;
  let token: string;
  beforeAll(async () => {
    em = await withEmulator();
    token = await getToken(em);
  });
  afterAll(() => em.close());

  it('401 {code: "unauthorized"} without, or with an invalid, bearer credential', async () => {
    const none = await call(`${em.baseUrl}/machines`, { headers: { 'service-organisation-id': DEMO_ORGANISATION_ID } });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ code: 'unauthorized', message: expect.stringMatching(/missing Authorization/) });
    expect(none.headers['service-request-id']).toMatch(/^req_/);
    const bad = await client(em, 'not-a-token').batch([item('mvr_press1_speed', '2026-01-01T00:00:00.000Z', 1)]);
    expect(bad.status).toBe(401);
    expect(bad.body.code).toBe('unauthorized');
    const basicOnApi = await call(`${em.baseUrl}/machines`, { headers: { authorization: basic(DEMO_CLIENT_ID, DEMO_CLIENT_SECRET), 'service-organisation-id': DEMO_ORGANISATION_ID } });
    expect(basicOnApi.status).toBe(401);
    expect(em.values('mvr_press1_speed')).toEqual([]);
  });

  it('every /tracking/v1 endpoint checks the credential', async () => {
    const paths: Array<[string, string]> = [
      ['POST', '/machine-data/batch'],
      ['POST', '/machine-data/import-jobs'],
      ['GET', '/machine-data/import-jobs/job_x'],
      ['GET', '/v1/machine-data/import-jobs/job_x'],
      ['POST', '/machine-data-annotations'],
      ['GET', '/machines'],
      ['GET', '/machine-variables'],
    ];
    for (const [method, path] of paths) {
      const r = await call(em.baseUrl + path, { method, headers: { 'service-organisation-id': DEMO_ORGANISATION_ID }, body: method === 'POST' ? '{}' : undefined });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.body.code).toBe('unauthorized');
    }
  });

  it('missing Service-Organisation-Id is 400 bad_request on every endpoint', async () => {
    for (const path of ['/machines', '/machine-variables', '/machine-data/import-jobs/job_x']) {
      const r = await call(em.baseUrl + path, { headers: { authorization: `Bearer ${token}` } });
      expect(r.status, path).toBe(400);
      expect(r.body.code).toBe('bad_request');
      expect(r.body.message).toMatch(/Service-Organisation-Id/);
    }
    const r = await call(`${em.baseUrl}/machine-data/batch`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, json: { items: [item('mvr_press1_speed', '2026-01-01T00:00:00.000Z', 1)] } });
    expect(r.status).toBe(400);
    expect(em.values('mvr_press1_speed')).toEqual([]);
  });

  it('an organisation the credential is not authorised for is 403', async () => {
    for (const org of ['org_other', 'org_unknown']) {
      const r = await client(em, token, org).get('/machines');
      expect(r.status).toBe(403);
      expect(r.body.code).toBe('forbidden');
      expect(r.body.message).toContain(org);
    }
  });

  it('an API key works as a bearer credential for its organisation only', async () => {
    const ok = await client(em, DEMO_API_KEY).get('/machines');
    expect(ok.status).toBe(200);
    const other = await client(em, DEMO_API_KEY, 'org_other').get('/machines');
    expect(other.status).toBe(403);
  });
});

describe('API key scope (§5.8, [A] writes outside the key sites are 400 per item)', () => {
  let em: EmulatorHandle;
  beforeAll(async () => {
    em = await withEmulator({
      fixture: {
        organisations: [{ id: 'org_a', name: 'A' }],
        sites: [
          { id: 'ste_1', external_id: 'one', organisation: 'org_a' },
          { id: 'ste_2', external_id: 'two', organisation: 'org_a' },
        ],
        machines: [
          { id: 'mch_1', name: 'm1', site: 'ste_1' },
          { id: 'mch_2', name: 'm2', site: 'ste_2' },
        ],
        machine_variables: [
          { id: 'mvr_1', name: 'v1', machine: 'mch_1', unit: '' },
          { id: 'mvr_2', name: 'v2', machine: 'mch_2', unit: '' },
        ],
        api_keys: [{ key: 'key-site1', organisation: 'org_a', sites: ['ste_1'] }],
      },
    });
  });
  afterAll(() => em.close());

  it('writes to its sites and refuses variables at other sites with a 400 naming the item', async () => {
    const c = client(em, 'key-site1', 'org_a');
    expect((await c.batch([item('mvr_1', '2026-01-01T00:00:00.000Z', 1)])).status).toBe(200);
    const r = await c.batch([item('mvr_1', '2026-01-01T00:00:01.000Z', 1), item('mvr_2', '2026-01-01T00:00:00.000Z', 2)]);
    expect(r.status).toBe(400);
    expect(r.body.message).toBe(`items[1].machine_variable_id: machine variable "mvr_2" is at site "ste_2", outside the API key's sites`);
    expect(em.values('mvr_1')).toHaveLength(1);
  });

  it('annotates only at its sites and lists only its sites', async () => {
    const c = client(em, 'key-site1', 'org_a');
    const out = await c.post('/machine-data-annotations', { type: 'instant', occurred_at: '2026-01-01T00:00:00Z', text: 'x', machine_variables: [], site: { id: 'ste_2' } });
    expect(out.status).toBe(400);
    expect(out.body.message).toMatch(/^site: .*outside the API key's sites/);
    const inside = await c.post('/machine-data-annotations', { type: 'instant', occurred_at: '2026-01-01T00:00:00Z', text: 'x', machine_variables: [{ id: 'mvr_1' }], site: { external_id: 'one' } });
    expect(inside.status).toBe(201);
    const list = await c.get('/machine-variables');
    expect(list.body.data.map((v: { id: string }) => v.id)).toEqual(['mvr_1']);
    expect((await c.get('/machines?site_id=ste_2')).status).toBe(400);
  });
});

describe('routing', () => {
  let em: EmulatorHandle;
  beforeAll(async () => {
    em = await withEmulator();
  });
  afterAll(() => em.close());

  it('unknown route 404 JSON, wrong method 405 JSON with Allow', async () => {
    const token = await getToken(em);
    const nf = await call(`${em.baseUrl}/deliveries`, { headers: { authorization: `Bearer ${token}` } });
    expect(nf.status).toBe(404);
    expect(nf.body).toEqual({ code: 'not_found', message: expect.stringContaining('/tracking/v1/deliveries') });
    expect(nf.headers['service-request-id']).toMatch(/^req_/);
    const root = await call(`${em.authUrl}/`);
    expect(root.status).toBe(404);
    const m = await call(`${em.baseUrl}/machines`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    expect(m.status).toBe(405);
    expect(m.body.code).toBe('method_not_allowed');
    expect(m.headers.allow).toBe('GET');
    const b = await call(`${em.baseUrl}/machine-data/batch`, { headers: { authorization: `Bearer ${token}` } });
    expect(b.status).toBe(405);
    expect(b.headers.allow).toBe('POST');
  });

  it('every response has a distinct Service-Request-Id', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) ids.add(String((await call(`${em.baseUrl}/nothing`)).headers['service-request-id']));
    expect(ids.size).toBe(20);
  });
});
