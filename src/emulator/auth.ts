import { timingSafeEqual } from 'node:crypto';
import { AUDIENCE } from './contract.js';
import type { FixtureIndex } from './fixture.js';
import { newToken } from './ids.js';

/**
 * Authentication (§5): OAuth 2.0 client credentials at POST {auth_url}/oauth2/token, and bearer
 * credentials on every /tracking/v1 call, which are either such a token or a static API key scoped
 * to one organisation and a set of sites (§5.8).
 */

export interface Principal {
  kind: 'client' | 'api_key';
  /** Client id, or `api key` (the key itself never appears in messages). */
  name: string;
  /** Organisations this credential may name in Service-Organisation-Id (§5.6). */
  organisations: ReadonlySet<string>;
  /** Sites an API key is scoped to (§5.8); null for OAuth clients (every site of their organisations). */
  sites: ReadonlySet<string> | null;
}

export interface AuthFailure {
  status: number;
  body: { code: string; message: string };
  headers?: Record<string, string>;
}

export type TokenResult = { ok: true; body: { access_token: string; expires_in: number; token_type: 'bearer' } } | { ok: false; failure: AuthFailure };

const unauthorized = (message: string, scheme = 'Bearer'): AuthFailure => ({
  status: 401,
  body: { code: 'unauthorized', message },
  headers: { 'WWW-Authenticate': `${scheme} realm="tracking"` },
});
const badRequest = (message: string): AuthFailure => ({ status: 400, body: { code: 'bad_request', message } });

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export class Auth {
  private readonly tokens = new Map<string, { principal: Principal; expiresAt: number }>();
  private readonly clientPrincipals = new Map<string, Principal>();
  private readonly keyPrincipals = new Map<string, Principal>();
  private issued = 0;

  constructor(
    private readonly fixture: FixtureIndex,
    private readonly ttlSeconds: number,
    /** Monotonic ms (core/clock.ts); token expiry must not move with the wall clock. */
    private readonly monotonic: () => number,
  ) {
    for (const c of fixture.clients.values()) this.clientPrincipals.set(c.clientId, { kind: 'client', name: c.clientId, organisations: c.organisations, sites: null });
    for (const [key, k] of fixture.apiKeys) this.keyPrincipals.set(key, { kind: 'api_key', name: 'api key', organisations: new Set([k.organisationId]), sites: k.sites });
  }

  /**
   * POST /oauth2/token (§5.2-5.3). Error bodies are "not shown" (§5.9) [A]: `{code, message}` with
   * 401 for missing or wrong client credentials and 400 for a malformed request, the message naming
   * the field. Credentials are checked before the form.
   */
  issueToken(authorization: string | undefined, contentType: string | undefined, body: string): TokenResult {
    const basic = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(authorization ?? '');
    if (!basic) return { ok: false, failure: unauthorized('HTTP Basic authentication with client_id:client_secret is required (§5.2)', 'Basic') };
    const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return { ok: false, failure: unauthorized('HTTP Basic credentials must be client_id:client_secret', 'Basic') };
    const clientId = decoded.slice(0, colon);
    const secret = decoded.slice(colon + 1);
    const client = this.fixture.clients.get(clientId);
    if (!client || !sameText(client.secret, secret)) return { ok: false, failure: unauthorized('invalid client credentials', 'Basic') };

    const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') {
      return { ok: false, failure: badRequest(`Content-Type: ${contentType ? `"${contentType}"` : 'missing'}; the token request must be application/x-www-form-urlencoded`) };
    }
    const form = new URLSearchParams(body);
    const grant = form.get('grant_type');
    if (grant === null || grant === '') return { ok: false, failure: badRequest('grant_type: required field is missing (use client_credentials)') };
    if (grant !== 'client_credentials') return { ok: false, failure: badRequest(`grant_type: "${grant}" is not supported (use client_credentials)`) };
    const audience = form.get('audience');
    if (audience === null || audience === '') return { ok: false, failure: badRequest(`audience: required field is missing (use ${AUDIENCE})`) };
    if (audience !== AUDIENCE) return { ok: false, failure: badRequest(`audience: "${audience}" is not ${AUDIENCE}`) };

    const token = newToken();
    const now = this.monotonic();
    this.tokens.set(token, { principal: this.clientPrincipals.get(clientId)!, expiresAt: now + this.ttlSeconds * 1000 });
    if (++this.issued % 256 === 0) this.sweep(now);
    return { ok: true, body: { access_token: token, expires_in: this.ttlSeconds, token_type: 'bearer' } };
  }

  /** Checks `Authorization: Bearer <token or API key>` (§5.5, §5.8); 401 `unauthorized` otherwise (§7). */
  authenticate(authorization: string | undefined): Principal | AuthFailure {
    if (authorization === undefined || authorization === '') return unauthorized('missing Authorization header (Bearer token or API key)');
    if (authorization.length < 8 || authorization.slice(0, 7).toLowerCase() !== 'bearer ') return unauthorized('Authorization must use the Bearer scheme');
    const credential = authorization.slice(7).trim();
    const token = this.tokens.get(credential);
    if (token !== undefined) {
      if (this.monotonic() >= token.expiresAt) {
        this.tokens.delete(credential);
        return unauthorized('token expired');
      }
      return token.principal;
    }
    const key = this.keyPrincipals.get(credential);
    if (key !== undefined) return key;
    return unauthorized('invalid or expired token');
  }

  /** POST /_emulator/tokens/expire: every issued token answers 401 "token expired" from now on. */
  expireAll(): number {
    const now = this.monotonic();
    let n = 0;
    for (const t of this.tokens.values()) {
      if (t.expiresAt > now) n++;
      t.expiresAt = Math.min(t.expiresAt, now);
    }
    return n;
  }

  /** Forgets every issued token (reset with tokens): they answer 401 "invalid or expired token". */
  clear(): void {
    this.tokens.clear();
  }

  private sweep(now: number): void {
    for (const [t, v] of this.tokens) if (now >= v.expiresAt) this.tokens.delete(t);
  }
}

export function isFailure(x: Principal | AuthFailure): x is AuthFailure {
  return (x as AuthFailure).status !== undefined;
}
