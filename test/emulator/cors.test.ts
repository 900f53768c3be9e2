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
});
