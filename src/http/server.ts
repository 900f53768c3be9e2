import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Metrics } from '../core/metrics.js';
import { JsonValueCounter, MAX_JSON_VALUES } from './json-budget.js';
import { describeError } from '../core/errors.js';
import { capToDescriptors, openFileLimit } from '../core/descriptors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Secret } from '../config/secrets.js';
import { connectionLimits, fitConnectionLimits, type ConnectionLimits } from './config.js';
import { ConnectionGuard, headerTimeoutOptions } from './connection-guard.js';
import { ConnectionSlots, type BusyReason } from './connection-slots.js';
import { defaultAccess, RequestGuard, type Refusal, type RouteAccess } from './guard.js';

/** An error a handler throws to answer with JSON `{error: {code, message, field?}}`. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

export interface Reply {
  status?: number;
  json?: unknown;
  text?: string;
  html?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  params: Record<string, string>;
  /** Client address. */
  ip: string;
  /** Reads and parses a JSON body (limited to http.max_body_bytes); throws HttpError 400/413/415. */
  json(): Promise<unknown>;
  /** The JSON body's bytes, checked as json() checks them (type, size, values) but not parsed: for a worker thread to parse. */
  jsonBytes(): Promise<Buffer>;
}

export type Handler = (ctx: RouteContext) => Promise<Reply | void> | Reply | void;

interface Route {
  method: string;
  parts: string[];
  handler: Handler;
  name: string;
  access: RouteAccess;
  essential: boolean;
  stream: boolean;
}

/** How a route is registered; see LocalHttpServer.route(). */
export interface RouteOptions {
  name?: string;
  access?: RouteAccess;
  /** Older spelling of access 'write' / 'read'. */
  write?: boolean;
  /** Served from the reserved connections too (http.reserved_connections): health checks and the operator page. */
  essential?: boolean;
  /** The answer stays open (server-sent events): counted against http.max_streams and max_streams_per_client. */
  stream?: boolean;
}

export interface LocalHttpOptions {
  host: string;
  port: number;
  apiToken?: Secret;
  maxBodyBytes: number;
  rateLimitPerMinute: number;
  /** http.max_connections: most connections at once (issue 12 §1), lowered to what the open-file limit leaves. Default 256. */
  maxConnections?: number;
  /** http.max_connections_per_client: most connections at once from one address. Default 64. */
  maxConnectionsPerClient?: number;
  /** http.header_timeout: a request's headers must be complete this long after it began. Default 10 s. */
  headerTimeoutMs?: number;
  /** The process's open-file limit (core/descriptors.ts); default: read from the process. */
  openFileLimit?: number | null;
  /** http.reserved_connections, max_streams, max_streams_per_client; default: connectionLimits() of maxConnections. */
  limits?: Omit<ConnectionLimits, 'maxConnections'>;
  logger: Logger;
  metrics: Metrics;
  /** http.require_token_for_reads (default: on when apiToken is set); see guard.ts. */
  requireTokenForReads?: boolean;
  /** http.allowed_hosts: extra names accepted in the Host header; see guard.ts. */
  allowedHosts?: readonly string[];
}

/**
 * The gateway's own HTTP server: operator (HMI) page, local API, `/status`, `/metrics`,
 * `/healthz`, `/readyz`. Components add routes with `route()`.
 *
 * Guards every route gets: a per-address request rate limit, a body size limit, and the checks of
 * guard.ts (Host against DNS rebinding; for writes same origin, a JSON or X-Requested-By request
 * and the bearer token; for reads the token when required). How a route declares itself read,
 * write or public is described at the top of guard.ts. Errors are JSON naming the field.
 */
export class LocalHttpServer {
  private readonly routes: Route[] = [];
  private server: Server | null = null;
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly guard: RequestGuard;
  private readonly slots: ConnectionSlots;
  private readonly connections: ConnectionGuard;
  /** Why http.max_connections is lowered (the open-file limit), said when the server starts; or null. */
  private readonly lowered: string | null;

  /** A failing route is logged once a minute (with a count), not on every request. */
  private readonly throttle: LogThrottle;

  constructor(private readonly o: LocalHttpOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000);
    this.guard = new RequestGuard({ host: o.host, apiToken: o.apiToken, requireTokenForReads: o.requireTokenForReads, allowedHosts: o.allowedHosts });
    const maxConnections = o.maxConnections ?? 256;
    const { cap, lowered } = capToDescriptors('http', 'http.max_connections', maxConnections, o.openFileLimit === undefined ? openFileLimit() : o.openFileLimit);
    this.lowered = lowered;
    this.connections = new ConnectionGuard({ maxConnections: cap, maxConnectionsPerClient: o.maxConnectionsPerClient ?? 64 }, { count: (reason) => o.metrics.httpConnectionsRefused.inc({ reason }), throttle: this.throttle });
    const limits = fitConnectionLimits({ ...connectionLimits({ max_connections: maxConnections }), ...o.limits, maxConnections }, cap);
    this.slots = new ConnectionSlots(limits, () => this.connections.inRequest);
  }

  /**
   * Adds a route; `pattern` segments starting with `:` are parameters (`/api/annotations/:id`).
   * A route with the same method and pattern replaces the earlier one: a component rebuilt by a
   * configuration reload registers its routes again.
   *
   * `access` (see guard.ts): 'read' by default for GET/HEAD, 'write' for the other methods;
   * 'public' only for what holds no data and changes nothing. `write: true|false` is the older
   * spelling of 'write'/'read'.
   *
   * `essential`: also served when only the reserved connections are left (health checks, the
   * operator page). `stream`: the answer stays open; counted against the stream limits.
   */
  route(method: string, pattern: string, handler: Handler, options: RouteOptions = {}): void {
    const m = method.toUpperCase();
    const parts = pattern.split('/').filter(Boolean);
    const existing = this.routes.findIndex((r) => r.method === m && r.parts.join('/') === parts.join('/'));
    if (existing >= 0) this.routes.splice(existing, 1);
    this.routes.push({
      method: m,
      parts,
      handler,
      name: options.name ?? `${m} ${pattern}`,
      access: options.access ?? (options.write === undefined ? defaultAccess(m) : options.write ? 'write' : 'read'),
      essential: options.essential === true,
      stream: options.stream === true,
    });
  }

  async listen(): Promise<string> {
    const headersTimeout = this.o.headerTimeoutMs ?? 10_000;
    const server = createServer({ ...headerTimeoutOptions(headersTimeout), requestTimeout: Math.max(30_000, headersTimeout) }, (req, res) => void this.handle(req, res));
    // Connections are admitted per client address (connection-guard.ts), not by Node's
    // maxConnections, which closed whatever connection came next at the limit, the health check's too.
    this.connections.attach(server);
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.o.port, this.o.host, () => {
        server.off('error', reject);
        // accept() fails with EMFILE when descriptors run out; without a listener that error would
        // end the process. libuv keeps accepting once descriptors are free again.
        server.on('error', (err) => this.throttle.error(`server-error|${(err as NodeJS.ErrnoException).code ?? ''}`, { err: describeError(err) }, 'local HTTP server error; it keeps listening'));
        resolve();
      });
    });
    // Issue 21 §3: say at start why writes and confidential reads will be refused, not at the first refusal.
    const refused = this.guard.refusedWithoutToken;
    if (refused) this.o.logger.warn({ host: this.o.host }, refused);
    if (this.lowered) this.o.logger.warn({ max_connections: this.slots.limits.maxConnections }, this.lowered);
    return this.url;
  }

  get url(): string {
    const addr = this.server?.address() as AddressInfo | null;
    const host = this.o.host.includes(':') ? `[${this.o.host}]` : this.o.host === '0.0.0.0' ? '127.0.0.1' : this.o.host;
    return addr ? `http://${host}:${addr.port}` : '';
  }

  async close(): Promise<void> {
    const s = this.server;
    if (!s) return;
    this.server = null;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections?.();
    });
  }

  private match(method: string, path: string): { route: Route; params: Record<string, string> } | { allowed: string[] } | null {
    const parts = path.split('/').filter(Boolean);
    const allowed: string[] = [];
    for (const r of this.routes) {
      if (r.parts.length !== parts.length) continue;
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < parts.length; i++) {
        if (r.parts[i].startsWith(':')) params[r.parts[i].slice(1)] = decodePathPart(parts[i]);
        else if (r.parts[i] !== parts[i]) {
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      if (r.method === method || (method === 'HEAD' && r.method === 'GET')) return { route: r, params };
      allowed.push(r.method);
    }
    return allowed.length > 0 ? { allowed } : null;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const ip = req.socket.remoteAddress ?? 'unknown';
    const method = (req.method ?? 'GET').toUpperCase();
    let routeName = 'unmatched';
    try {
      this.refuseIf(this.guard.checkHost(req.headers), ip);
      const url = parseRequestUrl(req.url);
      if (!this.allow(ip)) {
        // Closed with the answer: keep-alive connections kept busy with refused requests would
        // otherwise hold http.max_connections as well as streams did (issue 21 §4).
        res.setHeader('connection', 'close');
        throw new HttpError(429, 'rate_limited', `more than ${this.o.rateLimitPerMinute} requests per minute from ${ip}`);
      }
      const found = this.match(method, url.pathname);
      if (!found) throw new HttpError(404, 'not_found', `no such path: ${url.pathname}`);
      if ('allowed' in found) {
        res.setHeader('allow', found.allowed.join(', '));
        throw new HttpError(405, 'method_not_allowed', `${method} is not allowed on ${url.pathname} (allowed: ${found.allowed.join(', ')})`);
      }
      routeName = found.route.name;
      if (!found.route.essential && this.slots.inReserve) this.busy(res, 'reserved_connections', ip);
      this.refuseIf(this.guard.checkAccess(req.headers, found.route.access), ip);
      if (found.route.stream) {
        const slot = this.slots.takeStream(ip);
        if ('refused' in slot) this.busy(res, slot.refused, ip);
        else res.once('close', slot.release);
      }
      const ctx: RouteContext = { req, res, url, params: found.params, ip, json: () => this.readJson(req), jsonBytes: () => this.readJsonBytes(req) };
      const reply = await found.route.handler(ctx);
      if (reply && !res.headersSent) send(res, reply);
      this.o.metrics.httpRequests.inc({ route: routeName, status: String(res.statusCode) });
    } catch (err) {
      const e = err instanceof HttpError ? err : new HttpError(500, 'internal_error', describeError(err));
      if (e.status >= 500) this.throttle.error(routeName, { route: routeName, err: describeError(err) }, 'local API error');
      if (!res.headersSent) send(res, { status: e.status, json: { error: { code: e.code, message: e.message, ...(e.field ? { field: e.field } : {}) } } });
      else res.end();
      this.o.metrics.httpRequests.inc({ route: routeName, status: String(e.status) });
    }
  }

  /** Throws the guard's refusal; host and origin refusals are logged (once a minute per rule). */
  private refuseIf(refusal: Refusal | null, ip: string): void {
    if (!refusal) return;
    if (refusal.rule === 'host' || refusal.rule === 'origin') this.throttle.warn(`refused:${refusal.rule}`, { ip, code: refusal.code, reason: refusal.message }, 'local API refused a request');
    throw new HttpError(refusal.status, refusal.code, refusal.message);
  }

  /** Throws the 429/503 of a connection limit (issue 21 §4), logged once a minute per reason. */
  private busy(res: ServerResponse, reason: BusyReason, ip: string): never {
    const l = this.slots.limits;
    this.o.metrics.httpBusy.inc({ reason });
    res.setHeader('retry-after', '5');
    // The connection goes away with the answer: a refused client must not keep the slot alive.
    res.setHeader('connection', 'close');
    if (reason === 'streams_per_client') {
      this.throttle.warn(`busy|${reason}`, { ip, max_streams_per_client: l.maxStreamsPerClient }, 'local HTTP server refused a stream: http.max_streams_per_client reached');
      throw new HttpError(429, 'too_many_streams', `${ip} already has ${l.maxStreamsPerClient} streams open (http.max_streams_per_client); close a console tab or wait for one to end`);
    }
    if (reason === 'streams_total') {
      this.throttle.warn(`busy|${reason}`, { ip, max_streams: l.maxStreams }, 'local HTTP server refused a stream: http.max_streams reached');
      throw new HttpError(503, 'too_many_streams', `${l.maxStreams} streams are open (http.max_streams); try again when a console closes`);
    }
    this.throttle.warn(`busy|${reason}`, { ip, in_request: this.slots.openConnections, max_connections: l.maxConnections, reserved_connections: l.reservedConnections }, 'local HTTP server is busy: only the connections of http.reserved_connections are left, kept for health checks and the operator page');
    throw new HttpError(503, 'busy', `${this.slots.openConnections} of http.max_connections (${l.maxConnections}) connections are in a request; the last ${l.reservedConnections} (http.reserved_connections) are kept for /healthz, /readyz and the operator page. Try again shortly`);
  }

  private allow(ip: string): boolean {
    const now = performance.now();
    const rate = this.o.rateLimitPerMinute / 60_000;
    const cap = Math.max(10, this.o.rateLimitPerMinute / 6);
    let b = this.buckets.get(ip);
    if (!b) {
      if (this.buckets.size > 10_000) this.buckets.clear();
      b = { tokens: cap, at: now };
      this.buckets.set(ip, b);
    }
    b.tokens = Math.min(cap, b.tokens + (now - b.at) * rate);
    b.at = now;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }

  private async readJson(req: IncomingMessage): Promise<unknown> {
    const text = (await this.readJsonBytes(req)).toString('utf8');
    if (text.trim() === '') throw new HttpError(400, 'bad_request', 'the body is empty; send a JSON object');
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new HttpError(400, 'bad_request', `the body is not valid JSON: ${describeError(err)}`);
    }
  }

  private async readJsonBytes(req: IncomingMessage): Promise<Buffer> {
    const type = req.headers['content-type'] ?? '';
    if (!/^application\/json\b/i.test(type)) throw new HttpError(415, 'unsupported_media_type', `send JSON with "Content-Type: application/json" (got ${type || 'none'})`);
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (Number.isFinite(declared) && declared > this.o.maxBodyBytes) throw new HttpError(413, 'too_large', `body of ${declared} bytes is over the limit of ${this.o.maxBodyBytes}`);
    const chunks: Buffer[] = [];
    let size = 0;
    // Counted as it arrives: a body whose parse alone would hold the event loop is refused, after
    // the rest of it (within the size limit) is read, so that the client reads the answer.
    const values = new JsonValueCounter();
    let tooMany = false;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > this.o.maxBodyBytes) throw new HttpError(413, 'too_large', `body is over the limit of ${this.o.maxBodyBytes} bytes`);
      if (tooMany) continue;
      tooMany = values.feed(chunk as Buffer) > MAX_JSON_VALUES;
      chunks.push(chunk as Buffer);
    }
    if (tooMany) throw new HttpError(413, 'too_many_values', `the body holds more than ${MAX_JSON_VALUES.toLocaleString('en-US')} JSON values (members and list items), more than any request of the local API needs`);
    return Buffer.concat(chunks);
  }
}

/** The request target as a URL; a target that is not a path is a 400, not a 500. */
function parseRequestUrl(target: string | undefined): URL {
  try {
    return new URL(target ?? '/', 'http://local');
  } catch {
    throw new HttpError(400, 'bad_request', 'the request target is not a valid path');
  }
}

/** A path parameter, percent-decoded; malformed percent-encoding (`%E0%A4%A`) is the client's error. */
function decodePathPart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new HttpError(400, 'bad_request', `the path segment "${part.slice(0, 100)}" has malformed percent-encoding`);
  }
}

function send(res: ServerResponse, reply: Reply): void {
  res.statusCode = reply.status ?? 200;
  for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
  res.setHeader('cache-control', 'no-store');
  res.setHeader('x-content-type-options', 'nosniff');
  if (reply.json !== undefined) {
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.end(JSON.stringify(reply.json));
  } else if (reply.html !== undefined) {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(reply.html);
  } else {
    res.setHeader('content-type', reply.contentType ?? 'text/plain; charset=utf-8');
    res.end(reply.text ?? '');
  }
}
