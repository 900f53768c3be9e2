import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { Secret } from '../config/secrets.js';
import { isLoopbackHost } from '../core/loopback.js';

/**
 * The one gate of the gateway's local HTTP server (src/http/server.ts). The server asks it about
 * every request before any handler runs, for every route, whoever registered it (ops routes,
 * annotations, set-aside, the console): a route cannot opt out, it can only say what it is.
 *
 * HOW TO DECLARE A ROUTE
 *
 *   http.route('GET',  '/api/things',     handler)                      // access 'read' (GET/HEAD default)
 *   http.route('POST', '/api/things/:id', handler)                      // access 'write' (POST/PUT/PATCH/DELETE default)
 *   http.route('GET',  '/healthz',        handler, { access: 'public' }) // no token, ever
 *
 *   'public' answers anyone who reaches the port (with an allowed Host). Only for what holds no
 *            operational data and changes nothing: /healthz, /readyz (orchestrator probes), the
 *            HMI page's static shell (its data comes from /api/panel, a read).
 *   'read'   changes nothing. Needs `Authorization: Bearer <http.api_token>` when
 *            http.require_token_for_reads is on (the default whenever api_token is set).
 *   'write'  anything that changes state — and anything that starts work. A GET that changes state
 *            must be declared { access: 'write' } (better: make it a POST).
 *   'confidential'  a read of what an intruder on the plant network should not see: the
 *            configuration file and the live values of every variable (the console). Like 'read',
 *            but a server that listens beyond localhost without an api_token refuses it outright
 *            (the start-up log says so), whatever require_token_for_reads says.
 *
 * WHAT IS CHECKED
 *
 * Every request (DNS rebinding: a hostile name re-pointed at 127.0.0.1 makes the browser treat
 * this server as that site): the `Host` header must be a literal IP address, `localhost`, this
 * machine's name, http.host, or one of http.allowed_hosts. A request without Host (HTTP/1.0
 * probes) is not a browser's and passes.
 *
 * Writes (CSRF: any web page the panel's browser opens can send requests here):
 * - `Origin`, when sent, must be this server's own origin (`http(s)://<Host>`); `Sec-Fetch-Site`,
 *   when sent, must be `same-origin` or `none`. Browsers send Origin with every cross-origin POST,
 *   also in no-cors mode, so another site's page gets 403 before any handler runs.
 * - The request must carry `Content-Type: application/json` (a write with a body) or an
 *   `X-Requested-By` header (a write without one). A browser cannot send either cross-origin without
 *   a CORS preflight, and this server answers no preflight with CORS headers, so the browser stops.
 *   A browser request that has neither gets 403; another client (curl) gets 415 naming the header.
 * - The bearer token, when the server listens beyond loopback (then a missing api_token refuses
 *   every write) or whenever api_token is set.
 */
export type RouteAccess = 'public' | 'read' | 'write' | 'confidential';

/** The header a bodiless write carries instead of a JSON Content-Type (any value). */
export const WRITE_HEADER = 'x-requested-by';

export interface GuardOptions {
  /** http.host: the address the server listens on. */
  host: string;
  apiToken?: Secret;
  /** http.require_token_for_reads; default: on when apiToken is set. */
  requireTokenForReads?: boolean;
  /** http.allowed_hosts: extra names the panel may use in the address bar. */
  allowedHosts?: readonly string[];
}

/** Why a request is refused; the server turns it into a JSON error answer. */
export interface Refusal {
  status: number;
  code: string;
  message: string;
  /** For the log: which rule. */
  rule: 'host' | 'origin' | 'content_type' | 'token';
}

/** The default access of a route by its method. */
export function defaultAccess(method: string): RouteAccess {
  return ['GET', 'HEAD', 'OPTIONS'].includes(method.toUpperCase()) ? 'read' : 'write';
}

/** The host name of a `Host` header value without port, brackets or trailing dot, lower case. */
export function hostName(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') > 0 ? h.indexOf(']') : undefined);
  const colon = h.lastIndexOf(':');
  // One colon: name:port. More: a bare IPv6 address (not valid in Host, but not a name either).
  const name = colon >= 0 && h.indexOf(':') === colon ? h.slice(0, colon) : h;
  return name.replace(/\.$/, '');
}

export class RequestGuard {
  private readonly names: Set<string>;
  private readonly tokenForWrites: boolean;
  private readonly tokenForReads: boolean;
  private readonly beyondLoopback: boolean;

  constructor(private readonly o: GuardOptions) {
    this.names = new Set(['localhost', hostname().toLowerCase(), hostName(o.host), ...(o.allowedHosts ?? []).map(hostName)]);
    this.beyondLoopback = !isLoopbackHost(o.host);
    this.tokenForWrites = this.beyondLoopback || o.apiToken !== undefined;
    this.tokenForReads = o.requireTokenForReads ?? o.apiToken !== undefined;
  }

  /** Whether reads need the token (for /status output and the HMI page). */
  get readsNeedToken(): boolean {
    return this.tokenForReads;
  }

  /** The Host check, for every request before routing. */
  checkHost(headers: IncomingHttpHeaders): Refusal | null {
    const host = headers.host;
    if (host === undefined || host === '') return null;
    const name = hostName(host);
    if (isIP(name) !== 0 || this.names.has(name)) return null;
    return {
      status: 403,
      code: 'host_not_allowed',
      rule: 'host',
      message: `Host "${clip(host)}" is not a name of this gateway; add it to http.allowed_hosts if operators use it in the address bar (other names are refused against DNS rebinding)`,
    };
  }

  /** The access rules of a matched route. */
  checkAccess(headers: IncomingHttpHeaders, access: RouteAccess): Refusal | null {
    if (access === 'public') return null;
    if (access === 'read') return this.tokenForReads ? this.checkToken(headers, 'reads') : null;
    if (access === 'confidential') return this.tokenForReads || (this.beyondLoopback && !this.o.apiToken) ? this.checkToken(headers, 'confidential reads') : null;
    return this.checkSameOrigin(headers) ?? this.checkContentType(headers) ?? (this.tokenForWrites ? this.checkToken(headers, 'writes') : null);
  }

  private checkSameOrigin(headers: IncomingHttpHeaders): Refusal | null {
    const origin = one(headers.origin);
    if (origin !== undefined) {
      const host = one(headers.host)?.toLowerCase();
      const o = origin.toLowerCase();
      if (!host || (o !== `http://${host}` && o !== `https://${host}`)) {
        return {
          status: 403,
          code: 'cross_origin',
          rule: 'origin',
          message: `a write from the web page of another origin (${clip(origin)}) is refused: only this gateway's own pages and non-browser clients may change things`,
        };
      }
    }
    const site = one(headers['sec-fetch-site']);
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      return { status: 403, code: 'cross_origin', rule: 'origin', message: `a write from a ${clip(site)} web page is refused: only this gateway's own pages and non-browser clients may change things` };
    }
    return null;
  }

  private checkContentType(headers: IncomingHttpHeaders): Refusal | null {
    const type = one(headers['content-type']) ?? '';
    if (/^application\/json\s*(;|$)/i.test(type) || headers[WRITE_HEADER] !== undefined) return null;
    const fromBrowser = headers.origin !== undefined || headers['sec-fetch-site'] !== undefined || headers['sec-fetch-mode'] !== undefined;
    return {
      status: fromBrowser ? 403 : 415,
      code: fromBrowser ? 'cross_origin' : 'unsupported_media_type',
      rule: 'content_type',
      message: `writes need a JSON body with "Content-Type: application/json" (got ${type ? `"${clip(type)}"` : 'none'}), or an "X-Requested-By" header when there is no body`,
    };
  }

  /**
   * Why this server refuses some requests whatever they carry, for the start-up log: null when it
   * refuses none (it listens on localhost, or has an api_token).
   */
  get refusedWithoutToken(): string | null {
    if (!this.beyondLoopback || this.o.apiToken) return null;
    return `the local API listens on ${this.o.host}, beyond localhost, and http.api_token is not set: every write, and the console's reads of the configuration and of variable values, are refused; set http.api_token (at least 16 characters) to allow them`;
  }

  private checkToken(headers: IncomingHttpHeaders, what: 'reads' | 'confidential reads' | 'writes'): Refusal | null {
    if (!this.o.apiToken) {
      if (what === 'confidential reads') {
        return { status: 403, code: 'reads_disabled', rule: 'token', message: 'this API listens beyond localhost and http.api_token is not set, so the configuration and variable values are not shown; set http.api_token' };
      }
      return { status: 403, code: 'writes_disabled', rule: 'token', message: 'this API listens beyond localhost and http.api_token is not set, so writes are refused' };
    }
    const m = /^Bearer\s+(.+)$/i.exec(one(headers.authorization) ?? '');
    const given = Buffer.from(m?.[1] ?? '');
    const expected = Buffer.from(this.o.apiToken.reveal());
    if (given.length === expected.length && timingSafeEqual(given, expected)) return null;
    const why = what === 'writes' ? '' : ' (http.require_token_for_reads)';
    return { status: 401, code: 'unauthorized', rule: 'token', message: `${what === 'writes' ? 'writes' : 'reads'} need "Authorization: Bearer <http.api_token>"${why}` };
  }
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

/** Caller-controlled text in an answer or a log line: bounded and without control characters. */
export function clip(s: string): string {
  // eslint-disable-next-line no-control-regex
  const t = s.replace(/[\u0000-\u001f\u007f]/g, '?');
  return t.length > 100 ? `${t.slice(0, 100)}…` : t;
}
