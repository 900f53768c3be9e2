import { request as httpRequest } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/core/errors.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { hostName } from '../../src/http/guard.js';
import { isLoopbackHost } from '../../src/core/loopback.js';
import { startHarness, type Harness } from '../annotations/helpers.js';
import { testConfigInput } from '../helpers/gateway.js';

/**
 * The local HTTP server's guard (src/http/guard.ts) over real HTTP against a running gateway, with
 * raw requests so that Host, Origin and Content-Type are exactly what a browser or an attacker
 * would send. The browser side of CSRF is in csrf.chromium.test.ts.
 */

interface Raw {
  status: number;
  body: any;
}

/** One raw HTTP/1.1 request; `headers.host` overrides the Host header. */
function raw(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Raw> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: Number(u.port), method, path, headers: { ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}), ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // HTML
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const TOKEN = 'guard-test-token-0123456789';
let emu: EmulatorHandle;
const open: Harness[] = [];
beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
});
afterAll(async () => {
  await emu?.close();
});
afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
});

async function gateway(http: Record<string, unknown> = {}): Promise<Harness> {
  const h = await startHarness({ emu, sections: { http: { enabled: true, port: 0, ...http } } });
  open.push(h);
  return h;
}

const openDowntime = (h: Harness) => h.gw.handle.annotations!.service.openDowntime('press1');

describe('CSRF: writes on loopback without a token (the default)', () => {
  it('refuses bodiless and non-JSON writes, and writes from another origin, before any handler runs', async () => {
    const h = await gateway();
    const start = '/api/machines/press1/downtime/start';
    // What an <img>/<form>/no-cors fetch from another page would send.
    const formPost = await raw(h.url, 'POST', start, { origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' }, 'reason=x');
    expect(formPost.status).toBe(403);
    expect(formPost.body.error.code).toBe('cross_origin');
    const textPost = await raw(h.url, 'POST', start, { origin: 'http://evil.example', 'content-type': 'text/plain' }, '{}');
    expect(textPost.status).toBe(403);
    // JSON from another origin (would need a preflight the server never grants) is refused as well.
    const jsonOther = await raw(h.url, 'POST', start, { origin: 'http://evil.example', 'content-type': 'application/json' }, '{}');
    expect(jsonOther.status).toBe(403);
    const nullOrigin = await raw(h.url, 'POST', start, { origin: 'null', 'content-type': 'application/json' }, '{}');
    expect(nullOrigin.status).toBe(403);
    const crossSite = await raw(h.url, 'POST', start, { 'sec-fetch-site': 'cross-site', 'content-type': 'application/json' }, '{}');
    expect(crossSite.status).toBe(403);
    // Same-origin browser request without JSON or the custom header: still refused.
    const sameOriginText = await raw(h.url, 'POST', start, { origin: h.url, 'sec-fetch-site': 'same-origin', 'content-type': 'text/plain' }, '');
    expect(sameOriginText.status).toBe(403);
    // Not a browser, empty body, no content type: told what to send.
    const bare = await raw(h.url, 'POST', start, {}, '');
    expect(bare.status).toBe(415);
    expect(bare.body.error.message).toMatch(/Content-Type: application\/json.*X-Requested-By/);
    for (const action of ['stop', 'cancel']) {
      expect((await raw(h.url, 'POST', `/api/machines/press1/downtime/${action}`, { origin: 'http://evil.example', 'content-type': 'text/plain' }, '')).status).toBe(403);
    }
    expect(openDowntime(h)).toBeFalsy();

    // The gateway's own page (same origin, JSON) and scripts (X-Requested-By, no body) may.
    const own = await raw(h.url, 'POST', start, { origin: h.url, 'sec-fetch-site': 'same-origin', 'content-type': 'application/json' }, '{}');
    expect(own.status).toBe(201);
    expect(openDowntime(h)).toBeTruthy();
    const cancel = await raw(h.url, 'POST', '/api/machines/press1/downtime/cancel', { 'x-requested-by': 'plc-script' }, '');
    expect(cancel.status).toBe(200);
    expect(openDowntime(h)).toBeFalsy();
  });
});

describe('DNS rebinding: the Host header', () => {
  it('answers only to literal addresses, localhost, this machine, http.host and http.allowed_hosts', async () => {
    const h = await gateway({ allowed_hosts: ['gateway-line3.plant.local'] });
    const port = new URL(h.url).port;
    for (const host of [`evil.example:${port}`, `127.evil.example:${port}`, 'attacker.test', `localhost.evil.example:${port}`]) {
      for (const path of ['/status', '/api/panel', '/metrics', '/']) {
        const r = await raw(h.url, 'GET', path, { host });
        expect(r.status, `${host} ${path}`).toBe(403);
        expect(r.body.error.code).toBe('host_not_allowed');
      }
      const w = await raw(h.url, 'POST', '/api/machines/press1/downtime/start', { host, 'content-type': 'application/json' }, '{}');
      expect(w.status).toBe(403);
    }
    expect(openDowntime(h)).toBeFalsy();
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST.:${port}`, `[::1]:${port}`, `10.1.2.3:${port}`, `gateway-line3.plant.local:${port}`]) {
      expect((await raw(h.url, 'GET', '/status', { host })).status, host).toBe(200);
    }
  });

  it('parses Host values', () => {
    expect(hostName('Example.COM:8080')).toBe('example.com');
    expect(hostName('[::1]:80')).toBe('::1');
    expect(hostName('gw.local.')).toBe('gw.local');
  });
});

describe('the token for reads', () => {
  it('is required for reads by default when api_token is set; health checks and the page shell stay open', async () => {
    const h = await gateway({ api_token: TOKEN });
    for (const path of ['/status', '/metrics', '/api/annotations', '/api/set-aside', '/api/panel', '/api/machines']) {
      const r = await raw(h.url, 'GET', path);
      expect(r.status, path).toBe(401);
      expect(r.body.error.message).toContain('http.require_token_for_reads');
      expect((await raw(h.url, 'GET', path, { authorization: 'Bearer wrong-token-0123456789ab' })).status, path).toBe(401);
      expect((await raw(h.url, 'GET', path, { authorization: `Bearer ${TOKEN}` })).status, path).toBe(200);
    }
    expect((await raw(h.url, 'GET', '/healthz')).status).toBe(200);
    expect((await raw(h.url, 'GET', '/readyz')).status).toBe(200);
    const page = await raw(h.url, 'GET', '/');
    expect(page.status).toBe(200);
    expect(String(page.body)).toContain('<!doctype html>');
    // Writes on loopback need it too once it is set.
    expect((await raw(h.url, 'POST', '/api/machines/press1/downtime/start', { 'content-type': 'application/json' }, '{}')).status).toBe(401);
  });

  it('can be turned off for reads (writes still need it)', async () => {
    const h = await gateway({ api_token: TOKEN, require_token_for_reads: false });
    expect((await raw(h.url, 'GET', '/status')).status).toBe(200);
    expect((await raw(h.url, 'GET', '/metrics')).status).toBe(200);
    expect((await raw(h.url, 'POST', '/api/machines/press1/downtime/start', { 'content-type': 'application/json' }, '{}')).status).toBe(401);
  });
});

describe('confidential reads (issue 21 §3: the configuration and variable values)', () => {
  const CONFIDENTIAL = ['/console/api/config', '/console/api/variables', '/console/api/variables/mvr_x'];
  it('beyond localhost without a token: refused outright, while other reads stay open', async () => {
    const h = await gateway({ host: '0.0.0.0' });
    for (const path of CONFIDENTIAL) {
      const r = await raw(h.url, 'GET', path);
      expect({ path, status: r.status, code: r.body.error?.code }).toEqual({ path, status: 403, code: 'reads_disabled' });
    }
    expect((await raw(h.url, 'GET', '/status')).status).toBe(200);
  });

  it('follow the read-token rule otherwise', async () => {
    const loopback = await gateway();
    expect((await raw(loopback.url, 'GET', '/console/api/variables')).status).toBe(200);
    const readsOff = await gateway({ host: '0.0.0.0', api_token: TOKEN, require_token_for_reads: false });
    expect((await raw(readsOff.url, 'GET', '/console/api/variables')).status).toBe(200);
    const readsOn = await gateway({ host: '0.0.0.0', api_token: TOKEN });
    expect((await raw(readsOn.url, 'GET', '/console/api/variables')).status).toBe(401);
    expect((await raw(readsOn.url, 'GET', '/console/api/variables', { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });
});

describe('paths', () => {
  it('answers 400, not 500, to malformed percent-encoding', async () => {
    const h = await gateway();
    for (const path of ['/api/annotations/%E0%A4%A', '/api/annotations/%', '/api/machines/%ZZ/downtime/start']) {
      const r = await raw(h.url, path.endsWith('start') ? 'POST' : 'GET', path, { 'content-type': 'application/json' }, path.endsWith('start') ? '{}' : undefined);
      expect(r.status, path).toBe(400);
      expect(r.body.error.code).toBe('bad_request');
    }
    expect((await raw(h.url, 'GET', '/healthz')).status).toBe(200);
  });
});

describe('configuration', () => {
  const dir = mkdtempSync(join(tmpdir(), 'guard-config-'));
  const input = (http: Record<string, unknown>) => testConfigInput({ baseUrl: 'http://127.0.0.1:1/tracking/v1', authUrl: 'http://127.0.0.1:1' }, dir, { http });

  it('refuses an api_token shorter than 16 characters without echoing it', () => {
    let err: unknown;
    try {
      validateConfig(input({ api_token: 'x' }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = (err as Error).message;
    expect(text).toMatch(/http\.api_token: is 1 character long; use at least 16/);
    const short = 'Sh0rtT0ken-15ch';
    expect(() => validateConfig(input({ api_token: short }))).toThrow(/http\.api_token: is 15 characters long/);
    try {
      validateConfig(input({ api_token: short }));
    } catch (e) {
      expect((e as Error).message).not.toContain(short);
    }
    expect(validateConfig(input({ api_token: 'sixteen-chars-ok' })).config.http.api_token?.reveal()).toBe('sixteen-chars-ok');
  });

  it('refuses require_token_for_reads without a token', () => {
    expect(() => validateConfig(input({ require_token_for_reads: true }))).toThrow(/http\.require_token_for_reads: is true but http\.api_token is not set/);
  });

  it('does not take a name starting with 127. for loopback', () => {
    expect(isLoopbackHost('127.0.0.1')).toBe(true);
    expect(isLoopbackHost('127.8.9.10')).toBe(true);
    expect(isLoopbackHost('::1')).toBe(true);
    expect(isLoopbackHost('[::1]')).toBe(true);
    expect(isLoopbackHost('localhost')).toBe(true);
    expect(isLoopbackHost('::ffff:127.0.0.1')).toBe(true);
    expect(isLoopbackHost('127.evil.example')).toBe(false);
    expect(isLoopbackHost('127.0.0.1.nip.io')).toBe(false);
    expect(isLoopbackHost('0.0.0.0')).toBe(false);
    const { warnings } = validateConfig(input({ enabled: true, host: '127.evil.example' }));
    expect(warnings.join('\n')).toMatch(/http\.host: 127\.evil\.example is reachable from the network but http\.api_token is not set/);
  });
});
