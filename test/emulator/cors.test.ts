import { afterEach, describe, expect, it } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { call, DEMO_API_KEY, withEmulator } from './helpers.js';

/** --cors ORIGIN: browser clients (a preflight, then the real request) [A, emulator only]. */
let em: EmulatorHandle | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

const APP = 'http://localhost:5173';

describe('CORS', () => {
  it('answers a preflight from an allowed origin before auth, rate limit and faults, and marks the real answer', async () => {
    em = await withEmulator({ corsOrigins: [APP], rateLimitPerMinute: 1, random: () => 0 });
    em.setFaults({ error_rate: 1 });
    const pre = await call(`${em.baseUrl}/machine-data/batch`, {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, service-organisation-id' },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe(APP);
    expect(pre.headers['access-control-allow-methods']).toContain('POST');
    expect(pre.headers['access-control-allow-headers']).toBe('authorization, content-type, service-organisation-id');
    expect(pre.headers.vary).toBe('Origin');
    em.clearFaults();

    const r = await call(`${em.baseUrl}/machines`, { headers: { origin: APP, authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } });
    expect(r.status).toBe(200);
    expect(r.headers['access-control-allow-origin']).toBe(APP);
    expect(r.headers['access-control-expose-headers']).toContain('Service-Request-Id');
    // Errors carry it too, so the browser script can read the 429 and its Retry-After.
    const limited = await call(`${em.baseUrl}/machines`, { headers: { origin: APP, authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } });
    expect(limited.status).toBe(429);
    expect(limited.headers['access-control-allow-origin']).toBe(APP);
    expect(limited.headers['access-control-expose-headers']).toContain('Retry-After');
    // The inspection API as well (a browser dashboard of the emulator).
    expect((await call(`${em.inspectUrl}/stats`, { headers: { origin: APP } })).headers['access-control-allow-origin']).toBe(APP);
  });

  it('gives nothing to another origin, and nothing at all without --cors', async () => {
    em = await withEmulator({ corsOrigins: [APP] });
    const other = await call(`${em.baseUrl}/machines`, { headers: { origin: 'http://evil.example', authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } });
    expect(other.status).toBe(200);
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const pre = await call(`${em.baseUrl}/machines`, { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET' } });
    expect(pre.status).toBe(405); // not a preflight it answers: routed like any request (GET only)
    expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    await em.close();

    em = await withEmulator();
    const none = await call(`${em.baseUrl}/machines`, { method: 'OPTIONS', headers: { origin: APP, 'access-control-request-method': 'GET' } });
    expect(none.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('* allows any origin without Vary', async () => {
    em = await withEmulator({ corsOrigins: ['*'] });
    const r = await call(`${em.baseUrl}/machines`, { headers: { origin: 'http://anything.test', authorization: `Bearer ${DEMO_API_KEY}`, 'service-organisation-id': 'org_demo' } });
    expect(r.headers['access-control-allow-origin']).toBe('*');
    expect(r.headers.vary).toBeUndefined();
  });

  describe('the emulator\'s own API (/_emulator/) refuses writes from other web pages (issue 21 §5)', () => {
    const stored = async (e: EmulatorHandle) => {
      const token = (await call(e.tokenUrl, { method: 'POST', headers: { authorization: `Basic ${Buffer.from('demo-gateway:demo-secret').toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials&audience=com.service.tracking' })).body.access_token;
      const r = await call(`${e.baseUrl}/machine-data/batch`, { headers: { authorization: `Bearer ${token}`, 'service-organisation-id': 'org_demo' }, json: { items: [{ timestamp: '2026-01-01T08:00:00.000Z', machine_variable_id: 'mvr_press1_speed', value: 1 }] } });
      expect(r.status).toBe(200);
    };

    it('a cross-origin text/plain POST (no preflight needed) cannot reset it or set faults', async () => {
      em = await withEmulator();
      await stored(em);
      const evil = { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain;charset=UTF-8' };
      const reset = await call(`${em.inspectUrl}/reset`, { method: 'POST', headers: evil, body: '{"tokens":true,"faults":true}' });
      expect(reset.status).toBe(403);
      expect(reset.body).toMatchObject({ code: 'cross_origin' });
      expect(reset.body.message).toContain('http://evil.example');
      const faults = await call(`${em.inspectUrl}/faults`, { method: 'POST', headers: evil, body: '{"outage_seconds":600}' });
      expect(faults.status).toBe(403);
      // A form or a bodiless no-cors fetch, and DELETE, the same.
      expect((await call(`${em.inspectUrl}/reset`, { method: 'POST', headers: { origin: 'http://evil.example' } })).status).toBe(403);
      expect((await call(`${em.inspectUrl}/requests`, { method: 'DELETE', headers: { origin: 'null' } })).status).toBe(403);
      expect((await call(`${em.inspectUrl}/tokens/expire`, { method: 'POST', headers: { 'sec-fetch-site': 'same-site' } })).status).toBe(403);
      // Nothing changed.
      expect(em.valueCounts()).toEqual({ mvr_press1_speed: 1 });
      expect(em.faults()).toMatchObject({ outage_seconds: 0 });
    });

    it('curl and scripts keep working; a body must be JSON', async () => {
      em = await withEmulator();
      await stored(em);
      // curl -s -X POST $E/reset (no body, no headers): as documented.
      expect((await call(`${em.inspectUrl}/reset`, { method: 'POST' })).status).toBe(200);
      expect(em.valueCounts()).toEqual({});
      expect((await call(`${em.inspectUrl}/faults`, { method: 'POST', json: { latency_ms: 5 } })).status).toBe(200);
      // curl -d without -H sends application/x-www-form-urlencoded: refused with the header to use.
      const form = await call(`${em.inspectUrl}/faults`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: '{"latency_ms":0}' });
      expect(form.status).toBe(415);
      expect(form.body.message).toContain('Content-Type: application/json');
      expect(em.faults()).toMatchObject({ latency_ms: 5 });
      expect((await call(`${em.inspectUrl}/faults`, { method: 'DELETE' })).status).toBe(200);
    });

    it('its own page at an IP address or localhost may write, a rebound name may not; --cors origins may, * may not', async () => {
      em = await withEmulator({ corsOrigins: [APP] });
      const own = `http://127.0.0.1:${em.port}`;
      expect((await call(`${em.inspectUrl}/faults`, { method: 'POST', headers: { origin: own, 'sec-fetch-site': 'same-origin' }, json: { latency_ms: 1 } })).status).toBe(200);
      expect((await call(`${em.inspectUrl}/faults`, { method: 'POST', headers: { origin: `http://localhost:${em.port}`, host: `localhost:${em.port}` }, json: { latency_ms: 2 } })).status).toBe(200);
      // DNS rebinding: rebind.example points at 127.0.0.1, so the hostile page is "same origin".
      const rebound = await call(`${em.inspectUrl}/reset`, { method: 'POST', headers: { origin: `http://rebind.example:${em.port}`, host: `rebind.example:${em.port}`, 'sec-fetch-site': 'same-origin' } });
      expect(rebound.status).toBe(403);
      const app = await call(`${em.inspectUrl}/faults`, { method: 'POST', headers: { origin: APP, 'sec-fetch-site': 'cross-site' }, json: { latency_ms: 3 } });
      expect(app.status).toBe(200);
      expect(app.headers['access-control-allow-origin']).toBe(APP);
      expect(em.faults()).toMatchObject({ latency_ms: 3 });
      await em.close();

      em = await withEmulator({ corsOrigins: ['*'] });
      expect((await call(`${em.inspectUrl}/reset`, { method: 'POST', headers: { origin: 'http://anything.test' } })).status).toBe(403);
      expect((await call(`${em.inspectUrl}/stats`, { headers: { origin: 'http://anything.test' } })).status).toBe(200);
    });
  });
});
