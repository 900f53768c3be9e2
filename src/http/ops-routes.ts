import type { SampleBuffer } from '../buffer/sample-buffer.js';
import type { Metrics } from '../core/metrics.js';
import type { GatewayStatus } from '../runtime/status.js';
import type { UplinkHealth } from '../uplink/uplink-health.js';
import type { LocalHttpServer } from './server.js';

export interface OpsDeps {
  status: () => GatewayStatus;
  metrics: Metrics;
  buffer: SampleBuffer;
  health: UplinkHealth;
}

/**
 * Operations endpoints: `/status` (JSON), `/metrics` (Prometheus), `/healthz` (the process
 * answers), `/readyz` (buffer writable and the uplink not in a permanent-error state).
 */
export function registerOpsRoutes(http: LocalHttpServer, deps: OpsDeps): void {
  http.route('GET', '/status', () => ({ json: deps.status() }), { name: 'status' });
  http.route('GET', '/metrics', async () => {
    deps.status(); // refreshes the gauges derived from status (ETA, set-aside)
    deps.buffer.refreshGauges();
    return { text: await deps.metrics.registry.metrics(), contentType: deps.metrics.registry.contentType };
  }, { name: 'metrics' });
  http.route('GET', '/healthz', () => ({ json: { ok: true } }), { name: 'healthz' });
  http.route('GET', '/readyz', () => {
    const b = deps.buffer.stats();
    const h = deps.health.snapshot();
    const problems: string[] = [];
    if (!b.writable) problems.push(`buffer not writable: ${b.lastWriteError?.code ?? 'unknown'}`);
    if (h.condition === 'halted' || h.condition === 'auth_failed') problems.push(`uplink ${h.condition}: ${h.reason}`);
    return { status: problems.length === 0 ? 200 : 503, json: { ready: problems.length === 0, problems } };
  }, { name: 'readyz' });
}
