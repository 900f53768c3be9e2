import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/core/logger.js';
import { startEmulator, type EmulatorHandle, type EmulatorOptions } from '../../src/emulator/index.js';
import { DEMO_FIXTURE } from '../../src/emulator/index.js';
import { decide } from '../../src/uplink/retry-policy.js';
import { outcomeOf } from '../../src/uplink/client.js';
import { startTestGateway, type TestGateway, withBufferFile } from '../helpers/gateway.js';
import { delay, holdsFor, waitFor } from '../helpers/wait.js';

/**
 * The client against the emulator over real HTTP, one block per row of CONTRACT.md's
 * "Limits and error handling the client must implement" table.
 */
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function emulator(opts: EmulatorOptions = {}): Promise<EmulatorHandle> {
  const emu = await startEmulator({ port: 0, ...opts });
  cleanup.push(() => emu.close());
  return emu;
}

async function gateway(emu: { baseUrl: string; authUrl: string }, sections: Record<string, unknown> = {}, logger?: ReturnType<typeof createLogger>): Promise<TestGateway> {
  const gw = await startTestGateway(emu, sections, { logger });
  cleanup.push(() => gw.destroy());
  return gw;
}

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  return { logger: createLogger({ level: 'debug', format: 'json', destination: stream }), lines };
}

const T0 = Date.parse('2026-11-22T08:00:00.000Z');
const samples = (variable: string, n: number, t0 = T0) => Array.from({ length: n }, (_, i) => ({ variable, ts: t0 + i * 1000, value: i }));

describe('CONTRACT.md error table, client against the emulator', () => {
  it('rate limit: never exceeds the budget (0 × 429), and on 429 backs off without a tight loop, honouring Retry-After', async () => {
    // Row 1a: a budget equal to the service limit, with more work than it allows: the gateway
    // paces itself (burst of 1 s, then budget/60 per second) and gets no 429 at all. The full
    // minute at 95 % of the budget is bench/uplink-budget.ts.
    const emu = await emulator({ rateLimitPerMinute: 300 });
    const gw = await gateway(emu, { uplink: { requests_per_minute: 300, batch_size: 1, flush_interval: 0 } });
    const started = performance.now();
    await gw.handle.buffer.append(samples('mvr_gen_1', 200));
    // Waits for progress rather than a fixed 8 s (a busy machine sends fewer, never more), then
    // checks the pace against the time that really passed.
    const batch = await waitFor(
      () => {
        const b = emu.stats().requests['POST /machine-data/batch'] ?? {};
        return (b['200'] ?? 0) >= 35 ? b : null;
      },
      { timeoutMs: 60_000, intervalMs: 20, what: '35 batches delivered' },
    );
    const seconds = (performance.now() - started) / 1000;
    expect(batch['429'] ?? 0).toBe(0);
    // 5 at once, then 5 per second (less the token call), never the 200 waiting at once.
    expect(batch['200']).toBeLessThanOrEqual(5 + 5 * seconds + 1);
    expect(seconds).toBeGreaterThan(5);

    // Row 1b: budget above the service limit → 429 envelope parsed; backoff ≥ 1 s doubling, so
    // over 6 s at most a handful of 429s (a tight loop would make hundreds).
    const emu2 = await emulator({ rateLimitPerMinute: 20 });
    const { logger, lines } = capture();
    const gw2 = await gateway(emu2, { uplink: { requests_per_minute: 6_000, batch_size: 1, flush_interval: 0, max_in_flight: 1 } }, logger);
    await gw2.handle.buffer.append(samples('mvr_gen_2', 100));
    const rejectedNow = () => {
      const s = emu2.stats().requests;
      return (s['POST /machine-data/batch']?.['429'] ?? 0) + (s['POST /oauth2/token']?.['429'] ?? 0);
    };
    // A rate over a window: fewer than 8 in 6 s, watched all along (a tight loop fails at once).
    await holdsFor(() => rejectedNow() < 8, { forMs: 6_000, intervalMs: 50, what: 'fewer than 8 answers 429 in 6 s' });
    const rejected = rejectedNow();
    expect(rejected).toBeGreaterThan(0);
    // A 429 is not an outage: the link stays ok, the budget found the service's rate and paces at it.
    expect(gw2.handle.health.snapshot().condition).toBe('ok');
    expect(gw2.handle.budget.rateSnapshot().found_per_minute).toBeLessThanOrEqual(20);
    expect(gw2.handle.status().uplink.state).toMatchObject({ state: 'rate_limited', ok: false });
    // The 429 envelope {error: {type, code, message, request_id}} was parsed and logged with the request id.
    const warn = lines.map((l) => JSON.parse(l)).find((l) => l.status === 429);
    expect(warn.code).toBe('rate_limit_exceeded');
    expect(warn.request_id).toMatch(/^req_/);
    // Nothing was lost: rows stay buffered.
    expect(gw2.handle.buffer.stats().rows + (emu2.valueCounts()['mvr_gen_2'] ?? 0)).toBe(100);
  }, 60_000);

  it('429 decision honours Retry-After as a lower bound against a real 429', async () => {
    const emu = await emulator({ rateLimitPerMinute: 1 });
    const gw = await gateway(emu, { uplink: { requests_per_minute: 6_000 } });
    const first = await gw.handle.client.postBatch(JSON.stringify({ items: [{ timestamp: '2026-11-22T08:00:00.000Z', machine_variable_id: 'mvr_gen_1', value: 1 }] }));
    // The token call used the one request of this minute, so the batch is refused.
    expect(first.status).toBe(429);
    expect(first.error).toMatchObject({ code: 'rate_limit_exceeded', type: 'rate_limit' });
    expect(first.retryAfterMs).toBeGreaterThan(1_000);
    const d = decide(outcomeOf(first), 1, () => 0.5);
    expect(d).toMatchObject({ action: 'retry', reason: 'rate_limited' });
    if (d.action === 'retry') expect(d.delayMs).toBeGreaterThanOrEqual(first.retryAfterMs!);
  });

  it('JSON body over 1 MB: the gateway never sends one; it splits and delivers', async () => {
    // Variables with 6,000-character ids: 200 items would be about 1.2 MB.
    const longIds = Array.from({ length: 4 }, (_, i) => `mvr_${'x'.repeat(6_000)}${i}`);
    const fixture = { ...DEMO_FIXTURE, machine_variables: [...DEMO_FIXTURE.machine_variables, ...longIds.map((id) => ({ id, name: 'long', machine: 'mch_gen1', unit: '' }))] };
    const emu = await emulator({ fixture });
    const gw = await gateway(emu);
    for (const id of longIds) await gw.handle.buffer.append(samples(id, 50));
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { timeoutMs: 20_000, what: 'drained' });
    const batch = emu.stats().requests['POST /machine-data/batch'] ?? {};
    expect(batch['413'] ?? 0).toBe(0);
    expect(longIds.reduce((n, id) => n + (emu.valueCounts()[id] ?? 0), 0)).toBe(200);
  });

  it('413 from the service: the batch is split and the halves retried', async () => {
    const emu = await emulator();
    const gw = await gateway(emu);
    emu.setFaults({ error_rate: 1, status: 413, paths: ['/tracking/v1/machine-data/batch'] });
    const r = await gw.handle.client.postBatch(JSON.stringify({ items: [{ timestamp: '2026-11-22T08:00:00.000Z', machine_variable_id: 'mvr_gen_1', value: 1 }] }));
    expect(r.status).toBe(413);
    expect(decide(outcomeOf(r), 1)).toEqual({ action: 'split' });
    // Against the live sender: while every batch gets 413 nothing is lost, and once the fault
    // clears the split halves are delivered.
    emu.setFaults({ error_rate: 0.5, status: 413, paths: ['/tracking/v1/machine-data/batch'] });
    await gw.handle.buffer.append(samples('mvr_gen_3', 64));
    // The live sender tried at least once under the fault (besides the call above) before it clears.
    const batches = () => Object.values(emu.stats().requests['POST /machine-data/batch'] ?? {}).reduce((a, b) => a + b, 0);
    await waitFor(() => batches() >= 2, { what: 'a batch sent under the fault' });
    emu.clearFaults();
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { timeoutMs: 20_000, what: 'drained' });
    const stored = emu.valueCounts()['mvr_gen_3'] ?? 0;
    const setAside = gw.handle.status().set_aside.samples;
    // Only a lone item refused as too large may be set aside; everything else is stored.
    expect(stored + setAside).toBe(64);
    expect(stored).toBeGreaterThan(32);
  });

  it('401 on a token the service no longer knows: one new token, then the call succeeds', async () => {
    const emu = await emulator({ tokenTtlSeconds: 3_600 });
    const gw = await gateway(emu);
    await gw.handle.buffer.append(samples('mvr_gen_4', 5));
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { what: 'first delivery' });
    const renewalsBefore = (await gw.handle.metrics.uplinkTokenRenewals.get()).values[0].value;
    // A new emulator on the same port has never issued the cached token: the next call gets 401.
    const port = emu.port;
    await emu.close();
    const emu2 = await emulator({ port });
    await gw.handle.buffer.append(samples('mvr_gen_4', 5, T0 + 60_000));
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { what: 'delivery after 401' });
    const renewalsAfter = (await gw.handle.metrics.uplinkTokenRenewals.get()).values[0].value;
    expect(renewalsAfter - renewalsBefore).toBe(1);
    const requests = emu2.stats().requests['POST /machine-data/batch'] ?? {};
    expect(requests['401']).toBe(1);
    expect(emu2.valueCounts()['mvr_gen_4']).toBe(5);
    expect(gw.handle.health.snapshot().condition).toBe('ok');
  });

  it('expired token (short TTL): renewed before expiry, no 401 at all', async () => {
    const emu = await emulator({ tokenTtlSeconds: 2 });
    const gw = await gateway(emu);
    for (let i = 0; i < 5; i++) {
      await gw.handle.buffer.append(samples('mvr_gen_5', 2, T0 + i * 10_000));
      await delay(1_000);
    }
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { what: 'drained' });
    expect(emu.stats().requests['POST /machine-data/batch']?.['401'] ?? 0).toBe(0);
    expect((await gw.handle.metrics.uplinkTokenRenewals.get()).values[0].value).toBeGreaterThanOrEqual(2);
  });

  it('repeated 401 (wrong credentials): alert, back off, keep buffering; the secret never appears in logs or status', async () => {
    const emu = await emulator();
    const { logger, lines } = capture();
    const gw = await gateway(emu, { service: { auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'wrong-secret-value-123' } } }, logger);
    await gw.handle.buffer.append(samples('mvr_gen_6', 10));
    await waitFor(() => gw.handle.health.snapshot().condition === 'auth_failed', { what: 'auth_failed' });
    // Backing off: only the first token attempt(s), not a loop; the samples stay buffered. Nothing
    // may happen here, so this is watched for a while rather than waited for.
    await holdsFor(() => gw.handle.buffer.stats().rows === 10 && (emu.stats().requests['POST /oauth2/token']?.['401'] ?? 0) <= 2, { forMs: 1_500, what: 'no token retry loop, samples buffered' });
    const all = lines.join('\n') + JSON.stringify(gw.handle.status());
    expect(all).toContain('refuses the credentials');
    expect(all).not.toContain('wrong-secret-value-123');
  });

  it('static API key: accepted, and a refused key halts with auth_failed while the secondary takes over', async () => {
    const emu = await emulator();
    const good = await gateway(emu, { service: { auth: { mode: 'api_key', api_key: 'demo-api-key' } } });
    await good.handle.buffer.append(samples('mvr_gen_7', 3));
    await waitFor(() => good.handle.buffer.stats().rows === 0, { what: 'api key delivery' });
    expect(emu.valueCounts()['mvr_gen_7']).toBe(3);
    // Primary revoked, secondary valid: delivery goes on (key rotation without downtime, §5.8).
    const rotating = await gateway(emu, { service: { auth: { mode: 'api_key', api_key: 'revoked-key', secondary_api_key: 'demo-api-key' } } });
    await rotating.handle.buffer.append(samples('mvr_gen_8', 3));
    await waitFor(() => rotating.handle.buffer.stats().rows === 0, { what: 'secondary key delivery' });
    const bad = await gateway(emu, { service: { auth: { mode: 'api_key', api_key: 'revoked-key' } } });
    await bad.handle.buffer.append(samples('mvr_gen_9', 3));
    await waitFor(() => bad.handle.health.snapshot().condition === 'auth_failed', { what: 'auth_failed' });
    expect(bad.handle.buffer.stats().rows).toBe(3);
  });

  it('unauthorised organisation (403): stop sending, alert, keep buffering', async () => {
    const emu = await emulator();
    const { logger, lines } = capture();
    const gw = await gateway(emu, { service: { organisation_id: 'org_other' } }, logger);
    await gw.handle.buffer.append(samples('mvr_gen_10', 20));
    await waitFor(() => gw.handle.health.snapshot().condition === 'halted', { what: 'halted' });
    await gw.handle.buffer.append(samples('mvr_gen_10', 20, T0 + 100_000));
    // Stopped sending: no second 403 while new samples arrive (watched for a while; nothing to wait for).
    await holdsFor(() => emu.stats().requests['POST /machine-data/batch']?.['403'] === 1 && gw.handle.buffer.stats().rows === 40, { forMs: 1_500, what: 'one 403 only, samples buffered' });
    expect(lines.some((l) => l.includes('refuses this organisation'))).toBe(true);
  });

  it('invalid payload (400): bad items isolated and set aside with the message, the rest delivered', async () => {
    const emu = await emulator();
    const gw = await gateway(emu, { uplink: { flush_interval: 500 } });
    const good = samples('mvr_gen_11', 197);
    const bad = [
      { variable: 'mvr_does_not_exist', ts: T0 + 500, value: 1 },
      { variable: 'mvr_other1_speed', ts: T0 + 600, value: 2 }, // a variable of another organisation
      { variable: 'mvr_does_not_exist', ts: T0 + 700, value: 3 },
    ];
    await gw.handle.buffer.append([...good.slice(0, 100), ...bad, ...good.slice(100)]);
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { what: 'drained' });
    expect(emu.valueCounts()['mvr_gen_11']).toBe(197);
    const aside = withBufferFile(gw, (db) => db.prepare('SELECT variable, reason, request_id FROM set_aside ORDER BY ts').all()) as Array<{ variable: string; reason: string; request_id: string }>;
    expect(aside.map((a) => a.variable)).toEqual(['mvr_does_not_exist', 'mvr_other1_speed', 'mvr_does_not_exist']);
    expect(aside[0].reason).toMatch(/machine_variable_id/);
    expect(aside[0].request_id).toMatch(/^req_/);
    // Bisection: about log2(200) extra calls per bad item, not one call per item.
    const calls = Object.values(emu.stats().requests['POST /machine-data/batch'] ?? {}).reduce((a, b) => a + b, 0);
    expect(calls).toBeLessThan(3 * 2 * 8 + 2);
  });

  it('server errors, timeouts and resets: retried with backoff; data stays buffered until a 2xx', async () => {
    const emu = await emulator();
    const gw = await gateway(emu, { service: { request_timeout: '1s' } });
    emu.setFaults({ latency_ms: 1_500, paths: ['/tracking/v1/machine-data/batch'] });
    await gw.handle.buffer.append(samples('mvr_gen_12', 10));
    await waitFor(() => gw.handle.health.snapshot().condition === 'retrying', { what: 'timeout seen' });
    expect(gw.handle.buffer.stats().rows).toBe(10);
    emu.setFaults({ latency_ms: 0, drop_connection_rate: 1 });
    const dropped0 = emu.stats().dropped_connections;
    await waitFor(() => emu.stats().dropped_connections > dropped0, { what: 'a retry met a dropped connection' });
    expect(gw.handle.buffer.stats().rows).toBe(10);
    emu.setFaults({ drop_connection_rate: 0, error_rate: 1, status: 503 });
    await waitFor(() => (emu.stats().requests['POST /machine-data/batch']?.['503'] ?? 0) >= 1, { what: 'a retry answered 503' });
    expect(gw.handle.buffer.stats().rows).toBe(10);
    emu.clearFaults();
    await waitFor(() => gw.handle.buffer.stats().rows === 0, { timeoutMs: 40_000, what: 'delivered after faults' });
    expect(emu.valueCounts()['mvr_gen_12']).toBe(10);
    expect(gw.handle.health.snapshot().condition).toBe('ok');
  }, 60_000);

  it('duplicate annotation external_id (409): the client reports conflict, which counts as delivered', async () => {
    const emu = await emulator();
    const gw = await gateway(emu);
    const body = { type: 'instant', occurred_at: '2026-11-22T08:00:00.000Z', text: 'Tool change', machine_variables: [{ id: 'mvr_press1_state' }], site: { external_id: 'plant-demo' }, external_id: 'gw-test-1' };
    const first = await gw.handle.client.postAnnotation(body);
    expect(first.status).toBe(201);
    const again = await gw.handle.client.postAnnotation(body);
    expect(again.status).toBe(409);
    expect(again.error?.code).toBe('conflict'); // the {code, message} envelope
    expect(decide(outcomeOf(again), 1)).toEqual({ action: 'conflict' });
    expect(emu.annotations()).toHaveLength(1);
  });
});
