import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { validateConfig } from '../../src/config/load.js';
import { connectionLimits } from '../../src/http/config.js';
import { startHarness, type Harness } from '../annotations/helpers.js';
import { testConfigInput } from '../helpers/gateway.js';
import { openSse } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 21 §4: one client holding 256 console event streams used up http.max_connections, so
 * /healthz and the operator page went dark. Real gateway, real sockets: streams are capped per
 * client and in total, and the last connections are kept for the health checks and the operator page.
 */

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function harness(http: Record<string, unknown> = {}): Promise<Harness> {
  const h = await startHarness({ sections: { http: { enabled: true, port: 0, ...http } } });
  cleanup.push(() => h.close());
  return h;
}

interface Opened {
  socket: Socket;
  /** The status code of the answer, or 'closed' when the connection closed without one. */
  status: number | 'closed';
  head: string;
}

/** Opens a raw connection and sends a request; resolves at the status line (the socket stays open). */
function openRequest(url: string, path: string, localAddress?: string): Promise<Opened> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: u.hostname, port: Number(u.port), localAddress });
    cleanup.push(() => socket.destroy());
    let head = '';
    let done = false;
    const finish = (status: number | 'closed') => {
      if (done) return;
      done = true;
      resolve({ socket, status, head });
    };
    socket.on('connect', () => socket.write(`GET ${path} HTTP/1.1\r\nHost: ${u.host}\r\nAccept: text/event-stream\r\n\r\n`));
    socket.on('data', (d) => {
      head += d.toString('latin1');
      // The whole answer of a refusal, or the first event of a stream.
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      if (m && (head.includes('}') || head.includes('\n\n'))) finish(Number(m[1]));
    });
    socket.on('error', () => finish('closed'));
    socket.on('close', () => finish('closed'));
  });
}

/** A POST whose body never finishes: a request that holds its connection (until http's request timeout). */
function openUnfinishedBody(url: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname);
    cleanup.push(() => s.destroy());
    s.once('connect', () => {
      s.write(`POST /api/annotations HTTP/1.1\r\nHost: ${u.host}\r\nContent-Type: application/json\r\nX-Requested-By: test\r\nContent-Length: 1000\r\n\r\n{"machine":`);
      resolve(s);
    });
    s.once('error', reject);
  });
}

/** One GET on a fresh connection: status and body, or the connection error. */
function get(url: string, path: string): Promise<{ status: number; body: string; connection?: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${path}`, { agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection }));
    });
    req.on('error', reject);
    req.end();
  });
}

const tally = (list: Opened[]) => list.reduce<Record<string, number>>((a, o) => ((a[String(o.status)] = (a[String(o.status)] ?? 0) + 1), a), {});

describe('local HTTP server: streams and reserved connections', () => {
  it('one client opening 256 event streams gets max_streams_per_client of them; /healthz and the operator page still answer', async () => {
    // The rate limit (600/min) would only slow the attacker down: streams stay open, so 256 of them
    // pile up within half a minute. Raised here to see the stream limit alone, at once.
    const h = await harness({ rate_limit_per_minute: 100_000 });
    // The attacker is 127.0.0.2; the health checks and the operator page come from 127.0.0.1.
    const streams = await Promise.all(Array.from({ length: 256 }, () => openRequest(h.url, '/console/api/events', '127.0.0.2')));
    // The refused connections are closed by the gateway; /healthz answers while the attacker holds its streams.
    await waitFor(async () => (await get(h.url, '/healthz')).status === 200, { timeoutMs: 10_000, what: '/healthz while one client holds its streams' });
    // The default of 4 per client; every other one is answered 429 naming the setting, and closed.
    expect(tally(streams)).toEqual({ 200: 4, 429: 252 });
    const refused = streams.find((s) => s.status === 429)!;
    expect(refused.head).toContain('too_many_streams');
    expect(refused.head).toContain('http.max_streams_per_client');
    expect(refused.head.toLowerCase()).toContain('retry-after: 5');
    expect(refused.head.toLowerCase()).toContain('connection: close');
    expect(streams.filter((s) => s.status === 200 && !s.socket.destroyed)).toHaveLength(4);
    const hmi = await get(h.url, '/');
    expect(hmi.status).toBe(200);
    expect(hmi.body).toContain('<html');
    expect((await get(h.url, '/api/panel')).status).toBe(200);
    expect((await get(h.url, '/console/api/overview')).status).toBe(200);
    const metrics = (await get(h.url, '/metrics')).body;
    expect(metrics).toContain('gateway_http_busy_total{reason="streams_per_client"} 252');

    // A stream that ends gives its slot back.
    streams.find((s) => s.status === 200)!.socket.destroy();
    await waitFor(async () => {
      const again = await openRequest(h.url, '/console/api/events', '127.0.0.2');
      return again.status === 200 ? again : (again.socket.destroy(), null);
    }, { what: 'a stream slot freed by a closed stream' });
  });

  it('a granted stream is well-formed server-sent events: retry, hello with the boot id, then ticks with the status', async () => {
    const h = await harness();
    const sse = await openSse(`${h.url}/console/api/events`);
    cleanup.push(() => sse.close());
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const [hello, tick1, tick2] = await sse.next(3);
    expect(sse.retryMs()).toBe(2_000);
    expect(hello.event).toBe('hello');
    const boot = (JSON.parse(hello.data) as { boot: string }).boot;
    expect(boot).toMatch(/\S/);
    for (const t of [tick1, tick2]) {
      expect(t.event).toBe('tick');
      expect(JSON.parse(t.data)).toMatchObject({ boot, status: { gateway: { name: expect.any(String) } }, v: expect.any(Array) });
    }
  });

  it('caps the streams of all clients together at max_streams (503)', async () => {
    const h = await harness({ max_streams: 6, max_streams_per_client: 2 });
    // Five client addresses (127.0.0.2 ... 127.0.0.6 all reach 127.0.0.1 over loopback), two streams each.
    const streams: Opened[] = [];
    for (let c = 2; c <= 6; c++) streams.push(...(await Promise.all([openRequest(h.url, '/console/api/events', `127.0.0.${c}`), openRequest(h.url, '/console/api/events', `127.0.0.${c}`)])));
    expect(tally(streams)).toEqual({ 200: 6, 503: 4 });
    expect(streams.find((s) => s.status === 503)!.head).toContain('http.max_streams');
    expect((await get(h.url, '/healthz')).status).toBe(200);
  });

  it('keeps reserved_connections for /healthz, /readyz and the operator page when other requests hold the rest', async () => {
    const h = await harness({ max_connections: 24, reserved_connections: 8, max_streams: 4, max_streams_per_client: 4 });
    const streams = await Promise.all(Array.from({ length: 4 }, () => openRequest(h.url, '/console/api/events')));
    expect(tally(streams)).toEqual({ 200: 4 });
    // 4 streams + 12 requests whose bodies never finish: the 16 connections outside the reserve
    // are in a request. (Idle and half-sent connections do not count: they give way to newcomers.)
    const idle = await Promise.all(Array.from({ length: 12 }, () => openUnfinishedBody(h.url)));
    await waitFor(async () => (await get(h.url, '/status')).status === 503, { what: '12 unfinished requests under way' });

    const status = await get(h.url, '/status');
    expect(status.status).toBe(503);
    expect(JSON.parse(status.body).error).toMatchObject({ code: 'busy' });
    expect(status.body).toContain('http.reserved_connections');
    expect(status.connection).toBe('close');
    for (const path of ['/healthz', '/readyz', '/', '/api/panel']) expect([path, (await get(h.url, path)).status]).toEqual([path, 200]);
    // The operator's downtime button works from the reserve too.
    const start = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${h.url}/api/machines/press1/downtime/start`, { method: 'POST', agent: false, headers: { 'x-requested-by': 'hmi' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(start).toBe(201);

    for (const s of idle) s.destroy();
    await waitFor(async () => (await get(h.url, '/status')).status === 200, { what: '/status once the unfinished requests are gone' });
  });

  it('checks the settings: streams and the reserve stay below max_connections; defaults scale with a small max_connections', () => {
    const emu = { baseUrl: 'http://127.0.0.1:1/tracking/v1', authUrl: 'http://127.0.0.1:1' };
    const check = (http: Record<string, unknown>) => () => validateConfig(testConfigInput(emu, '/tmp/x', { http: { enabled: true, ...http } }));
    expect(check({ max_connections: 64, max_streams: 60 })).toThrow(/http\.max_streams: max_streams \(60\) plus reserved_connections \(8\) must stay below max_connections \(64\)/);
    expect(check({ max_connections: 64, reserved_connections: 40, max_streams: 30 })).toThrow(/http\.max_streams/);
    expect(check({ max_streams: 8, max_streams_per_client: 9 })).toThrow(/http\.max_streams_per_client: is 9, more than max_streams \(8\)/);
    // Only max_connections lowered (its minimum, 8): the defaults follow it and the file stays valid.
    const small = validateConfig(testConfigInput(emu, '/tmp/x', { http: { enabled: true, max_connections: 8 } })).config.http;
    expect(connectionLimits(small)).toEqual({ maxConnections: 8, reservedConnections: 1, maxStreams: 2, maxStreamsPerClient: 2 });
    expect(connectionLimits(validateConfig(testConfigInput(emu, '/tmp/x', {})).config.http)).toEqual({ maxConnections: 256, reservedConnections: 16, maxStreams: 32, maxStreamsPerClient: 4 });
  });
});
