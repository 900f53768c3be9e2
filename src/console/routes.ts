import { once } from 'node:events';
import { join } from 'node:path';
import { z } from 'zod';
import type { SampleBuffer } from '../buffer/sample-buffer.js';
import type { GatewayConfig } from '../config/schema.js';
import { describeError } from '../core/errors.js';
import { HttpError, type LocalHttpServer, type Reply } from '../http/server.js';
import type { Metrics } from '../core/metrics.js';
import type { GatewayStatus } from '../runtime/status.js';
import type { TrackingClient } from '../uplink/client.js';
import type { FleetWatch } from '../fleet/index.js';
import { consoleAssets, consolePage, MISSING_BUNDLE } from './assets.js';
import { browseOpcua, browseSchema, checkConfigText, parseBody, probeModbus, probeSchema, readConfigFile, REDACTED, renderOpcuaSnippet, snippetSchema, writeConfigFile } from './build-tools.js';
import { ConsoleCatalog, registerCatalogRoutes } from './catalog.js';
import { LiveHub } from './live.js';
import type { RefusalLog } from './refusal-log.js';
import { variableIndex, type VariableInfo } from './variable-index.js';
import { BUCKET_MS, type ValueRing } from './value-ring.js';

export interface ConsoleDeps {
  status: () => GatewayStatus;
  metrics: Metrics;
  config: () => GatewayConfig;
  configPath: string | null;
  ring: ValueRing;
  refusals: RefusalLog;
  buffer: SampleBuffer;
  client: TrackingClient;
  dataDir: string;
  /** The plant's fleet table (fleet.mqtt configured), else null/absent. */
  fleet?: FleetWatch | null;
  /** Applies a validated configuration (the gateway's hot reload). */
  reload: (next: GatewayConfig) => Promise<{ changed: string[]; restartRequired: string[]; restartedSources: string[] }>;
}

/** Points of the sparkline sent with the variable list: 30 buckets of 10 s, the last 5 minutes. */
const SPARK_POINTS = 30;
const BACKLOG_EVERY_MS = 10_000;
const BACKLOG_POINTS = 360; // one hour

const CSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

export interface ConsoleRuntime {
  hub: LiveHub;
  close(): void;
}

/**
 * The commissioning console at /console: the page, its bundled script and style, and the JSON and
 * event-stream routes under /console/api it reads. Every route is registered on the gateway's
 * server like any other, so the server's guards (rate limit, body limit, tokens for writes and,
 * where configured, reads) apply to them; every write is a POST or PUT with a JSON body.
 */
export function registerConsoleRoutes(http: LocalHttpServer, deps: ConsoleDeps): ConsoleRuntime {
  const boot = `${process.pid}-${Date.now()}`;
  const hub = new LiveHub(deps.ring, deps.refusals, deps.status, boot);

  // Backlog of the last hour, for the overview's chart; sampled whether or not a console is open.
  const backlog: Array<[number, number]> = [];
  const sampleBacklog = () => {
    try {
      backlog.push([Date.now(), deps.buffer.stats().rows]);
      if (backlog.length > BACKLOG_POINTS) backlog.shift();
    } catch {
      /* buffer closing */
    }
  };
  sampleBacklog();
  const backlogTimer = setInterval(sampleBacklog, BACKLOG_EVERY_MS);
  backlogTimer.unref();

  let index: { config: GatewayConfig; map: Map<string, VariableInfo> } | null = null;
  const infoOf = () => {
    const cfg = deps.config();
    if (!index || index.config !== cfg) index = { config: cfg, map: variableIndex(cfg) };
    return index.map;
  };

  // The organisation's catalog: machine names of the variables, the build page's mapping (catalog.ts).
  const catalog = new ConsoleCatalog({ client: deps.client, service: () => deps.config().service });

  const page: Reply = { html: consolePage(deps.config().gateway.name), headers: { 'content-security-policy': CSP } };

  // The page shell and its bundle hold no gateway data, so they load without the read token (like
  // the HMI page at /); every /console/api read they make follows the read-token rule (guard.ts).
  http.route('GET', '/console', () => (consoleAssets() ? page : { status: 503, html: MISSING_BUNDLE }), { name: 'console page', access: 'public' });
  http.route('GET', '/console/app.js', () => {
    const a = consoleAssets();
    if (!a) throw new HttpError(503, 'not_built', 'the console is not built: run npm run build');
    return { text: a.js, contentType: 'text/javascript; charset=utf-8' };
  }, { name: 'console asset', access: 'public' });
  http.route('GET', '/console/app.css', () => {
    const a = consoleAssets();
    if (!a) throw new HttpError(503, 'not_built', 'the console is not built: run npm run build');
    return { text: a.css, contentType: 'text/css; charset=utf-8' };
  }, { name: 'console asset', access: 'public' });

  // A stream: counted against http.max_streams_per_client and http.max_streams (issue 21 §4).
  http.route('GET', '/console/api/events', (ctx) => {
    hub.attach(ctx.res);
  }, { name: 'console events', stream: true });

  http.route('GET', '/console/api/overview', async () => {
    // 429s answered by the service since the start (gateway_uplink_retries_total{reason="rate_limited"}).
    const retries = await deps.metrics.uplinkRetries.get();
    const rateLimited = retries.values.filter((v) => v.labels.reason === 'rate_limited').reduce((a, v) => a + v.value, 0);
    return { json: { boot, status: deps.status(), backlog, rate_limited_total: rateLimited, refusals: deps.refusals.recent().slice(0, 50), untracked: deps.ring.untracked } };
  }, { name: 'console overview' });

  /**
   * Every variable, mapped or seen: columns as arrays (one JSON array per field) to keep 5,000
   * rows small and quick to parse.
   */
  http.route('GET', '/console/api/variables', async ({ res }) => {
    catalog.warm(); // machine names once the service answers; never blocks
    const catalogMachines = catalog.machines();
    const info = infoOf();
    const now = Date.now();
    const b = deps.buffer.stats();
    const setAside = new Map(deps.buffer.setAsideStore.countsByVariable().map((r) => [r.variable, r.n]));
    // Streamed in slices of rows written as text: 5,000 rows never exist at once as objects or as
    // one big string (the peak of that was most of what the console cost the gateway's memory).
    const q = (v: string | null) => (v === null ? 'null' : JSON.stringify(v));
    let rows: string[] = [];
    let first = true;
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.write(`{"boot":${q(boot)},"now":${now},"bucket_ms":${BUCKET_MS},"oldest_queued_ts":${b.oldestTs ?? 'null'},"variables":[`);
    const flush = async () => {
      if (rows.length === 0) return;
      const ok = res.write(`${first ? '' : ','}${rows.join(',')}`);
      first = false;
      rows = [];
      if (!ok) await once(res, 'drain');
    };
    const row = (id: string) => {
      const i = info.get(id);
      const e = deps.ring.get(id);
      const ref = deps.refusals.of(id);
      const aside = setAside.get(id) ?? 0;
      // Delivered once older than the oldest sample still queued (the queue is sent oldest first).
      const delivery = aside ? 'set_aside' : !e ? 'none' : b.oldestTs === null || e.lastTs < b.oldestTs ? 'delivered' : 'queued';
      rows.push(
        `{"id":${q(id)},"idx":${e?.idx ?? -1},"source":${q(i?.source ?? null)},"machine":${q(catalogMachines?.get(id) ?? i?.machine ?? null)},"mapped":${i !== undefined},` +
          `"value":${e ? Number(e.last.toPrecision(7)) : 'null'},"ts":${e?.lastTs ?? 'null'},"rate":${e ? Number(deps.ring.rate(e, now).toFixed(3)) : 0},` +
          `"refused":${ref ? JSON.stringify(ref.byReason) : 'null'},"set_aside":${aside},"delivery":"${delivery}","spark":[${e ? deps.ring.spark(e, SPARK_POINTS).map((x) => (x === null ? 'null' : x)).join(',') : ''}]}`,
      );
    };
    for (const id of info.keys()) {
      row(id);
      if (rows.length >= 250) await flush();
    }
    for (const e of deps.ring.entries()) {
      if (info.has(e.id)) continue;
      row(e.id);
      if (rows.length >= 250) await flush();
    }
    await flush();
    res.end(']}');
  }, { name: 'console variables' });

  http.route('GET', '/console/api/variables/:id', ({ params }) => {
    const id = params.id;
    const i = infoOf().get(id);
    const e = deps.ring.get(id);
    if (!i && !e) throw new HttpError(404, 'not_found', `no variable ${id} is mapped or has been seen`);
    return {
      json: {
        id,
        source: i?.source ?? null,
        kind: i?.kind ?? null,
        machine: catalog.machineOf(id) ?? i?.machine ?? null,
        settings: i?.settings ?? [],
        config: i?.config ?? null,
        value: e?.last ?? null,
        ts: e?.lastTs ?? null,
        total: e?.total ?? 0,
        rate: e ? deps.ring.rate(e, Date.now()) : 0,
        bucket_ms: BUCKET_MS,
        trend: e ? deps.ring.trend(e) : [],
        refusals: deps.refusals.of(id) ?? { byReason: {}, last: [] },
      },
    };
  }, { name: 'console variable' });

  /**
   * The Fleet page: every gateway publishing under fleet.mqtt.prefix, as `edge-gateway fleet`
   * shows it (same table model). The page asks every few seconds while it is open: the rows are
   * built from memory, nothing goes to the broker per request (the subscription starts with the
   * first question and ends 5 minutes after the last, src/fleet/index.ts).
   */
  http.route('GET', '/console/api/fleet', async () => {
    const fleet = deps.fleet;
    if (!fleet) return { json: { configured: false, message: 'fleet status not configured (fleet.mqtt)', self: deps.config().gateway.name, rows: [] } };
    const rows = await fleet.rows(Date.now);
    return { json: { configured: true, self: deps.config().gateway.name, now: Date.now(), broker: fleet.broker(), rows } };
  }, { name: 'console fleet' });

  http.route('GET', '/console/api/refusals', () => ({ json: { refusals: deps.refusals.recent() } }), { name: 'console refusals' });

  // --- Build the config ---
  registerCatalogRoutes(http, catalog);

  let browsing = false;
  http.route('POST', '/console/api/opcua/browse', async (ctx) => {
    const input = parseBody(browseSchema, await ctx.json());
    if (browsing) throw new HttpError(409, 'busy', 'a browse is already running; wait for it');
    browsing = true;
    try {
      return { json: await browseOpcua(input, join(deps.dataDir, 'console', 'pki')) };
    } finally {
      browsing = false;
    }
  }, { name: 'console opcua browse' });

  http.route('POST', '/console/api/opcua/snippet', async (ctx) => {
    const input = parseBody(snippetSchema, await ctx.json());
    const yaml = renderOpcuaSnippet(input);
    return { json: { yaml } };
  }, { name: 'console opcua snippet' });

  http.route('POST', '/console/api/modbus/probe', async (ctx) => ({ json: await probeModbus(parseBody(probeSchema, await ctx.json())) }), { name: 'console modbus probe' });

  const textSchema = z.strictObject({ yaml: z.string().max(5_000_000) });
  http.route('POST', '/console/api/config/check', async (ctx) => {
    const { yaml } = parseBody(textSchema, await ctx.json());
    const r = await checkConfigText(yaml);
    return { json: { ok: r.ok, problems: r.problems, warnings: r.warnings, sources: r.sources } };
  }, { name: 'console config check' });

  http.route('GET', '/console/api/config', () => {
    if (!deps.configPath) return { json: { path: null, yaml: null, note: 'this gateway was started without a configuration file' } };
    try {
      return { json: { path: deps.configPath, yaml: readConfigFile(deps.configPath) } };
    } catch (err) {
      throw new HttpError(500, 'config_unreadable', `${deps.configPath} cannot be read: ${describeError(err)}`);
    }
  }, { name: 'console config read' });

  /** Apply: checked like `check`, then written over the file (atomically) and reloaded. */
  http.route('PUT', '/console/api/config', async (ctx) => {
    const { yaml } = parseBody(textSchema, await ctx.json());
    if (!deps.configPath) throw new HttpError(409, 'no_config_file', 'this gateway was started without a configuration file, so there is nothing to write; start it with --config FILE');
    if (yaml.includes(REDACTED)) throw new HttpError(400, 'secret_hidden', `a secret shows as "${REDACTED}": write it as { env: VARIABLE } (or type it again) before applying`, 'yaml');
    const r = await checkConfigText(yaml);
    if (!r.ok || !r.config) return { status: 400, json: { error: { code: 'config_invalid', message: `the configuration has ${r.problems.length} problem(s); nothing was written`, field: 'yaml' }, problems: r.problems } };
    writeConfigFile(deps.configPath, yaml);
    try {
      const result = await deps.reload(r.config);
      return { json: { written: deps.configPath, changed: result.changed, restart_required: result.restartRequired, restarted_sources: result.restartedSources } };
    } catch (err) {
      return { status: 409, json: { error: { code: 'reload_refused', message: `written to ${deps.configPath}, but the running gateway refused it: ${describeError(err)}` } } };
    }
  }, { name: 'console config apply' });

  return {
    hub,
    close() {
      clearInterval(backlogTimer);
      deps.fleet?.stop();
      hub.close();
    },
  };
}
