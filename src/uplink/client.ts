import { Agent, request, type Dispatcher } from 'undici';
import { redact } from '../core/redact.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Clock } from '../core/clock.js';
import { describeError, errorCode } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import type { ServiceConfig } from './config.js';
import { ApiKeyAuth, ClientCredentialsAuth, TokenError, type CredentialProvider } from './auth.js';
import type { Priority, RequestBudget } from './budget.js';
import { parseRetryAfter, type Outcome } from './retry-policy.js';
import { uploadMultipartFile } from './multipart-upload.js';

/** The organisation header (§5.6; the vendor's header renamed as in CONTRACT.md). */
export const ORGANISATION_HEADER = 'Service-Organisation-Id';
/** The request id header every response carries (CONTRACT.md, [V]). */
export const REQUEST_ID_HEADER = 'service-request-id';
const USER_AGENT = 'edge-gateway/0.1';
/** 429s a catalog walk waits out before it gives up (each one pauses the whole budget for 1-30 s, §8). */
const MAX_PAGE_RATE_LIMITED = 20;
/** Largest response body read; the service's answers are small. */
const MAX_RESPONSE_BYTES = 4_000_000;

/** Endpoint labels used in metrics and logs. */
export type Endpoint = 'batch' | 'import_upload' | 'import_status' | 'annotation' | 'machines' | 'machine_variables';

/** The result of one call, success or not. Never thrown: the caller decides with `decide()`. */
export interface ApiResult<T = unknown> {
  /** HTTP status; 0 when no response arrived (network error, timeout, no token). */
  status: number;
  ok: boolean;
  body: T | undefined;
  /** Parsed error envelope, either `{code, message}` or `{error: {type, code, message, request_id}}` (§7). */
  error?: { code: string; message: string; type?: string };
  requestId?: string;
  retryAfterMs?: number;
  /** Set when no HTTP response arrived. */
  networkError?: { code: string; message: string };
  /** True when this 401 came after the credential had already been renewed once for this call. */
  afterTokenRenewal?: boolean;
  durationMs: number;
}

/** Maps a result to the retry policy's input. */
export function outcomeOf(r: ApiResult): Outcome {
  if (r.status === 0) return { kind: 'network', code: r.networkError?.code ?? 'UNKNOWN' };
  return { kind: 'response', status: r.status, retryAfterMs: r.retryAfterMs, afterTokenRenewal: r.afterTokenRenewal };
}

/** One-line description of a failed result, with the request id for support (CONTRACT.md). */
export function describeResult(r: ApiResult): string {
  if (r.status === 0) return `no response (${r.networkError?.code ?? 'error'}: ${r.networkError?.message ?? ''})`;
  const parts = [`HTTP ${r.status}`];
  if (r.error) parts.push(`${r.error.code}: ${r.error.message}`);
  if (r.requestId) parts.push(`request id ${r.requestId}`);
  return parts.join(', ');
}

const errorEnvelope = z.union([
  z.object({ error: z.object({ type: z.string().optional(), code: z.string(), message: z.string().optional(), request_id: z.string().optional() }) }),
  z.object({ code: z.string(), message: z.string().optional() }),
]);

/** Import job, interface §2.9. */
export const importJobSchema = z.object({
  job_id: z.string().min(1),
  status: z.enum(['accepted', 'processing', 'finished', 'failed']),
  items_received: z.number().int().nonnegative(),
  created_at: z.string(),
  items_accepted: z.number().int().nonnegative().nullable().optional(),
  items_rejected: z.number().int().nonnegative().nullable().optional(),
  errors: z.array(z.unknown()).nullable().optional(),
  finished_at: z.string().nullable().optional(),
});
export type ImportJob = z.infer<typeof importJobSchema>;

/** Annotation response, interface §2.3 (the fields the gateway reads). */
export const annotationResponseSchema = z.object({ id: z.string().min(1), external_id: z.string().nullable() }).passthrough();

/** A page of a list endpoint, interface §8. */
export function pageSchema<T extends z.ZodType>(item: T) {
  return z.object({
    data: z.array(item),
    pagination: z.object({ starting_after: z.string().nullable().optional(), limit: z.number(), has_more: z.boolean(), next_cursor: z.string().nullable() }),
  });
}
export const machineSchema = z.object({ id: z.string(), name: z.string(), site: z.object({ id: z.string().nullable(), external_id: z.string().nullable() }) }).passthrough();
export const machineVariableSchema = z
  .object({ id: z.string(), name: z.string().optional(), machine: z.object({ id: z.string() }).passthrough().optional(), site: z.object({ id: z.string().nullable(), external_id: z.string().nullable() }).optional(), unit: z.string().nullable().optional() })
  .passthrough();

export interface ClientOptions {
  service: ServiceConfig;
  budget: RequestBudget;
  metrics: Metrics;
  logger: Logger;
  clock: Clock;
  /** Connections kept to the service (defaults to 8). */
  connections?: number;
}

interface SendOptions {
  endpoint: Endpoint;
  method: 'GET' | 'POST';
  path: string;
  priority: Priority;
  json?: string;
  /** A file to send as multipart part `file`. */
  file?: string;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** The caller already holds a budget slot for the first attempt (reserve()). */
  reserved?: boolean;
}

/**
 * Client of the tracking service (CONTRACT.md). Every call takes a slot from the shared request
 * budget, carries the bearer credential and organisation header (§5.5, §5.6), and comes back as
 * an `ApiResult`; the callers apply the retry policy. A 401 on a cached token renews it once and
 * repeats the call (§5.4).
 */
export class TrackingClient {
  readonly credentials: CredentialProvider;
  private readonly dispatcher: Agent;
  private readonly throttle: LogThrottle;
  private readonly base: string;

  constructor(private readonly o: ClientOptions) {
    this.base = o.service.base_url;
    this.dispatcher = new Agent({ connections: o.connections ?? 8, keepAliveTimeout: 30_000, connect: { timeout: 10_000 } });
    this.throttle = new LogThrottle(o.logger, 30_000);
    const auth = o.service.auth;
    this.credentials =
      auth.mode === 'client_credentials'
        ? new ClientCredentialsAuth({
            authUrl: o.service.auth_url!,
            clientId: auth.client_id,
            clientSecret: auth.client_secret,
            audience: auth.audience,
            budget: o.budget,
            clock: o.clock,
            dispatcher: this.dispatcher,
            metrics: o.metrics,
            timeoutMs: o.service.request_timeout,
          })
        : new ApiKeyAuth(auth.secondary_api_key ? [auth.api_key, auth.secondary_api_key] : [auth.api_key]);
  }

  /** `POST /machine-data/batch` with a serialized `{"items": [...]}` body (§4.10). */
  /**
   * `POST /machine-data/batch` (§4.5). `reserved`: the caller took the slot with reserve('data')
   * before it chose the rows, so the rows are the newest at the moment the request can go.
   */
  postBatch(body: string, signal?: AbortSignal, reserved = false): Promise<ApiResult> {
    return this.send({ endpoint: 'batch', method: 'POST', path: '/machine-data/batch', priority: 'data', json: body, signal, reserved });
  }

  /**
   * Takes one slot of the request budget now, for a call the caller makes next with `reserved`.
   * Rejects if `signal` aborts first.
   */
  reserve(priority: Priority, signal?: AbortSignal): Promise<void> {
    return this.o.budget.acquire(priority, signal);
  }

  /** `POST /machine-data/import-jobs`, the file streamed from disk as multipart part `file` (§4.10). */
  async uploadImportFile(filePath: string, signal?: AbortSignal, timeoutMs?: number): Promise<ApiResult<ImportJob>> {
    const r = await this.send({
      endpoint: 'import_upload',
      method: 'POST',
      path: '/machine-data/import-jobs',
      priority: 'upload',
      file: filePath,
      timeoutMs,
      signal,
    });
    return this.validated(r, importJobSchema);
  }

  /** `GET /v1/machine-data/import-jobs/{job_id}` — the doubled `v1` is as the interface gives it (§4.7). */
  async getImportJob(jobId: string, signal?: AbortSignal): Promise<ApiResult<ImportJob>> {
    const r = await this.send({ endpoint: 'import_status', method: 'GET', path: `/v1/machine-data/import-jobs/${encodeURIComponent(jobId)}`, priority: 'poll', signal });
    return this.validated(r, importJobSchema);
  }

  /** `POST /machine-data-annotations` (§4.1). */
  postAnnotation(body: unknown, signal?: AbortSignal): Promise<ApiResult> {
    return this.send({ endpoint: 'annotation', method: 'POST', path: '/machine-data-annotations', priority: 'annotation', json: JSON.stringify(body), signal });
  }

  /**
   * One page of `GET /machines` (§4.2) or `GET /machine-variables` (§4.10). `priority` in the
   * request budget: 'annotation' (the annotations' site lookup) unless a caller reads in the background.
   */
  async listPage(kind: 'machines' | 'machine_variables', query: { limit?: number; starting_after?: string; site_id?: string } = {}, signal?: AbortSignal, priority: Priority = 'annotation') {
    const params = new URLSearchParams();
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    if (query.starting_after) params.set('starting_after', query.starting_after);
    if (query.site_id) params.set('site_id', query.site_id);
    const path = kind === 'machines' ? '/machines' : '/machine-variables';
    const qs = params.toString();
    const r = await this.send({ endpoint: kind, method: 'GET', path: qs ? `${path}?${qs}` : path, priority, signal });
    return this.validated(r, pageSchema(kind === 'machines' ? machineSchema : machineVariableSchema));
  }

  /** Walks every page of a list (§8 pagination) and returns all records; throws on a failed page. */
  async listAll(kind: 'machines' | 'machine_variables', query: { site_id?: string } = {}, signal?: AbortSignal): Promise<Array<Record<string, unknown> & { id: string }>> {
    const out: Array<Record<string, unknown> & { id: string }> = [];
    let cursor: string | undefined;
    for (let page = 0, limited = 0; page < 100_000; page++) {
      const r = await this.listPage(kind, { limit: 50, starting_after: cursor, site_id: query.site_id }, signal);
      // A 429 paused the budget (rate-finder.ts): the same page again waits out the pause.
      if (r.status === 429 && limited++ < MAX_PAGE_RATE_LIMITED && !signal?.aborted) {
        page -= 1;
        continue;
      }
      if (!r.ok || !r.body) throw new Error(`GET ${kind === 'machines' ? '/machines' : '/machine-variables'} failed: ${describeResult(r)}`);
      out.push(...(r.body.data as Array<Record<string, unknown> & { id: string }>));
      if (!r.body.pagination.has_more || !r.body.pagination.next_cursor) return out;
      cursor = r.body.pagination.next_cursor;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.dispatcher.close().catch(() => undefined);
  }

  private validated<T extends z.ZodType>(r: ApiResult, schema: T): ApiResult<z.infer<T>> {
    if (!r.ok) return r as ApiResult<z.infer<T>>;
    const parsed = schema.safeParse(r.body);
    if (parsed.success) return { ...r, body: parsed.data };
    // A 2xx whose body we cannot read is treated like a server error: retried, nothing deleted.
    return { ...r, ok: false, status: 502, body: undefined, error: { code: 'unexpected_response', message: `response did not match the interface: ${parsed.error.issues[0]?.message ?? ''}` } };
  }

  private async send(s: SendOptions): Promise<ApiResult> {
    let renewed = false;
    for (let attempt = 0; ; attempt++) {
      // A reserved slot covers the first attempt only; a repeat after a token renewal takes its own.
      const r = await this.sendOnce(attempt === 0 ? s : { ...s, reserved: false });
      if (r.status === 401 && r.error?.code !== 'token_rejected' && !renewed) {
        // §5.4: a 401 means the token is no longer good: get a new one once and repeat.
        renewed = true;
        if (r.credential !== undefined && this.credentials.rejected(r.credential)) continue;
      }
      const { credential: _c, ...result } = r;
      if (result.status === 401) result.afterTokenRenewal = renewed || this.credentials.mode === 'api_key' || result.error?.code === 'token_rejected';
      if (!result.ok) this.logFailure(s.endpoint, result);
      return result;
    }
  }

  private async sendOnce(s: SendOptions): Promise<ApiResult & { credential?: string }> {
    const started = this.o.clock.monotonic();
    const elapsed = () => this.o.clock.monotonic() - started;
    try {
      if (!s.reserved) await this.o.budget.acquire(s.priority, s.signal);
    } catch (err) {
      return { status: 0, ok: false, body: undefined, networkError: { code: 'ABORTED', message: describeError(err) }, durationMs: elapsed() };
    }
    // The 429 of a request granted before the last one's cut is the same wave (rate-finder.ts).
    const ticket = this.o.budget.ticket();
    let credential: string;
    try {
      credential = await this.credentials.bearer(s.signal);
    } catch (err) {
      if (err instanceof TokenError) {
        if (err.code === 'TOKEN_REJECTED') {
          return { status: 401, ok: false, body: undefined, error: { code: 'token_rejected', message: err.message }, afterTokenRenewal: true, durationMs: elapsed() };
        }
        if (err.status === 429) {
          return { status: 429, ok: false, body: undefined, error: { code: 'rate_limit_exceeded', message: err.message }, retryAfterMs: err.retryAfterMs, durationMs: elapsed() };
        }
      }
      return { status: 0, ok: false, body: undefined, networkError: { code: errorCode(err, 'TOKEN_UNAVAILABLE'), message: redact(err instanceof Error ? err.message : String(err)) }, durationMs: elapsed() };
    }
    const headers: Record<string, string> = {
      authorization: `Bearer ${credential}`,
      [ORGANISATION_HEADER.toLowerCase()]: this.o.service.organisation_id,
      accept: 'application/json',
      'user-agent': USER_AGENT,
    };
    const timeout = s.timeoutMs ?? this.o.service.request_timeout;
    const sentAt = this.o.clock.monotonic();
    let status: number;
    let resHeaders: Record<string, string | string[] | undefined>;
    let text: string;
    try {
      if (s.file !== undefined) {
        const r = await uploadMultipartFile(`${this.base}${s.path}`, headers, s.file, timeout, s.signal);
        ({ status, text } = r);
        resHeaders = r.headers;
      } else {
        if (s.json !== undefined) headers['content-type'] = 'application/json';
        const res = await request(`${this.base}${s.path}`, {
          method: s.method,
          headers,
          body: s.json,
          dispatcher: this.dispatcher,
          headersTimeout: timeout,
          bodyTimeout: timeout,
          signal: s.signal,
        });
        // The one entry point for the service's text (issue 12 §3): an error that echoes request
        // headers must not carry the API key into set-aside reasons, the outbox, status or logs.
        text = redact(await readLimited(res.body, MAX_RESPONSE_BYTES));
        status = res.statusCode;
        resHeaders = res.headers;
      }
    } catch (err) {
      const code = networkCode(err);
      this.o.metrics.uplinkRequests.inc({ endpoint: s.endpoint, status: code });
      return { status: 0, ok: false, body: undefined, networkError: { code, message: redact(err instanceof Error ? err.message : String(err)) }, durationMs: elapsed(), credential };
    }
    const requestId = headerValue(resHeaders[REQUEST_ID_HEADER]);
    this.o.metrics.uplinkRequests.inc({ endpoint: s.endpoint, status: String(status) });
    this.o.metrics.uplinkRequestSeconds.observe({ endpoint: s.endpoint }, (this.o.clock.monotonic() - sentAt) / 1000);
    let parsed: unknown;
    if (text.length > 0) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    const ok = status >= 200 && status < 300;
    const retryAfterMs = status === 429 ? parseRetryAfter(resHeaders['retry-after']) : undefined;
    this.o.budget.answered(status, ticket, retryAfterMs);
    const result: ApiResult & { credential?: string } = { status, ok, body: parsed, requestId, durationMs: elapsed(), credential };
    if (ok) {
      this.o.metrics.uplinkLastSuccess.set(this.o.clock.now() / 1000);
    } else {
      result.error = parseErrorEnvelope(parsed, text, status);
      result.retryAfterMs = retryAfterMs ?? parseRetryAfter(resHeaders['retry-after']);
      if (!result.requestId) result.requestId = (parsed as { error?: { request_id?: string } } | undefined)?.error?.request_id;
    }
    return result;
  }

  private logFailure(endpoint: Endpoint, r: ApiResult): void {
    const key = `${endpoint}:${r.status}:${r.networkError?.code ?? r.error?.code ?? ''}`;
    this.throttle.warn(
      key,
      { endpoint, status: r.status, code: r.error?.code ?? r.networkError?.code, message: r.error?.message ?? r.networkError?.message, request_id: r.requestId },
      `tracking service call failed: ${describeResult(r)}`,
    );
  }
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Both envelopes of §7: `{code, message}` and `{error: {type, code, message, request_id}}`. */
export function parseErrorEnvelope(parsed: unknown, text: string, status: number): { code: string; message: string; type?: string } {
  const r = errorEnvelope.safeParse(parsed);
  if (r.success) {
    if ('error' in r.data) return { code: r.data.error.code, message: r.data.error.message ?? '', type: r.data.error.type };
    return { code: r.data.code, message: r.data.message ?? '' };
  }
  return { code: `http_${status}`, message: text.slice(0, 300) };
}

function networkCode(err: unknown): string {
  const code = errorCode(err, '');
  if (code) return code;
  const name = (err as { name?: string } | null)?.name;
  if (name === 'AbortError') return 'ABORTED';
  return 'NETWORK_ERROR';
}

async function readLimited(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      body.destroy();
      throw Object.assign(new Error(`response body larger than ${limit} bytes`), { code: 'RESPONSE_TOO_LARGE' });
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
