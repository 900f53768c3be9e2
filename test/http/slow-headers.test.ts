import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator } from '../../src/emulator/index.js';
import { ANNOTATIONS } from '../annotations/helpers.js';
import { openSockets, type Flood } from '../helpers/flood.js';
import { startTestGateway } from '../helpers/gateway.js';
import { requestOnce } from '../helpers/http-once.js';
import { captureLines } from '../helpers/log.js';
import { waitFor } from '../helpers/wait.js';

/**
 * One host cannot make the local HTTP server deaf: requests whose headers never end, from one
 * address or a few, cost those addresses, not /healthz, the operator page or its panel from
 * elsewhere. Real gateway, real sockets over loopback: the attackers are 127.0.0.2 and up, the
 * health check and the operator 127.0.0.1.
 */

const cleanup: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function gateway(http: Record<string, unknown> = {}) {
  const emu = await startEmulator({ port: 0 });
  cleanup.push(() => emu.close());
  const log = captureLines();
  const gw = await startTestGateway(emu, { http: { enabled: true, port: 0, ...http }, annotations: ANNOTATIONS }, { logger: log.logger });
  cleanup.push(() => gw.destroy());
  const url = new URL(gw.handle.httpUrl!);
  /** gateway_http_connections_refused_total{reason} (read from the gateway: /metrics is not essential, the reserve may refuse it). */
  const refused = async (reason: string) => (await gw.handle.metrics.httpConnectionsRefused.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;
  return { url, port: Number(url.port), log, refused };
}

/** One GET from 127.0.0.1, no retry. */
const getOnce = (port: number, path: string) => requestOnce(`http://127.0.0.1:${port}${path}`, { localAddress: '127.0.0.1' });

const HALF_REQUEST = 'GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Never-Ends: ';

/** The operator's and the orchestrator's requests, each tried once. */
async function legitimate(port: number): Promise<Record<string, number | string>> {
  const [healthz, page, panel] = await Promise.all([getOnce(port, '/healthz'), getOnce(port, '/'), getOnce(port, '/api/panel')]);
  return { healthz, page, panel };
}

describe('local HTTP server: limits per client address', () => {
  it('(c14) 300 requests whose headers never end from one address: /healthz, / and /api/panel from another answer', async () => {
    const g = await gateway();
    const attack = await openSockets(300, { port: g.port, from: '127.0.0.2', first: HALF_REQUEST });
    cleanup.push(() => attack.stop());
    expect(attack.connected).toBe(300);

    expect(await legitimate(g.port)).toEqual({ healthz: 200, page: 200, panel: 200 });
    // The address holds http.max_connections_per_client (64); its older sockets were closed.
    await waitFor(() => attack.open <= 64, { timeoutMs: 20_000, what: `the attacker held to 64 connections (open: ${attack.open})` });

    expect(await g.refused('max_connections_per_client')).toBeGreaterThanOrEqual(236);
    const lines = g.log.lines.filter((l) => l.reason === 'max_connections_per_client');
    expect(lines[0]).toMatchObject({ remote: '127.0.0.2' });
    expect(String(lines[0].msg)).toContain('127.0.0.2');
    // A bounded rate: a line per address and minute, not one per connection.
    expect(lines.length).toBe(1);
  }, 120_000);

  it('(c14) 320 such requests from 8 addresses, 40 each, beyond http.max_connections: the addresses holding the most give way', async () => {
    const g = await gateway();
    const floods: Flood[] = [];
    for (let i = 0; i < 8; i++) floods.push(await openSockets(40, { port: g.port, from: `127.0.0.${10 + i}`, first: HALF_REQUEST }));
    cleanup.push(() => floods.forEach((f) => f.stop()));
    expect(floods.reduce((n, f) => n + f.connected, 0)).toBe(320);
    await waitFor(() => floods.reduce((n, f) => n + f.open, 0) <= 256, { timeoutMs: 20_000, what: 'the attackers held to max_connections' });

    expect(await legitimate(g.port)).toEqual({ healthz: 200, page: 200, panel: 200 });
    // Each answer took an attacker's oldest half-sent connection, never a request being answered.
    expect(await g.refused('max_connections')).toBeGreaterThanOrEqual(64);
    const lines = g.log.lines.filter((l) => l.reason === 'max_connections');
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.every((l) => /^127\.0\.0\.1\d$/.test(String(l.remote)))).toBe(true);
  }, 120_000);

  it('closes headers that never end at http.header_timeout with 408, counted and logged with the address', async () => {
    const g = await gateway({ header_timeout: '2s' });
    const t0 = performance.now();
    const slow = await openSockets(3, { port: g.port, from: '127.0.0.5', first: HALF_REQUEST });
    cleanup.push(() => slow.stop());
    await waitFor(() => slow.closed === 3, { timeoutMs: 20_000, what: 'half-sent requests closed' });
    const waited = performance.now() - t0;
    expect(waited).toBeGreaterThan(1_500);
    expect(waited).toBeLessThan(10_000);
    expect(await g.refused('header_timeout')).toBe(3);
    expect(g.log.lines.find((l) => l.reason === 'header_timeout')).toMatchObject({ remote: '127.0.0.5' });
  }, 60_000);
});
