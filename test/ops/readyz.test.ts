import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { SampleBuffer } from '../../src/buffer/sample-buffer.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { startEmulator } from '../../src/emulator/index.js';
import { readiness, type OpsDeps } from '../../src/http/ops-routes.js';
import type { GatewayStatus } from '../../src/status/model.js';
import { UplinkHealth } from '../../src/uplink/uplink-health.js';
import { startTestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function get(url: string): Promise<{ status: number; body: any }> {
  const r = await request(url);
  return { status: r.statusCode, body: await r.body.json() };
}

function deps(over: { writable?: boolean; config?: OpsDeps['config'] } = {}): OpsDeps & { health: UplinkHealth } {
  const buffer = {
    stats: () => ({ writable: over.writable ?? true, lastWriteError: over.writable === false ? { code: 'SQLITE_FULL', message: 'database or disk is full', at: 0 } : null }),
  } as unknown as SampleBuffer;
  const health = new UplinkHealth(systemClock, silentLogger(), createMetrics());
  return {
    status: () => ({ config: { path: '/etc/gw.yaml', loaded_at: '2025-03-04T08:00:00.000Z', reloads_applied: 0, reloads_refused: 0, last_reload: null } }) as unknown as GatewayStatus,
    metrics: createMetrics(),
    buffer,
    health,
    ...(over.config ? { config: over.config } : {}),
  };
}

describe('/readyz conditions', () => {
  it('is ready with each condition reported on its own', () => {
    const r = readiness(deps());
    expect(r.ready).toBe(true);
    expect(r.problems).toEqual([]);
    expect(r.checks.buffer).toEqual({ ok: true, writable: true });
    expect(r.checks.config).toEqual({ ok: true, loaded: true, path: '/etc/gw.yaml', loaded_at: '2025-03-04T08:00:00.000Z' });
    expect(r.checks.uplink).toMatchObject({ ok: true, condition: 'ok' });
  });

  it('names a buffer that cannot write', () => {
    const r = readiness(deps({ writable: false }));
    expect(r.ready).toBe(false);
    expect(r.checks.buffer).toMatchObject({ ok: false, writable: false, last_write_error: { code: 'SQLITE_FULL' } });
    expect(r.checks.uplink.ok).toBe(true);
    expect(r.problems).toEqual(['buffer not writable: SQLITE_FULL']);
  });

  it('fails on credentials or organisation refused, not on transient trouble', () => {
    const d = deps();
    d.health.failure({ action: 'retry', delayMs: 1_000, reason: 'server_error' }, 'HTTP 503');
    expect(readiness(d).ready).toBe(true);
    expect(readiness(d).checks.uplink).toMatchObject({ ok: true, condition: 'retrying', reason: 'HTTP 503' });
    d.health.failure({ action: 'credentials_failed', delayMs: 60_000 }, 'the token service refused the client credentials (HTTP 401)');
    const r = readiness(d);
    expect(r.ready).toBe(false);
    expect(r.checks.uplink).toMatchObject({ ok: false, condition: 'auth_failed' });
    expect(r.problems).toEqual(['uplink auth_failed: the token service refused the client credentials (HTTP 401)']);
    d.health.failure({ action: 'halt', reason: 'forbidden' }, 'HTTP 403');
    expect(readiness(d).checks.uplink).toMatchObject({ ok: false, condition: 'halted' });
  });

  it('reports the configuration in force, and a refused reload without failing readiness', () => {
    const refused = readiness(
      deps({ config: () => ({ path: '/etc/gw.yaml', loaded_at: 'T0', last_reload: { at: 'T1', outcome: 'refused', changed: [], restart_required: [], problems: ['uplink.batch_size: 250 is above the maximum of 200'] } }) }),
    );
    expect(refused.ready).toBe(true);
    expect(refused.checks.config).toEqual({ ok: true, loaded: true, path: '/etc/gw.yaml', loaded_at: 'T0', last_reload_refused: { at: 'T1', problems: ['uplink.batch_size: 250 is above the maximum of 200'] } });
    const broken = readiness(
      deps({
        config: () => {
          throw new Error('no configuration');
        },
      }),
    );
    expect(broken.ready).toBe(false);
    expect(broken.checks.config).toMatchObject({ ok: false, loaded: false });
    expect(broken.problems).toEqual(['config not loaded: no configuration']);
  });
});

describe('/healthz and /readyz of a running gateway', () => {
  it('ready with good credentials; 503 naming the uplink when the credentials are refused, while /healthz stays 200', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const good = await startTestGateway(emu, { http: { enabled: true, port: 0 }, generator: [{ name: 'gen', variables: ['mvr_gen_1'], interval: 100 }] });
    cleanup.push(() => good.destroy());
    await waitFor(() => good.handle.sync.stats().deliveredTotal > 0, { what: 'first delivery' });
    const ready = await get(`${good.handle.httpUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ ready: true, checks: { buffer: { ok: true }, config: { ok: true, loaded: true }, uplink: { ok: true, condition: 'ok' } }, problems: [] });

    const bad = await startTestGateway(emu, {
      http: { enabled: true, port: 0 },
      generator: [{ name: 'gen', variables: ['mvr_gen_2'], interval: 100 }],
      service: { auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'not-the-secret' } },
    });
    cleanup.push(() => bad.destroy());
    const refused = await waitFor(async () => {
      const r = await get(`${bad.handle.httpUrl}/readyz`);
      return r.status === 503 ? r : null;
    }, { what: '/readyz 503' });
    expect(refused.body.ready).toBe(false);
    expect(refused.body.checks.uplink).toMatchObject({ ok: false, condition: 'auth_failed' });
    expect(refused.body.checks.buffer.ok).toBe(true);
    expect(refused.body.checks.config.ok).toBe(true);
    expect(refused.body.problems[0]).toMatch(/^uplink auth_failed: /);
    expect(await get(`${bad.handle.httpUrl}/healthz`)).toEqual({ status: 200, body: { ok: true } });
  });
});
