import { request, type Dispatcher } from 'undici';
import { redact } from '../core/redact.js';
import { z } from 'zod';
import type { Clock } from '../core/clock.js';
import { describeError, GatewayError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import type { Secret } from '../config/secrets.js';
import type { RequestBudget } from './budget.js';
import { parseRetryAfter } from './retry-policy.js';

/** Gives the bearer credential for a request (§5.5). */
export interface CredentialProvider {
  readonly mode: 'client_credentials' | 'api_key';
  /** The credential to send now; fetches a token when needed. Throws `TokenError`. */
  bearer(signal?: AbortSignal): Promise<string>;
  /** The service answered 401 to `credential`: forget it so the next `bearer()` gets another. Returns false when there is no other to try. */
  rejected(credential: string): boolean;
}

/** Why a token could not be had. `status` is the token endpoint's HTTP status, 0 for network errors. */
export class TokenError extends GatewayError {
  constructor(
    code: 'TOKEN_REJECTED' | 'TOKEN_UNAVAILABLE' | 'TOKEN_RATE_LIMITED' | 'TOKEN_BAD_RESPONSE',
    message: string,
    readonly status: number,
    readonly retryAfterMs?: number,
    cause?: unknown,
  ) {
    super(code, message, { cause });
    this.name = 'TokenError';
  }
}

const tokenResponse = z.object({
  access_token: z.string().min(1),
  expires_in: z.number().positive(),
  token_type: z.string().regex(/^bearer$/i),
});

export interface ClientCredentialsOptions {
  authUrl: string;
  clientId: string;
  clientSecret: Secret;
  audience: string;
  budget: RequestBudget;
  clock: Clock;
  dispatcher: Dispatcher;
  metrics: Metrics;
  timeoutMs: number;
}

/**
 * OAuth 2.0 client credentials (§5.1-5.4): fetch, cache, renew before expiry, forget on a 401.
 * Concurrent callers share one token request. The token call takes its slot from the same request
 * budget as everything else (§8 counts token calls too), at the highest priority.
 */
export class ClientCredentialsAuth implements CredentialProvider {
  readonly mode = 'client_credentials' as const;
  private token: { value: string; renewAt: number; expiresAt: number } | null = null;
  private inflight: Promise<string> | null = null;

  constructor(private readonly o: ClientCredentialsOptions) {}

  async bearer(signal?: AbortSignal): Promise<string> {
    const now = this.o.clock.monotonic();
    if (this.token && now < this.token.renewAt) return this.token.value;
    if (!this.inflight) {
      this.inflight = this.fetchToken(signal).finally(() => {
        this.inflight = null;
      });
    }
    // A token that is due for renewal but not yet expired still works if the renewal fails.
    try {
      return await this.inflight;
    } catch (err) {
      if (this.token && this.o.clock.monotonic() < this.token.expiresAt && !(err instanceof TokenError && err.code === 'TOKEN_REJECTED')) {
        return this.token.value;
      }
      throw err;
    }
  }

  rejected(credential: string): boolean {
    if (this.token?.value === credential) this.token = null;
    return true;
  }

  private async fetchToken(signal?: AbortSignal): Promise<string> {
    await this.o.budget.acquire('token', signal);
    const ticket = this.o.budget.ticket();
    const basic = Buffer.from(`${encodeURIComponent(this.o.clientId)}:${encodeURIComponent(this.o.clientSecret.reveal())}`).toString('base64');
    const form = new URLSearchParams({ grant_type: 'client_credentials', audience: this.o.audience }).toString();
    const started = this.o.clock.monotonic();
    let status = 0;
    let text = '';
    let headers: Record<string, string | string[] | undefined> = {};
    try {
      const res = await request(`${this.o.authUrl}/oauth2/token`, {
        method: 'POST',
        dispatcher: this.o.dispatcher,
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: form,
        headersTimeout: this.o.timeoutMs,
        bodyTimeout: this.o.timeoutMs,
        signal,
      });
      status = res.statusCode;
      headers = res.headers;
      // Outside text: an error that echoes the request must not carry the client secret further (issue 12 §3).
      text = redact(await res.body.text());
    } catch (err) {
      this.o.metrics.uplinkRequests.inc({ endpoint: 'token', status: 'network' });
      throw new TokenError('TOKEN_UNAVAILABLE', `token endpoint ${this.o.authUrl}/oauth2/token unreachable: ${describeError(err)}`, 0, undefined, err);
    } finally {
      this.o.metrics.uplinkRequestSeconds.observe({ endpoint: 'token' }, (this.o.clock.monotonic() - started) / 1000);
    }
    this.o.metrics.uplinkRequests.inc({ endpoint: 'token', status: String(status) });
    // §8 counts token calls too: a 429 here lowers the pace like any other.
    const retryAfterMs = status === 429 ? parseRetryAfter(headers['retry-after']) : undefined;
    this.o.budget.answered(status, ticket, retryAfterMs);
    if (status === 429) {
      throw new TokenError('TOKEN_RATE_LIMITED', 'token endpoint answered 429 (rate limited)', 429, retryAfterMs);
    }
    if (status === 400 || status === 401 || status === 403) {
      // Never echo the request; the body of the token endpoint is not specified (§5.9).
      throw new TokenError(
        'TOKEN_REJECTED',
        `the token service refused the client credentials (HTTP ${status}); check service.auth.client_id (${this.o.clientId}) and the client secret`,
        status,
      );
    }
    if (status < 200 || status >= 300) {
      throw new TokenError('TOKEN_UNAVAILABLE', `token endpoint answered HTTP ${status}`, status, parseRetryAfter(headers['retry-after']));
    }
    let parsed: z.infer<typeof tokenResponse>;
    try {
      parsed = tokenResponse.parse(JSON.parse(text));
    } catch (err) {
      throw new TokenError('TOKEN_BAD_RESPONSE', 'token endpoint answered 2xx without {access_token, expires_in, token_type: bearer} (§5.3)', status, undefined, err);
    }
    const lifetime = parsed.expires_in * 1000;
    const now = this.o.clock.monotonic();
    // Renew when 80 % of the lifetime has passed, and at least 30 s early when the lifetime allows.
    const renewIn = Math.max(lifetime * 0.5, Math.min(lifetime * 0.8, lifetime - 30_000));
    this.token = { value: parsed.access_token, renewAt: now + renewIn, expiresAt: now + lifetime };
    this.o.metrics.uplinkTokenRenewals.inc();
    return parsed.access_token;
  }
}

/**
 * Static API key (§5.8), primary and optional secondary for rotation: after a 401 on the primary
 * the secondary is used, and vice versa, so an operator can rotate keys without downtime.
 */
export class ApiKeyAuth implements CredentialProvider {
  readonly mode = 'api_key' as const;
  private current: 0 | 1 = 0;

  constructor(private readonly keys: readonly Secret[]) {
    if (keys.length === 0) throw new RangeError("at least one API key is required");
  }

  async bearer(): Promise<string> {
    return this.keys[this.current]?.reveal() ?? this.keys[0].reveal();
  }

  rejected(credential: string): boolean {
    if (this.keys.length < 2) return false;
    if (this.keys[this.current]?.reveal() === credential) this.current = this.current === 0 ? 1 : 0;
    return true;
  }
}
