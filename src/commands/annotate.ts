import { request } from 'undici';
import { newExternalId } from '../annotations/external-id.js';
import { requestBody } from '../annotations/model.js';
import { validateAnnotationInput } from '../annotations/validate.js';
import { loadConfigFile, type LoadedConfig } from '../config/load.js';
import { systemClock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { createMetrics } from '../core/metrics.js';
import { RequestBudget } from '../uplink/budget.js';
import { annotationResponseSchema, describeResult, TrackingClient } from '../uplink/client.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage:
  edge-gateway annotate instant --text TEXT [--at TIME] [options]
  edge-gateway annotate range   --text TEXT --start TIME --end TIME [options]
  edge-gateway annotate start   --machine KEY [--reason R] [--text T] [--at TIME]
  edge-gateway annotate stop    --machine KEY [--reason R] [--text T] [--at TIME]
  edge-gateway annotate cancel  --machine KEY
  edge-gateway annotate list    [--state queued|delivered|refused] [--machine KEY] [--limit N]

Creates an operator annotation (interface §2.3). By default it goes through the running gateway's
local API: checked at once, queued in the gateway's durable outbox, delivered when the tracking
service is reachable (the exit code says it was queued; add --wait to wait for the delivery).

Where to:
  -u, --url URL            the gateway's HTTP server (default http://127.0.0.1:8080)
  -c, --config FILE        take http.host, http.port and http.api_token from this configuration
      --token TOKEN        bearer token for writes (default $GATEWAY_API_TOKEN, else http.api_token of --config)
      --direct             send straight to the tracking service with the credentials of --config, without
                           a running gateway and without the outbox: one attempt, 409 counts as delivered

Annotation:
  -t, --text TEXT          the text (trimmed, not blank, at most 5000 characters)
      --at TIME            instant: when; start/stop: when instead of now (default now)
      --start TIME         range: start
      --end TIME           range: end (after the start)
      --variable ID        a machine variable (mvr_...) to attach; repeat for more
  -m, --machine KEY        a configured machine (annotations.machines); its variables when --variable is not given
      --reason R           start/stop: the downtime reason
      --site-id ID         site by id (default annotations.site)
      --site-external-id X site by external id
      --external-id ID     your own id (1-100 of A-Z a-z 0-9 - _); repeating a command with it is safe
      --wait SECONDS       wait until the service has it (exit 0) or refused it (exit 1)
      --state S, --limit N list filters
      --json               print JSON
  -h, --help               show this help

TIME: ISO 8601 with an explicit offset (2026-03-01T08:15:00Z, 2026-03-01T09:15:00+01:00), epoch
milliseconds, or "now".

Exit codes: 0 done; 1 the gateway or service could not be reached, refused it, or --wait timed out;
2 a mistake in the command (the message names the field).`;

const FLAGS = {
  url: { type: 'string', short: 'u' },
  config: { type: 'string', short: 'c' },
  token: { type: 'string' },
  direct: { type: 'boolean' },
  text: { type: 'string', short: 't' },
  at: { type: 'string' },
  start: { type: 'string' },
  end: { type: 'string' },
  variable: { type: 'string', multiple: true },
  machine: { type: 'string', short: 'm' },
  reason: { type: 'string' },
  'site-id': { type: 'string' },
  'site-external-id': { type: 'string' },
  'external-id': { type: 'string' },
  wait: { type: 'string' },
  state: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
} as const;

export interface CommandIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

const processIo: CommandIo = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

type Values = { [K in keyof typeof FLAGS]?: (typeof FLAGS)[K] extends { multiple: true } ? string[] : (typeof FLAGS)[K] extends { type: 'boolean' } ? boolean : string };

/** `edge-gateway annotate ...`; `io` lets tests capture the output. */
export async function annotateCommand(argv: string[], io: CommandIo = processIo): Promise<number> {
  const parsed = parseFlags(argv, FLAGS, HELP);
  if (!parsed) return 0;
  const v = parsed.values as Values;
  const [sub, ...extra] = parsed.positionals;
  if (!sub) throw new UsageError(`say what to do: instant, range, start, stop, cancel or list\n\n${HELP}`);
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}" (quote a text with spaces: --text "...")`);
  // Only --direct talks to the service and needs its credentials; otherwise the file gives the
  // local API's address (and http.api_token when it can be read here).
  const loaded = v.config ? loadConfigFile(v.config, { requireSecrets: Boolean(v.direct) }) : null;

  if (v.direct) {
    if (!loaded) throw new UsageError('--direct needs --config FILE (the service address and credentials)');
    if (sub !== 'instant' && sub !== 'range') throw new UsageError(`--direct sends instant or range annotations only (start/stop/list need the running gateway)`);
    return direct(sub, v, loaded, io);
  }

  const api = new LocalApi(baseUrl(v, loaded), token(v, loaded));
  switch (sub) {
    case 'instant':
    case 'range': {
      const body = annotationBody(sub, v);
      const r = await api.call('POST', '/api/annotations', body);
      if (r.status !== 200 && r.status !== 201) return failure(r, io);
      const a = (r.body as { annotation: Record<string, unknown> }).annotation;
      printEntry(a, v.json, io, r.status === 200 ? 'already queued' : 'queued');
      return v.wait !== undefined ? waitFor(api, String(a.external_id), v, io) : 0;
    }
    case 'start':
    case 'stop':
    case 'cancel': {
      if (!v.machine) throw new UsageError(`${sub} needs --machine KEY`);
      const body: Record<string, unknown> = {};
      if (sub !== 'cancel') {
        if (v.reason !== undefined) body.reason = v.reason;
        if (v.text !== undefined) body.text = v.text;
        if (v.at !== undefined) body.at = timeArg(v.at);
      }
      const r = await api.call('POST', `/api/machines/${encodeURIComponent(v.machine)}/downtime/${sub}`, body);
      if (r.status < 200 || r.status >= 300) return failure(r, io);
      const b = r.body as { downtime?: Record<string, unknown>; annotation?: Record<string, unknown>; cancelled?: Record<string, unknown> };
      if (v.json) io.out(`${JSON.stringify(b, null, 2)}\n`);
      else if (sub === 'start') io.out(`downtime of ${v.machine} started at ${b.downtime?.started_at}\n`);
      else if (sub === 'cancel') io.out(`downtime of ${v.machine} (since ${b.cancelled?.started_at}) discarded; nothing is sent\n`);
      if (sub === 'stop') {
        if (!v.json) printEntry(b.annotation!, false, io, 'downtime stopped; range annotation queued');
        return v.wait !== undefined ? waitFor(api, String(b.annotation!.external_id), v, io) : 0;
      }
      return 0;
    }
    case 'list': {
      const q = new URLSearchParams();
      if (v.state) q.set('state', v.state);
      if (v.machine) q.set('machine', v.machine);
      if (v.limit) q.set('limit', v.limit);
      const qs = q.toString();
      const r = await api.call('GET', `/api/annotations${qs ? `?${qs}` : ''}`);
      if (r.status !== 200) return failure(r, io);
      const b = r.body as { annotations: Array<Record<string, unknown>>; counts: Record<string, number> };
      if (v.json) {
        io.out(`${JSON.stringify(b, null, 2)}\n`);
        return 0;
      }
      io.out(`outbox: ${b.counts.queued} queued, ${b.counts.delivered} delivered, ${b.counts.refused} refused\n`);
      for (const a of b.annotations) io.out(`${line(a)}\n`);
      return 0;
    }
    default:
      throw new UsageError(`unknown action "${sub}": instant, range, start, stop, cancel or list\n\n${HELP}`);
  }
}

// ---------------------------------------------------------------- building the request

function timeArg(s: string): string | number {
  if (s.trim().toLowerCase() === 'now') return Date.now();
  if (/^\d+$/.test(s.trim())) return Number(s.trim());
  return s;
}

function annotationBody(type: 'instant' | 'range', v: Values): Record<string, unknown> {
  const body: Record<string, unknown> = { type };
  if (v.text === undefined) throw new UsageError('--text TEXT is required');
  body.text = v.text;
  if (type === 'instant') {
    body.occurred_at = timeArg(v.at ?? 'now');
    if (v.start !== undefined || v.end !== undefined) throw new UsageError('--start/--end are for range annotations; an instant takes --at');
  } else {
    if (v.at !== undefined) throw new UsageError('--at is for instant annotations; a range takes --start and --end');
    if (v.start === undefined) throw new UsageError('--start TIME is required for a range');
    if (v.end === undefined) throw new UsageError('--end TIME is required for a range');
    body.started_at = timeArg(v.start);
    body.ended_at = timeArg(v.end);
  }
  if (v.variable !== undefined) body.machine_variables = v.variable.map((id) => ({ id }));
  else if (v.machine === undefined) body.machine_variables = [];
  if (v.machine !== undefined) body.machine = v.machine;
  if (v['site-id'] !== undefined || v['site-external-id'] !== undefined) {
    body.site = { ...(v['site-id'] !== undefined ? { id: v['site-id'] } : {}), ...(v['site-external-id'] !== undefined ? { external_id: v['site-external-id'] } : {}) };
  }
  if (v['external-id'] !== undefined) body.external_id = v['external-id'];
  return body;
}

// ---------------------------------------------------------------- talking to the gateway

function baseUrl(v: Values, loaded: LoadedConfig | null): string {
  if (v.url) return v.url.replace(/\/+$/, '');
  if (loaded) {
    const c = loaded.config.http;
    const host = c.host === '0.0.0.0' ? '127.0.0.1' : c.host === '::' ? '::1' : c.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${c.port}`;
  }
  return 'http://127.0.0.1:8080';
}

function token(v: Values, loaded: LoadedConfig | null): string | undefined {
  return v.token ?? (process.env.GATEWAY_API_TOKEN || undefined) ?? (loaded?.config.http.api_token?.reveal() || undefined);
}

interface Answer {
  status: number;
  body: unknown;
  url: string;
}

class LocalApi {
  constructor(
    readonly base: string,
    private readonly bearer: string | undefined,
  ) {}

  async call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<Answer> {
    const url = `${this.base}${path}`;
    const headers: Record<string, string> = { 'x-annotation-origin': 'cli', accept: 'application/json' };
    if (this.bearer) headers.authorization = `Bearer ${this.bearer}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      const res = await request(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), headersTimeout: 10_000, bodyTimeout: 10_000 });
      const text = await res.body.text();
      let parsed: unknown;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = text;
      }
      return { status: res.statusCode, body: parsed, url };
    } catch (err) {
      return { status: 0, body: { error: { code: 'unreachable', message: `no gateway answers at ${this.base} (${describeError(err)}). Is it running with http.enabled, and is the address right (--url / --config)?` } }, url };
    }
  }
}

function failure(r: Answer, io: CommandIo): number {
  const e = (r.body as { error?: { code?: string; message?: string; field?: string; problems?: Array<{ field: string; message: string }> } } | undefined)?.error;
  if (r.status === 0) {
    io.err(`edge-gateway annotate: ${e?.message}\n`);
    return 1;
  }
  if (r.status === 404 && e?.code === 'not_found' && !e.field) {
    io.err(`edge-gateway annotate: ${r.url} does not exist: the gateway has no annotations section (annotations: in its config)\n`);
    return 1;
  }
  const problems = e?.problems && e.problems.length > 0 ? e.problems.map((p) => `${p.field}: ${p.message}`) : [e?.message ?? `HTTP ${r.status}`];
  io.err(`edge-gateway annotate: ${problems.join('\n  ')}\n`);
  if (r.status === 401) io.err('  (give the token with --token, $GATEWAY_API_TOKEN, or --config with http.api_token)\n');
  // 4xx about the request itself (a field, an unknown machine, a downtime state) is a usage problem.
  return r.status === 400 || r.status === 404 || r.status === 409 ? 2 : 1;
}

function line(a: Record<string, unknown>): string {
  const when = a.type === 'range' ? `${a.started_at} .. ${a.ended_at}` : String(a.occurred_at);
  const state = a.state === 'refused' ? `refused: ${a.refusal}` : a.state === 'queued' ? `queued (${a.attempts} attempts${a.last_error ? `, last: ${a.last_error}` : ''})` : 'delivered';
  return `${String(a.external_id).padEnd(48)} ${String(a.type).padEnd(7)} ${when}  ${state}  ${JSON.stringify(a.text)}`;
}

function printEntry(a: Record<string, unknown>, json: boolean | undefined, io: CommandIo, what: string): void {
  if (json) io.out(`${JSON.stringify({ annotation: a }, null, 2)}\n`);
  else io.out(`${what}: ${a.external_id} (${a.type}, ${a.state})\n`);
}

async function waitFor(api: LocalApi, externalId: string, v: Values, io: CommandIo): Promise<number> {
  const seconds = Number(v.wait);
  if (!Number.isFinite(seconds) || seconds < 0) throw new UsageError(`--wait: "${v.wait}" is not a number of seconds`);
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const r = await api.call('GET', `/api/annotations/${encodeURIComponent(externalId)}`);
    if (r.status === 200) {
      const a = (r.body as { annotation: Record<string, unknown> }).annotation;
      if (a.state === 'delivered') {
        if (!v.json) io.out(`delivered: ${externalId}${a.service_id ? ` (${a.service_id})` : ''}\n`);
        return 0;
      }
      if (a.state === 'refused') {
        io.err(`edge-gateway annotate: the tracking service refused ${externalId}: ${a.refusal}\n`);
        return 1;
      }
    }
    if (Date.now() >= deadline) {
      io.err(`edge-gateway annotate: ${externalId} is still queued after ${seconds} s; the gateway keeps it and delivers it when the service is reachable\n`);
      return 1;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

// ---------------------------------------------------------------- --direct

async function direct(type: 'instant' | 'range', v: Values, loaded: LoadedConfig, io: CommandIo): Promise<number> {
  const config = loaded.config;
  const body = annotationBody(type, v);
  const cfg = config.annotations;
  if (!cfg && body.site === undefined) throw new UsageError('site: the config has no annotations.site; give --site-id or --site-external-id');
  const machines = new Map((cfg?.machines ?? []).map((m) => [m.key, { machineVariables: m.machine_variables }]));
  const checked = validateAnnotationInput(body, { defaultSite: cfg?.site ?? { id: 'ste_unset' }, machines });
  if (!checked.ok) {
    io.err(`edge-gateway annotate: ${checked.problems.map((p) => `${p.field}: ${p.message}`).join('\n  ')}\n`);
    return 2;
  }
  const externalId = checked.value.externalId ?? newExternalId(config.gateway.name);
  const annotation = { ...checked.value, externalId, origin: 'cli' as const };
  const metrics = createMetrics();
  const budget = new RequestBudget(config.uplink.requests_per_minute, systemClock, metrics);
  const client = new TrackingClient({ service: config.service, budget, metrics, logger: silentLogger(), clock: systemClock, connections: 1 });
  try {
    const r = await client.postAnnotation(requestBody(annotation));
    if (r.ok) {
      const parsed = annotationResponseSchema.safeParse(r.body);
      if (v.json) io.out(`${JSON.stringify(r.body, null, 2)}\n`);
      else io.out(`delivered: ${externalId}${parsed.success ? ` (${parsed.data.id})` : ''}\n`);
      return 0;
    }
    if (r.status === 409) {
      io.out(`already delivered: ${externalId} (409: the service has this external_id)\n`);
      return 0;
    }
    io.err(`edge-gateway annotate: the tracking service ${r.status >= 400 && r.status < 500 ? 'refused' : 'did not take'} the annotation: ${describeResult(r)}\n`);
    if (r.status === 0 || r.status >= 500 || r.status === 429) {
      // A timeout may hide a stored annotation; the same external_id makes the retry safe (409).
      io.err(`  run the same command again${v['external-id'] ? '' : ` with --external-id ${externalId}`}: if the first attempt did arrive, the service answers 409 and nothing is duplicated\n`);
    }
    return 1;
  } finally {
    budget.close();
    await client.close();
  }
}
