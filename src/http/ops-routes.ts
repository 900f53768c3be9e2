import type { SampleBuffer } from '../buffer/sample-buffer.js';
import { describeError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import type { ConfigStatus, GatewayStatus } from '../status/model.js';
import type { UplinkHealth } from '../uplink/uplink-health.js';
import type { LocalHttpServer } from './server.js';

export interface OpsDeps {
  status: () => GatewayStatus;
  metrics: Metrics;
  buffer: SampleBuffer;
  health: UplinkHealth;
  /**
   * The configuration in force, for the "config loaded" condition of /readyz. Default: the
   * `config` part of `status()`.
   */
  config?: () => Pick<ConfigStatus, 'path' | 'loaded_at'> & Partial<ConfigStatus>;
}

/** One condition of /readyz: `ok` plus what an operator needs to see why not. */
export interface ReadinessCheck {
  ok: boolean;
  [detail: string]: unknown;
}

export interface Readiness {
  ready: boolean;
  checks: { buffer: ReadinessCheck; config: ReadinessCheck; uplink: ReadinessCheck };
  /** One line per failed check, for people and log lines. */
  problems: string[];
}

/**
 * The three conditions of readiness, each reported on its own so an operator (or an orchestrator's
 * probe log) sees which one failed:
 * - buffer: the last write to the durable buffer succeeded (a full disk makes it false);
 * - config: a valid configuration is in force (a refused hot reload keeps the running one, so it
 *   stays ready, and the refusal is shown);
 * - uplink: the tracking service is not refusing the credentials or the organisation (auth_failed,
 *   halted). Transient trouble (retrying: 429, 5xx, outage) keeps the gateway ready: it buffers,
 *   which is its job.
 */
export function readiness(deps: OpsDeps): Readiness {
  const problems: string[] = [];

  const b = deps.buffer.stats();
  const buffer: ReadinessCheck = { ok: b.writable, writable: b.writable, ...(b.lastWriteError ? { last_write_error: b.lastWriteError } : {}) };
  if (!b.writable) problems.push(`buffer not writable: ${b.lastWriteError?.code ?? 'unknown error'}`);

  let config: ReadinessCheck;
  try {
    const c = deps.config ? deps.config() : deps.status().config;
    const lastReload = c?.last_reload ?? null;
    config = c
      ? { ok: true, loaded: true, path: c.path, loaded_at: c.loaded_at, ...(lastReload?.outcome === 'refused' ? { last_reload_refused: { at: lastReload.at, problems: lastReload.problems ?? [] } } : {}) }
      : { ok: false, loaded: false };
  } catch (err) {
    config = { ok: false, loaded: false, error: describeError(err) };
  }
  if (!config.ok) problems.push(`config not loaded${config.error ? `: ${String(config.error)}` : ''}`);

  const h = deps.health.snapshot();
  const permanent = h.condition === 'halted' || h.condition === 'auth_failed';
  const uplink: ReadinessCheck = { ok: !permanent, condition: h.condition, ...(h.reason ? { reason: h.reason } : {}), since: new Date(h.since).toISOString() };
  if (permanent) problems.push(`uplink ${h.condition}: ${h.reason}`);

  return { ready: problems.length === 0, checks: { buffer, config, uplink }, problems };
}

/**
 * Operations endpoints: `/status` (JSON), `/metrics` (Prometheus), `/healthz` (the process
 * answers), `/readyz` (readiness() above; 503 when not ready).
 */
export function registerOpsRoutes(http: LocalHttpServer, deps: OpsDeps): void {
  http.route('GET', '/status', () => ({ json: deps.status() }), { name: 'status' });
  http.route('GET', '/metrics', async () => {
    // Gauges derived from the status (backlog ETA, set-aside, open gaps) are read by their collect
    // hooks (core/metrics.ts) during the scrape.
    deps.buffer.refreshGauges();
    return { text: await deps.metrics.registry.metrics(), contentType: deps.metrics.registry.contentType };
  }, { name: 'metrics' });
  // /healthz and /readyz stay open (access 'public') for orchestrators' probes, which carry no token,
  // and are served from the reserved connections (http.reserved_connections) when the rest are taken.
  http.route('GET', '/healthz', () => ({ json: { ok: true } }), { name: 'healthz', access: 'public', essential: true });
  http.route('GET', '/readyz', () => {
    const r = readiness(deps);
    return { status: r.ready ? 200 : 503, json: r };
  }, { name: 'readyz', access: 'public', essential: true });
}
