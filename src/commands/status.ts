import { readFileSync } from 'node:fs';
import { request } from 'undici';
import { parse as parseYaml } from 'yaml';
import { describeError } from '../core/errors.js';
import { resolveSecret, secretRefSchema } from '../config/secrets.js';
import { formatDuration, statusLine } from '../status/line.js';
import type { GatewayStatus } from '../status/model.js';
import type { SourceStatus } from '../core/source.js';
import { count as n, list, num, rec, str } from '../core/untyped.js';
import { pluginOf } from '../sources/plugins.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway status [--url URL | --config FILE] [--json] [--watch SECONDS]

Shows the status of a running gateway (from its /status endpoint): each source's state and read
rate, the buffer (unsent samples, age of the oldest), delivery rates of the sync path and of import
jobs, import jobs in flight, samples set aside, the annotation outbox, and while a large backlog is
being delivered a progress bar with the time left.

Options:
  -u, --url URL        base URL of the gateway's HTTP server (default: from $GATEWAY_CONFIG
                       when set, else http://127.0.0.1:8080)
  -c, --config FILE    read http.host and http.port from this configuration instead
      --token TOKEN    the local API token, when reads need it (default $GATEWAY_API_TOKEN,
                       else http.api_token of --config when it can be read here)
      --json           print the raw JSON of /status
  -w, --watch SECONDS  refresh every SECONDS until Ctrl-C
  -h, --help           show this help

Exit codes: 0 shown, 1 no gateway answers, 2 wrong option or configuration.`;

/** Gap between the two readings a one-shot status takes when the gateway does not report source rates. */
const RATE_SAMPLE_MS = 2_000;

interface Reading {
  status: GatewayStatus;
  /** Monotonic ms when the answer arrived. */
  at: number;
}

export async function statusCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { url: { type: 'string', short: 'u' }, config: { type: 'string', short: 'c' }, json: { type: 'boolean' }, watch: { type: 'string', short: 'w' }, token: { type: 'string' } }, HELP);
  if (!parsed) return 0;
  let base = parsed.values.url ?? 'http://127.0.0.1:8080';
  // Inside the container GATEWAY_CONFIG names the running gateway's file: use its http.port.
  const configFile = parsed.values.config ?? (parsed.values.url ? undefined : process.env.GATEWAY_CONFIG);
  if (configFile) base = statusUrlFromConfig(configFile);
  const token = parsed.values.token ?? (process.env.GATEWAY_API_TOKEN || undefined) ?? (configFile ? tokenFromConfig(configFile) : undefined);
  base = base.replace(/\/+$/, '');
  const watch = parsed.values.watch === undefined ? 0 : Number(parsed.values.watch);
  if (!Number.isFinite(watch) || watch < 0) throw new UsageError(`--watch: "${parsed.values.watch}" is not a number of seconds`);
  let previous: Reading | null = null;
  for (;;) {
    let reading = await fetchStatus(base, token);
    if (!reading) return 1;
    if (parsed.values.json) {
      process.stdout.write(`${JSON.stringify(reading.status, null, 2)}\n`);
    } else {
      // Rates need two readings when the gateway does not measure them itself.
      if (!reading.status.source_rates && reading.status.sources.length > 0 && !previous && watch <= 0) {
        await new Promise((r) => setTimeout(r, RATE_SAMPLE_MS));
        const second = await fetchStatus(base, token);
        if (!second) return 1;
        previous = reading;
        reading = second;
      }
      const rates = reading.status.source_rates ?? (previous ? measureRates(previous, reading) : undefined);
      if (watch > 0 && process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
      process.stdout.write(renderStatus(reading.status, { sourceRates: rates }));
    }
    if (watch <= 0) return 0;
    previous = reading;
    await new Promise((r) => setTimeout(r, watch * 1000));
  }
}

/**
 * The gateway's HTTP address from its config file. Only `http.host` and `http.port` are read, not
 * the whole configuration: asking for status needs none of the gateway's secrets, so it works from
 * a shell that does not have the gateway's environment.
 */
export function statusUrlFromConfig(file: string): string {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UsageError(`--config: ${file} cannot be read (${describeError(err)})`);
  }
  const http = rec(rec(raw).http);
  if (http.enabled === false) throw new UsageError(`--config: http.enabled is false in ${file}, so that gateway serves no /status`);
  const configured = typeof http.host === 'string' && http.host !== '' ? http.host : '127.0.0.1';
  const port = http.port ?? 8080;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new UsageError(`--config: http.port ${JSON.stringify(port)} in ${file} is not a fixed port to ask; give --url instead`);
  }
  // A gateway listening on every interface answers on loopback too.
  const host = configured === '0.0.0.0' || configured === '::' ? '127.0.0.1' : configured;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** http.api_token of the config file when it resolves here (env or file); undefined otherwise. */
export function tokenFromConfig(file: string): string | undefined {
  try {
    const ref = rec(rec(parseYaml(readFileSync(file, 'utf8'))).http).api_token;
    const parsed = secretRefSchema.safeParse(ref);
    if (!parsed.success) return undefined;
    const r = resolveSecret(parsed.data);
    return r.ok ? r.secret.reveal() : undefined;
  } catch {
    return undefined;
  }
}

async function fetchStatus(base: string, token?: string): Promise<Reading | null> {
  try {
    const res = await request(`${base}/status`, { headersTimeout: 5_000, bodyTimeout: 5_000, headers: token ? { authorization: `Bearer ${token}` } : {} });
    if (res.statusCode !== 200) {
      await res.body.dump();
      const hint = res.statusCode === 401 ? ` (${token ? 'the token was refused' : 'this gateway needs its API token for reads: give --token or $GATEWAY_API_TOKEN'})` : '';
      process.stderr.write(`edge-gateway status: ${base}/status answered HTTP ${res.statusCode}${hint}\n`);
      return null;
    }
    return { status: (await res.body.json()) as GatewayStatus, at: performance.now() };
  } catch (err) {
    process.stderr.write(`edge-gateway status: no gateway answers at ${base} (${(err as Error).message}). Is it running, and is http.enabled true?\n`);
    return null;
  }
}

/** Samples/s per source between two readings; a source whose counter went back (restart, reload) is left out. */
export function measureRates(before: Reading, after: Reading): Record<string, number> {
  const seconds = (after.at - before.at) / 1000;
  const out: Record<string, number> = {};
  if (seconds <= 0 || before.status.gateway.pid !== after.status.gateway.pid) return out;
  const earlier = new Map(before.status.sources.map((s) => [s.name, s.samplesRead]));
  for (const s of after.status.sources) {
    const was = earlier.get(s.name);
    if (was !== undefined && s.samplesRead >= was) out[s.name] = (s.samplesRead - was) / seconds;
  }
  return out;
}

const rate = (x: number) => `${x < 10 ? x.toFixed(1) : n(x)}/s`;

/** Short age: 0.4s, 12m, 5h03m, 2d12h. */
function ago(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return '-';
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  if (seconds < 172_800) return formatDuration(seconds);
  return `${Math.floor(seconds / 86_400)}d${Math.floor((seconds % 86_400) / 3_600)}h`;
}

function bytes(x: number): string {
  if (x < 1_000) return `${x} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let v = x / 1_000;
  let i = 0;
  while (v >= 1_000 && i < units.length - 1) {
    v /= 1_000;
    i += 1;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

export function progressBar(fraction: number, width = 30): string {
  const f = Math.max(0, Math.min(1, fraction));
  const full = Math.round(f * width);
  return `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${(f * 100).toFixed(1)}%`;
}


/** One line of protocol detail (nodes, devices, broker session), from what each source's status() reports. */
function sourceDetail(src: SourceStatus): string | null {
  return pluginOf(src.kind)?.statusSummary(rec(src.detail)) ?? null;
}

/** "variables 12: 9 good, 2 stale, 1 bad": the counts that are not zero, worst last (core/quality.ts). */
export function qualityLine(v: SourceStatus['variables']): string | null {
  if (!v || v.total === 0) return null;
  const parts = QUALITY_ORDER.filter((q) => v[q] > 0).map((q) => `${n(v[q])} ${q === 'none' ? 'no value yet' : q}`);
  return `variables ${n(v.total)}: ${parts.join(', ')}`;
}

const QUALITY_ORDER = ['good', 'uncertain', 'none', 'stale', 'bad'] as const;

export interface RenderOptions {
  /** Samples/s per source measured outside the gateway (two readings); the gateway's own `source_rates` win. */
  sourceRates?: Record<string, number>;
  /** Wall-clock ms "now" for ages (tests). */
  now?: number;
}

/**
 * The UPLINK section's first lines: the state in the one vocabulary (status/uplink-state.ts), the
 * link and the pace, the outage in progress or the last one. An older gateway without `state`
 * shows its link condition.
 */
function uplinkLines(u: GatewayStatus['uplink'], now: number): string[] {
  const out: string[] = [];
  const st = u.state as GatewayStatus['uplink']['state'] | undefined;
  out.push(`  ${st ? st.text : u.condition}${!st && u.reason ? ` (${u.reason})` : ''}`);
  const link = `${u.condition}${u.reason ? ` (${u.reason})` : ''}${u.resume_in_ms > 0 ? `, next attempt in ${formatDuration(u.resume_in_ms / 1000)}` : ''}`;
  const rate = u.rate as GatewayStatus['uplink']['rate'] | undefined;
  const pace = u.pace_per_minute === undefined ? '' : `; pace ${n(u.pace_per_minute)}/min${rate?.found_per_minute != null ? ` (limit found ${n(rate.found_per_minute)}/min` + `, ${n(rate.rate_limited_total)} × 429)` : ''}`;
  out.push(`  link    ${link}; ${n(u.requests_last_minute)} requests in the last minute, budget ${n(u.budget_per_minute)}${pace}`);
  const o = u.outage as GatewayStatus['uplink']['outage'] | undefined;
  if (o) {
    const since = `unreachable since ${o.since}${o.until ? ` until ${o.until} (${formatDuration((Date.parse(o.until) - Date.parse(o.since)) / 1000)})` : ` (${formatDuration(Math.max(0, now - Date.parse(o.since)) / 1000)})`}`;
    const during = `backlog up to ${n(o.backlog_peak)}, oldest ${o.oldest_age_peak_s === null ? '-' : `${ago(o.oldest_age_peak_s)} old`}`;
    const after = o.state === 'down' ? '' : o.state === 'catching_up' ? '; catching up' : `; caught up ${formatDuration(o.catch_up_s ?? 0)} after`;
    out.push(`  outage  ${o.state === 'down' ? '' : 'last: '}${since}: ${during}${after}`);
  }
  return out;
}

/** Human-readable status for operators. */
export function renderStatus(s: GatewayStatus, options: RenderOptions = {}): string {
  const now = options.now ?? Date.now();
  const out: string[] = [];
  const cfg = s.config as GatewayStatus['config'] | undefined;
  out.push(`${s.gateway.name} ${s.gateway.version}, up ${formatDuration(s.gateway.uptime_s)} (pid ${s.gateway.pid})${cfg?.path ? `, config ${cfg.path}` : ''}`);
  if (cfg?.last_reload?.outcome === 'refused') out.push(`  last config reload REFUSED at ${cfg.last_reload.at}: ${(cfg.last_reload.problems ?? []).join('; ')}`);

  out.push('');
  out.push('SOURCES');
  if (s.sources.length === 0) out.push('  (none configured)');
  else {
    const rows = s.sources.map((src) => {
      const r = s.source_rates?.[src.name] ?? options.sourceRates?.[src.name];
      const refused = Object.values(src.samplesRefused).reduce((a, b) => a + b, 0);
      return {
        name: src.name,
        kind: src.kind,
        state: `${src.state} ${formatDuration(Math.max(0, (now - src.since) / 1000))}`,
        rate: r === undefined ? '-' : rate(r),
        read: n(src.samplesRead),
        refused: n(refused),
        last: src.lastSampleAt === null ? 'never' : `${ago(Math.max(0, (now - src.lastSampleAt) / 1000))} ago`,
      };
    });
    const head = { name: 'NAME', kind: 'KIND', state: 'STATE', rate: 'RATE', read: 'READ', refused: 'REFUSED', last: 'LAST SAMPLE' };
    const keys = Object.keys(head) as Array<keyof typeof head>;
    const width = Object.fromEntries(keys.map((k) => [k, Math.max(head[k].length, ...rows.map((r) => r[k].length))])) as Record<keyof typeof head, number>;
    const right = new Set<keyof typeof head>(['rate', 'read', 'refused']);
    const line = (r: typeof head) => `  ${keys.map((k) => (right.has(k) ? r[k].padStart(width[k]) : r[k].padEnd(width[k]))).join('  ')}`.trimEnd();
    out.push(line(head));
    s.sources.forEach((src, i) => {
      out.push(line(rows[i]));
      const indent = ' '.repeat(4);
      const detail = sourceDetail(src);
      if (detail) out.push(`${indent}${detail}`);
      const quality = qualityLine(src.variables);
      if (quality) out.push(`${indent}${quality}`);
      const reasons = Object.entries(src.samplesRefused).filter(([, v]) => v > 0);
      if (reasons.length) out.push(`${indent}refused: ${reasons.map(([k, v]) => `${k} ${n(v)}`).join(', ')}`);
      // An error from before the source last connected is history, not a current problem.
      const e = src.lastError;
      if (e && (src.state !== 'connected' || e.at >= src.since)) {
        out.push(`${indent}last error ${ago(Math.max(0, (now - e.at) / 1000))} ago: ${e.message.startsWith(e.code) ? e.message : `${e.code}: ${e.message}`}`);
      }
    });
  }

  out.push('');
  out.push('BUFFER');
  const b = s.buffer;
  out.push(`  unsent ${n(b.samples)} samples, oldest ${b.oldest_unsent_age_s === null ? '-' : `${ago(b.oldest_unsent_age_s)} old`}; ${bytes(b.used_bytes)} in use of ${bytes(b.max_bytes)}${b.disk_bytes === undefined ? '' : `, ${bytes(b.disk_bytes)} on disk`}${b.writable ? '' : `; NOT WRITABLE (${b.last_write_error?.code ?? 'unknown'})`}`);
  out.push(`  committed ${n(b.committed_total)}, dropped ${n(b.dropped_total)}${b.full_episode ? ` (full now: ${b.full_episode.policy}, ${n(b.full_episode.samplesLost)} lost)` : ''}, set aside ${n(s.set_aside.samples)}${s.set_aside.samples > 0 ? ' (edge-gateway set-aside list)' : ''}`);
  if (b.recovered_from) out.push(`  a damaged buffer was moved aside at start: ${b.recovered_from}`);
  if (b.live_rows !== undefined) {
    // Buffer v2 (older gateways do not report these).
    const cap = b.capacity_s === null ? 'capacity left: - (nothing ingested)' : `capacity left ${b.capacity_s >= 172_800 ? `${(b.capacity_s / 86_400).toFixed(1)} days` : formatDuration(b.capacity_s)} at the current ingest rate`;
    out.push(`  ${n(b.live_rows)} live rows, ${n(b.sealed_samples)} sealed in ${n(b.chunks)} chunks${b.compression_ratio === null ? '' : ` (${b.compression_ratio.toFixed(1)}:1)`}, ${b.bytes_per_sample === null ? '-' : b.bytes_per_sample.toFixed(2)} bytes/sample; ${cap}`);
    if (b.oldest_unsent_age_s !== null && b.oldest_unsent_age_s > b.max_unsent_age_s) out.push(`  oldest unsent sample is older than uplink.max_unsent_age (${formatDuration(b.max_unsent_age_s)}): the sync path alternates oldest-first batches`);
  }

  out.push('');
  out.push('UPLINK');
  const u = s.uplink;
  out.push(...uplinkLines(u, now));
  const share = s.fleet?.budget_sharing;
  if (s.fleet?.broker.duplicate_name) out.push(`  fleet   DUPLICATE NAME: ${s.fleet.broker.duplicate_name}; give each gateway its own gateway.name`);
  if (share) out.push(`  fleet   share ${n(share.share_per_minute)} of ${n(share.total_per_minute)}/min for group ${share.group} (${share.members.length} gateway${share.members.length === 1 ? '' : 's'}${share.ignored_peers ? `, ${n(share.ignored_peers)} more not counted above max_gateways ${share.max_gateways}` : ''}${share.pace_per_minute !== undefined && share.pace_per_minute < share.share_per_minute ? `, paced at ${n(share.pace_per_minute)}/min after 429s` : ''}${share.broker_connected ? '' : ', plant broker unreachable: shares frozen'})`);
  out.push(`  sync    ${rate(u.sync.rate_per_s)}, delivered ${n(u.sync.delivered_total)}, ${u.sync.inflight_batches} batch${u.sync.inflight_batches === 1 ? '' : 'es'} in flight, freshest value ${u.freshest_delivered_age_s === null ? '-' : `${ago(u.freshest_delivered_age_s)} old`}`);
  const bf = s.backfill;
  if (bf.enabled) {
    out.push(`  import  ${rate(bf.rate_per_s)}, delivered ${n(bf.delivered_total)}, ${bf.jobs_in_flight} job${bf.jobs_in_flight === 1 ? '' : 's'} in flight, failed ${n(bf.failed_total)}`);
    for (const j of bf.jobs) out.push(`    #${j.ledger_id} ${j.state}${j.job_id ? ` ${j.job_id}` : ''}${j.items ? `, ${n(j.items)} samples` : ''}${j.bytes ? `, ${bytes(j.bytes)}` : ''}${j.attempts > 1 ? `, attempt ${j.attempts}` : ''}`);
  } else {
    out.push('  import  off (uplink.backfill.enabled: false)');
  }
  const d = s.delivery as GatewayStatus['delivery'] | undefined;
  const eta = d?.state === 'growing' ? `none: growing (${d.no_estimate_because})` : s.backlog_eta_s === null ? `unknown (${d?.no_estimate_because ?? 'the backlog is not shrinking at the current rates'})` : formatDuration(s.backlog_eta_s);
  if (bf.backlog_at_start > 0 && b.samples > 0) {
    // A catch-up through import jobs is under way: progress against the backlog it started with.
    const start = Math.max(bf.backlog_at_start, b.samples);
    out.push(`  catch-up ${progressBar(1 - b.samples / start)} ${n(start - b.samples)} of ${n(start)} samples delivered, ${n(b.samples)} left, ETA ${eta}`);
  } else if (b.samples > 0) {
    out.push(`  backlog ${n(b.samples)} samples, ETA ${eta}`);
  }

  const a = s.annotations;
  if (a) {
    out.push('');
    out.push('ANNOTATIONS');
    const oldest = num(a.oldest_queued_age_s);
    out.push(`  outbox ${n(num(a.queued) ?? 0)} queued${oldest !== null ? ` (oldest ${ago(oldest)})` : ''}, delivered ${n(num(a.delivered) ?? 0)}, refused ${n(num(a.refused) ?? 0)}`);
    const open = list(a.open_downtimes).map(rec);
    if (open.length) out.push(`  open downtimes: ${open.map((d) => `${str(d.machine)} since ${str(d.started_at)}${d.reason ? ` (${str(d.reason)})` : ''}`).join(', ')}`);
    const refusal = a.last_refusal ? rec(a.last_refusal) : null;
    if (refusal) out.push(`  last refusal at ${str(refusal.at)}: ${str(refusal.message)}`);
    const trigger = a.mqtt_trigger ? rec(a.mqtt_trigger) : null;
    if (trigger && typeof trigger.connected === 'boolean') out.push(`  MQTT trigger ${trigger.connected ? 'connected' : 'NOT connected'}`);
  }

  // Issue 14: intervals without data, and whether history filled them (edge-gateway gaps list).
  const g = s.gaps;
  if (g && g.recent.length > 0) {
    out.push('');
    out.push('GAPS');
    out.push(`  ${g.open} open; newest: ${g.recent.slice(0, 3).map((x) => `${x.source} ${x.reason} ${x.to === null ? `since ${new Date(x.from).toISOString()}` : `${formatDuration((x.to - x.from) / 1000)}`}, filled ${x.filled}`).join('; ')} (edge-gateway gaps list)`);
  }

  out.push('');
  out.push(statusLine(s));
  return `${out.join('\n')}\n`;
}
