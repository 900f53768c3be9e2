import { notBuiltPage, readBundle, registerBundleRoutes } from '../http/bundles.js';
import type { LocalHttpServer, Reply } from '../http/server.js';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import type { GatewayStatus } from '../status/model.js';
import type { OverviewResponse } from './api/live.js';
import { consolePage } from './assets.js';
import type { BacklogHistory } from './backlog-history.js';
import type { LiveHub } from './live.js';
import { QualityReads, type QualityTables } from './quality-reads.js';
import { currentRefusals, type RefusalLog } from './refusal-log.js';
import type { ValueRing } from './value-ring.js';

export interface LiveRouteDeps {
  boot: string;
  title: string;
  hub: LiveHub;
  backlog: BacklogHistory;
  status: () => GatewayStatus;
  metrics: Metrics;
  refusals: RefusalLog;
  ring: ValueRing;
  quality: QualityTables;
  clock: Clock;
}

const CSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/**
 * The console's page and the Overview: the page shell and its bundle, the live stream every page
 * reads (status and changed values once a second) and the overview's figures.
 */
export function registerLiveRoutes(http: LocalHttpServer, deps: LiveRouteDeps): void {
  const page: Reply = { html: consolePage(deps.title), headers: { 'content-security-policy': CSP } };

  // The page shell and its bundle hold no gateway data, so they load without the read token (like
  // the HMI page at /); every /console/api read they make follows the read-token rule (guard.ts).
  http.route('GET', '/console', () => (readBundle('console') ? page : { status: 503, html: notBuiltPage('console') }), { name: 'console page', access: 'public' });
  registerBundleRoutes(http, 'console', '/console', { label: 'console' });

  // A stream: counted against http.max_streams_per_client and http.max_streams.
  http.route('GET', '/console/api/events', (ctx) => {
    deps.hub.attach(ctx.res);
  }, { name: 'console events', stream: true, access: 'confidential' });

  http.route('GET', '/console/api/overview', async () => {
    // 429s answered by the service since the start (gateway_uplink_retries_total{reason="rate_limited"}).
    const retries = await deps.metrics.uplinkRetries.get();
    const rateLimited = retries.values.filter((v) => v.labels.reason === 'rate_limited').reduce((a, v) => a + v.value, 0);
    const recent = deps.refusals.recent();
    const now = deps.clock.now();
    const status = deps.status();
    const qualities = new QualityReads(deps.quality, now);
    // A refusal is a problem while its condition holds (refusal-log.ts currentRefusals).
    const refusing = currentRefusals(recent, now, {
      readFineSince: (variable, at) => {
        const q = qualities.of(variable, null);
        return q !== null && q.quality === 'good' && q.since !== null && q.since > at;
      },
      lastSampleAt: (source) => status.sources.find((s) => s.name === source)?.lastSampleAt ?? null,
    });
    const json: OverviewResponse = { boot: deps.boot, status, backlog: deps.backlog.points(), rate_limited_total: rateLimited, refusals: recent.slice(0, 50), refusing, untracked: deps.ring.untracked };
    return { json };
  }, { name: 'console overview' });

  http.route('GET', '/console/api/refusals', () => ({ json: { refusals: deps.refusals.recent() } }), { name: 'console refusals' });
}
