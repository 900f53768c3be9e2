import type { GatewayConfig } from '../config/schema.js';
import { backoffDelay } from '../core/backoff.js';
import { sleep } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { TokenError } from './auth.js';
import type { Priority } from './budget.js';
import { describeResult, type ApiResult, type TrackingClient } from './client.js';

/**
 * The organisation's catalog from the tracking service: are the credentials accepted, and which
 * machines and machine variables exist? Lists come from `GET /machines` and `GET /machine-variables`,
 * every page (interface §8 cursor pagination). Read by `edge-gateway check --online`
 * (commands/catalog-check.ts compares them with the configuration) and by the console's variable
 * catalog (console/catalog.ts).
 *
 * Messages name settings and the origin of a secret, never its value.
 */

export type CatalogFailureKind = 'refused' | 'unreachable';

/** Why the catalog could not be read; `message` is for the operator. */
export class CatalogCheckError extends Error {
  constructor(
    readonly kind: CatalogFailureKind,
    message: string,
  ) {
    super(message);
    this.name = 'CatalogCheckError';
  }
}

export interface CatalogVariable {
  id: string;
  name: string;
  machineId: string | null;
  /** The unit the organisation's catalog gives the variable (`°C`), null when it gives none. */
  unit: string | null;
}

export interface OrganisationCatalog {
  machines: Map<string, string>;
  variables: CatalogVariable[];
  pages: { machines: number; machine_variables: number };
}

/** The largest page the service gives (§8: limit 1-50). */
const PAGE_LIMIT = 50;
/** Attempts per page when the service answers 429, 5xx or not at all. */
const MAX_ATTEMPTS = 3;
const MAX_WAIT_MS = 15_000;
/** Between attempts of a failed list or token call: 500 ms, doubling, at most MAX_WAIT_MS. */
const RETRY_BACKOFF = { initialMs: 500, maxMs: MAX_WAIT_MS, factor: 2 } as const;

/** The settings an operator fixes when the credentials are refused, with where the secret came from. */
export function credentialSettings(service: GatewayConfig['service']): string {
  const auth = service.auth;
  if (auth.mode === 'client_credentials') return `service.auth.client_id (${auth.client_id}) and service.auth.client_secret (from ${auth.client_secret.origin})`;
  const secondary = auth.secondary_api_key ? ` or service.auth.secondary_api_key (from ${auth.secondary_api_key.origin})` : '';
  return `service.auth.api_key (from ${auth.api_key.origin})${secondary}`;
}

interface Failure {
  kind: CatalogFailureKind;
  message: string;
  /** Wait before another attempt, or null when trying again cannot help. */
  retryInMs: number | null;
}

/** Turns a failed list call into what the operator should read and whether to try again. */
function classify(r: ApiResult, what: string, service: GatewayConfig['service'], attempt: number): Failure {
  const backoff = backoffDelay(RETRY_BACKOFF, attempt);
  if (r.status === 0) {
    return { kind: 'unreachable', message: `${what}: no answer from the tracking service (${r.networkError?.code ?? 'error'}: ${r.networkError?.message ?? ''}); check service.base_url (${service.base_url})${service.auth_url ? ` and service.auth_url (${service.auth_url})` : ''} and the network`, retryInMs: backoff };
  }
  if (r.status === 401) {
    const detail = r.error?.code === 'token_rejected' ? r.error.message : `the tracking service refused the credential (${describeResult(r)})`;
    return { kind: 'refused', message: `${what}: ${detail}. Check ${credentialSettings(service)}`, retryInMs: null };
  }
  if (r.status === 403) {
    return { kind: 'refused', message: `${what}: the tracking service refuses organisation ${service.organisation_id} for these credentials (${describeResult(r)}). Check service.organisation_id and which organisations the credentials may use`, retryInMs: null };
  }
  if (r.status === 404) {
    return { kind: 'unreachable', message: `${what}: the tracking service has no such endpoint (${describeResult(r)}); check service.base_url (${service.base_url})`, retryInMs: null };
  }
  if (r.status === 429) {
    return { kind: 'unreachable', message: `${what}: the tracking service kept answering 429 (rate limited); try again in a minute`, retryInMs: Math.min(MAX_WAIT_MS, Math.max(r.retryAfterMs ?? 0, backoff)) };
  }
  if (r.status >= 500) return { kind: 'unreachable', message: `${what}: the tracking service failed (${describeResult(r)})`, retryInMs: backoff };
  return { kind: 'unreachable', message: `${what}: unexpected answer (${describeResult(r)})`, retryInMs: null };
}

/**
 * Obtains a token with the configured client credentials, so a refused secret is reported as such
 * before any list is read. API keys have no token step: the first list call checks them.
 * Returns the line to print after "credentials".
 */
export async function verifyCredentials(client: TrackingClient, service: GatewayConfig['service'], signal?: AbortSignal): Promise<string> {
  const auth = service.auth;
  if (auth.mode !== 'client_credentials') return `API key (from ${auth.api_key.origin}); the first list call checks it`;
  for (let attempt = 1; ; attempt++) {
    try {
      await client.credentials.bearer(signal);
      return `ok: token issued to client ${auth.client_id} (secret from ${auth.client_secret.origin})`;
    } catch (err) {
      if (!(err instanceof TokenError)) throw new CatalogCheckError('unreachable', `token: ${describeError(err)}`);
      if (err.code === 'TOKEN_REJECTED') throw new CatalogCheckError('refused', `${err.message.replace(/; check .*$/, '')}. Check ${credentialSettings(service)}`);
      const retryable = err.code === 'TOKEN_RATE_LIMITED' || err.status === 0 || err.status >= 500;
      if (!retryable || attempt >= MAX_ATTEMPTS) {
        const hint = err.status === 0 ? `; check service.auth_url (${service.auth_url}) and the network` : '';
        throw new CatalogCheckError('unreachable', `token: ${err.message}${hint}`);
      }
      await sleep(Math.min(MAX_WAIT_MS, Math.max(err.retryAfterMs ?? 0, backoffDelay(RETRY_BACKOFF, attempt))), signal);
    }
  }
}

/** Every record of one list, walking the cursor until `has_more` is false. */
async function listAll(client: TrackingClient, kind: 'machines' | 'machine_variables', service: GatewayConfig['service'], signal?: AbortSignal, priority?: Priority) {
  const what = `GET ${kind === 'machines' ? '/machines' : '/machine-variables'}`;
  const records: Array<Record<string, unknown> & { id: string }> = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    let body;
    for (let attempt = 1; ; attempt++) {
      const r = await client.listPage(kind, { limit: PAGE_LIMIT, starting_after: cursor }, signal, priority);
      if (r.ok && r.body) {
        body = r.body;
        break;
      }
      const f = classify(r, what, service, attempt);
      if (f.retryInMs === null || attempt >= MAX_ATTEMPTS) throw new CatalogCheckError(f.kind, f.message);
      await sleep(f.retryInMs, signal);
    }
    pages += 1;
    records.push(...(body.data as Array<Record<string, unknown> & { id: string }>));
    const next = body.pagination.next_cursor;
    if (!body.pagination.has_more || !next) return { records, pages };
    // A cursor that does not move would loop forever on a misbehaving service.
    if (next === cursor) throw new CatalogCheckError('unreachable', `${what}: the service returned the same cursor twice (${next}); the list cannot be walked`);
    cursor = next;
  }
}

/**
 * Reads the organisation's machines and machine variables, every page. `priority` in the request
 * budget: the running gateway's console reads at 'background', behind data.
 */
export async function fetchCatalog(client: TrackingClient, service: GatewayConfig['service'], options: { signal?: AbortSignal; priority?: Priority } = {}): Promise<OrganisationCatalog> {
  const machines = await listAll(client, 'machines', service, options.signal, options.priority);
  const variables = await listAll(client, 'machine_variables', service, options.signal, options.priority);
  return {
    machines: new Map(machines.records.map((m) => [m.id, typeof m.name === 'string' ? m.name : m.id])),
    variables: variables.records.map((v) => ({
      id: v.id,
      name: typeof v.name === 'string' ? v.name : '',
      machineId: typeof (v.machine as { id?: unknown } | undefined)?.id === 'string' ? (v.machine as { id: string }).id : null,
      unit: typeof v.unit === 'string' && v.unit.trim() !== '' ? v.unit : null,
    })),
    pages: { machines: machines.pages, machine_variables: variables.pages },
  };
}
