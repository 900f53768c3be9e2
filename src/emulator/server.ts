import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '../core/logger.js';
import { headerTimeoutOptions } from '../http/connection-guard.js';
import { isFailure, type Auth, type Principal } from './auth.js';
import { BASE_PATH, EMULATOR_PATH, ORGANISATION_HEADER, REQUEST_ID_HEADER, TOKEN_PATH } from './contract.js';
import type { FaultState } from './faults.js';
import { ClientGone, HttpError, codeForStatus, errorReply, type Reply } from './http.js';
import { newId } from './ids.js';
import type { ImportJobs } from './import-jobs.js';
import { errorOf, noteClient, notesOf, redactHeaders, type RequestJournal } from './journal.js';
import type { Inspector } from './inspect.js';
import type { SlidingWindowRateLimiter } from './rate-limit.js';
import type { Store } from './store.js';
import { refuseEmulatorWrite } from './write-guard.js';

/**
 * The HTTP front: routing, and the checks every request passes in this order:
 *   1. `/_emulator/*` goes straight to the inspection API (no auth, no rate limit, no faults); its
 *      writes only from non-browser clients or allowed origins (write-guard.ts);
 *   2. faults: added latency, then outage / dropped connection (socket destroyed, no answer),
 *      forced 429, injected error status;
 *   3. rate limit per client IP, all endpoints together, token endpoint included (§7, §8) -> 429
 *      `{error: {type, code, message, request_id}}` with Retry-After;
 *   4. route: unknown path 404, wrong method 405 (JSON bodies) [A];
 *   5. for /tracking/v1: bearer credential (401, §5.5, §7), then Service-Organisation-Id
 *      (missing 400, not authorised 403, §5.6);
 *   6. the handler; an HttpError is the answer, anything else a 500.
 * Every answer carries Service-Request-Id: req_... (CONTRACT.md).
 */

export interface RequestContext {
  req: IncomingMessage;
  query: URLSearchParams;
  /** Path parameter (the job id). */
  param: string;
}

export interface TrackingContext extends RequestContext {
  principal: Principal;
  organisationId: string;
}

export type Handler = (ctx: RequestContext) => Reply | Promise<Reply>;
export type TrackingHandler = (ctx: TrackingContext) => Reply | Promise<Reply>;

interface Route {
  /** Stats key path, relative to /tracking/v1 for API calls. */
  name: string;
  methods: Record<string, Handler>;
}

export interface ServerDeps {
  store: Store;
  auth: Auth;
  limiter: SlidingWindowRateLimiter;
  faults: FaultState;
  jobs: ImportJobs;
  inspector: Inspector;
  trackingRoutes: Record<string, Record<string, TrackingHandler>>;
  tokenHandler: Handler;
  logger: Logger;
  journal: RequestJournal;
  /** Origins allowed for browser requests (`*` = any); empty: no CORS headers [A]. */
  corsOrigins: string[];
  now: () => number;
  /** A request's headers must be complete this long after its connection opened (default EMULATOR_HEADER_TIMEOUT_MS). */
  headerTimeoutMs?: number;
}

const JOB_PATH = new RegExp(`^${BASE_PATH}/(v1/)?machine-data/import-jobs/([^/]+)$`);

function decodeParam(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw; // malformed %-escape: looked up as written (and not found)
  }
}

const GONE: Reply = { status: 0 };

/**
 * A request's headers must be complete this long after its connection opened (Node's default: 60 s,
 * checked every 30 s). Generous: a client in the same busy process as the emulator (tests) may
 * connect well before it has its body ready to send.
 */
export const EMULATOR_HEADER_TIMEOUT_MS = 30_000;

export function createEmulatorServer(deps: ServerDeps): Server {
  const { store, auth, limiter, faults, logger } = deps;

  /** §5.5, §5.6: credential, then organisation header. */
  const tracked = (handler: TrackingHandler): Handler => (ctx) => {
    const principal = auth.authenticate(ctx.req.headers.authorization);
    if (isFailure(principal)) return { status: principal.status, body: principal.body, headers: principal.headers };
    noteClient(ctx.req, principal.name);
    const org = ctx.req.headers[ORGANISATION_HEADER];
    const organisationId = Array.isArray(org) ? org[0] : org;
    if (organisationId === undefined || organisationId.trim() === '') return errorReply(400, 'bad_request', 'missing Service-Organisation-Id header (§5.6)');
    if (!principal.organisations.has(organisationId)) {
      return errorReply(403, 'forbidden', `the credentials are not authorised for organisation "${organisationId}"`);
    }
    return handler({ ...ctx, principal, organisationId });
  };

  const exact = new Map<string, Route>();
  exact.set(TOKEN_PATH, { name: TOKEN_PATH, methods: { POST: deps.tokenHandler } });
  for (const [path, methods] of Object.entries(deps.trackingRoutes)) {
    const wrapped: Record<string, Handler> = {};
    for (const [m, h] of Object.entries(methods)) wrapped[m] = tracked(h);
    exact.set(BASE_PATH + path, { name: path, methods: wrapped });
  }
  const jobRoutes = {
    plain: { name: '/machine-data/import-jobs/{job_id}', methods: { GET: tracked((ctx) => deps.jobs.get(ctx.param, ctx.organisationId)) } },
    // §4.7 gives the status path with an extra v1 segment after the base prefix; both are answered.
    doubled: { name: '/v1/machine-data/import-jobs/{job_id}', methods: { GET: tracked((ctx) => deps.jobs.get(ctx.param, ctx.organisationId)) } },
  };

  function send(res: ServerResponse, requestId: string, route: string | null, reply: Reply, cors?: Record<string, string>): void {
    if (res.headersSent || res.destroyed) return;
    const body = reply.body === undefined ? '' : JSON.stringify(reply.body);
    const headers: Record<string, string | number> = {
      [REQUEST_ID_HEADER]: requestId,
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      ...cors,
      ...reply.headers,
    };
    if (reply.close) headers.Connection = 'close';
    res.writeHead(reply.status, headers);
    res.end(body);
    if (route !== null) store.countRequest(route, reply.status);
  }

  /**
   * CORS [A, emulator only]: with --cors, a request whose Origin is allowed gets
   * Access-Control-Allow-Origin (and the request id and Retry-After exposed to scripts); a preflight
   * (OPTIONS with Access-Control-Request-Method) is answered 204 before auth, rate limit and faults.
   */
  const corsAll = deps.corsOrigins.includes('*');
  function corsHeaders(req: IncomingMessage): Record<string, string> | undefined {
    if (deps.corsOrigins.length === 0) return undefined;
    const origin = req.headers.origin;
    if (origin === undefined || !(corsAll || deps.corsOrigins.includes(origin))) return undefined;
    return {
      'Access-Control-Allow-Origin': corsAll ? '*' : origin,
      'Access-Control-Expose-Headers': `${REQUEST_ID_HEADER}, Retry-After, WWW-Authenticate`,
      ...(corsAll ? {} : { Vary: 'Origin' }),
    };
  }
  function preflight(req: IncomingMessage, res: ServerResponse, cors: Record<string, string>): void {
    res.writeHead(204, {
      ...cors,
      'Access-Control-Allow-Methods': 'GET, POST, DELETE, OPTIONS',
      'Access-Control-Allow-Headers': req.headers['access-control-request-headers'] ?? 'Authorization, Content-Type, Service-Organisation-Id',
      'Access-Control-Max-Age': '600',
      'Content-Length': 0,
    });
    res.end();
  }

  /** The journal entry and the debug line of one answered (or dropped) request. */
  function record(req: IncomingMessage, requestId: string, startedAt: number, arrivedAt: number, path: string, query: string, status: number | 'dropped', reply: Reply | null, fault: string | null): void {
    const notes = notesOf(req);
    const declared = Number(req.headers['content-length']);
    const body: Record<string, unknown> = {
      bytes: notes.bytes ?? (Number.isFinite(declared) ? declared : 0),
      content_type: req.headers['content-type'] ?? null,
      ...notes.summary,
    };
    const duration = Math.round((performance.now() - startedAt) * 10) / 10;
    const orgHeader = req.headers[ORGANISATION_HEADER];
    const entry = {
      request_id: requestId,
      at: new Date(arrivedAt).toISOString(),
      method: req.method ?? 'GET',
      path,
      query: query === '' ? null : query,
      status,
      duration_ms: duration,
      client: notes.client ?? null,
      organisation_id: (Array.isArray(orgHeader) ? orgHeader[0] : orgHeader) ?? null,
      headers: redactHeaders(req.headers),
      body,
      error: reply && reply.status >= 400 ? errorOf(reply.body) : null,
      fault,
    };
    deps.journal.add(entry);
    if (logger.isLevelEnabled('debug')) {
      logger.debug({ request_id: requestId, method: entry.method, path, status, duration_ms: duration, client: entry.client, organisation_id: entry.organisation_id, body, error: entry.error, fault }, 'request');
    }
  }

  /** §7: the 429 envelope differs from the standard one. */
  function tooMany(requestId: string, retryAfterMs: number, message: string): Reply {
    return {
      status: 429,
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
      body: { error: { type: 'rate_limit', code: 'rate_limit_exceeded', message, request_id: requestId } },
    };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const startedAt = performance.now();
    const arrivedAt = deps.now();
    const requestId = newId('req');
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const rawQuery = q < 0 ? '' : url.slice(q + 1);
    const query = new URLSearchParams(rawQuery);
    const method = req.method ?? 'GET';
    const cors = corsHeaders(req);
    if (cors && method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
      preflight(req, res, cors);
      drain(req);
      return;
    }

    if (path === EMULATOR_PATH || path.startsWith(`${EMULATOR_PATH}/`)) {
      // A browser page of another site must not reset the emulator or set its faults (write-guard.ts).
      const refused = refuseEmulatorWrite(req, method, deps.corsOrigins);
      if (refused) {
        send(res, requestId, null, refused, cors);
        drain(req);
        return;
      }
      const reply = await run(() => deps.inspector.handle(method, path, query, req));
      if (reply !== GONE) send(res, requestId, null, reply, cors);
      return;
    }
    // Every answer below is sent, journalled and logged through here.
    const answer = (route: string, reply: Reply, fault: string | null = null) => {
      send(res, requestId, route, reply, cors);
      record(req, requestId, startedAt, arrivedAt, path, rawQuery, reply.status, reply, fault);
    };

    let route = exact.get(path);
    let param = '';
    if (route === undefined) {
      const m = JOB_PATH.exec(path);
      if (m) {
        route = m[1] ? jobRoutes.doubled : jobRoutes.plain;
        param = decodeParam(m[2]);
      }
    }
    const routeName = `${method} ${route ? route.name : '(no route)'}`;

    const latency = faults.latencyFor(path);
    if (latency > 0) await new Promise((r) => setTimeout(r, latency));
    const fault = faults.decide(path);
    if (fault.kind === 'destroy') {
      store.droppedConnections++;
      store.countRequest(routeName, 'dropped');
      record(req, requestId, startedAt, arrivedAt, path, rawQuery, 'dropped', null, fault.cause);
      req.socket.destroy();
      return;
    }

    const slot = limiter.take(req.socket.remoteAddress ?? 'unknown');
    if (!slot.ok) {
      store.rateLimited++;
      answer(routeName, tooMany(requestId, slot.retryAfterMs, `rate limit of ${limiter.limit} requests per minute exceeded`));
      drain(req);
      return;
    }
    if (fault.kind === 'force429') {
      answer(routeName, tooMany(requestId, fault.retryAfterMs, 'rate limit exceeded (injected fault: force_429_seconds)'), fault.cause);
      drain(req);
      return;
    }
    if (fault.kind === 'status') {
      const reply = fault.status === 429 ? tooMany(requestId, 1000, `rate limit exceeded (injected fault: ${fault.cause})`) : errorReply(fault.status, codeForStatus(fault.status), `injected fault (${fault.cause})`);
      answer(routeName, reply, fault.cause);
      drain(req);
      return;
    }

    if (route === undefined) {
      answer(routeName, errorReply(404, 'not_found', `no route for ${method} ${path}`));
      drain(req);
      return;
    }
    const handler = route.methods[method];
    if (handler === undefined) {
      const allow = Object.keys(route.methods).join(', ');
      answer(routeName, errorReply(405, 'method_not_allowed', `${method} is not allowed on ${path} (allowed: ${allow})`, { headers: { Allow: allow } }));
      drain(req);
      return;
    }
    const reply = await run(() => handler({ req, query, param }));
    if (reply === GONE) return;
    answer(routeName, reply);
    if (!req.complete) drain(req);
  }

  async function run(fn: () => Reply | Promise<Reply>): Promise<Reply> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof HttpError) return err.reply;
      if (err instanceof ClientGone) return GONE;
      logger.error({ err }, 'emulator handler failed');
      return errorReply(500, 'internal_server_error', `emulator error: ${(err as Error).message}`);
    }
  }

  // Checked every second (connection-guard.ts).
  const server = createServer(headerTimeoutOptions(deps.headerTimeoutMs ?? EMULATOR_HEADER_TIMEOUT_MS), (req, res) => {
    handle(req, res).catch((err: unknown) => {
      logger.error({ err }, 'emulator request failed');
      if (!res.headersSent) res.destroy();
    });
  });
  return server;
}

/** Reads and drops an unread request body so keep-alive connections stay usable. */
function drain(req: IncomingMessage): void {
  if (!req.complete && !req.destroyed) req.resume();
}
