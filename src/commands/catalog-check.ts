import type { MappedVariables } from '../config/mapped-variables.js';
import type { GatewayConfig } from '../config/schema.js';
import { backoffDelay } from '../core/backoff.js';
import { sleep } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { TokenError } from '../uplink/auth.js';
import type { Priority } from '../uplink/budget.js';
import { describeResult, type ApiResult, type TrackingClient } from '../uplink/client.js';

/**
 * `edge-gateway check --online`: are the credentials accepted, and does every machine variable the
 * configuration maps exist in the organisation? Lists come from `GET /machines` and
 * `GET /machine-variables`, every page (interface §8 cursor pagination), then the configuration's
 * variables are compared with them: ok, missing (with the settings that use them), and the
 * organisation's variables nothing maps (unmapped).
 *
 * Messages name settings and the origin of a secret, never its value.
 */

/** Exit codes of `check --online` (0 and 2 as for every command). */
export const CATALOG_EXIT = {
  ok: 0,
  /** The service or token endpoint could not be reached, or kept failing (5xx, 429). */
  unreachable: 1,
  /** Some mapped machine variables do not exist in the organisation. */
  missing: 3,
  /** The credentials or the organisation were refused (401, 403). */
  refused: 4,
} as const;

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

  get exitCode(): number {
    return CATALOG_EXIT[this.kind];
  }
}

export interface CatalogVariable {
  id: string;
  name: string;
  machineId: string | null;
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
 * budget: the running gateway's console reads at 'background', behind data (issue 21 §4).
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
    })),
    pages: { machines: machines.pages, machine_variables: variables.pages },
  };
}

export type CatalogRowState = 'ok' | 'missing' | 'unmapped';

export interface CatalogRow {
  state: CatalogRowState;
  variable: string;
  /** Machine name (or id when the machine list does not have it); null for missing variables. */
  machine: string | null;
  /** Config settings that map the variable; empty for unmapped ones. */
  usedBy: string[];
}

export interface CatalogComparison {
  /** Missing first (what needs fixing), then ok, then unmapped; config order within each. */
  rows: CatalogRow[];
  counts: { mapped: number; ok: number; missing: number; unmapped: number; organisation: number };
  openEnded: string[];
}

export function compareCatalog(mapped: MappedVariables, catalog: OrganisationCatalog): CatalogComparison {
  const known = new Map(catalog.variables.map((v) => [v.id, v]));
  const machineOf = (v: CatalogVariable | undefined) => (v?.machineId ? (catalog.machines.get(v.machineId) ?? v.machineId) : null);
  const missing: CatalogRow[] = [];
  const ok: CatalogRow[] = [];
  for (const [id, usedBy] of mapped.variables) {
    const v = known.get(id);
    (v ? ok : missing).push({ state: v ? 'ok' : 'missing', variable: id, machine: machineOf(v), usedBy });
  }
  const unmapped: CatalogRow[] = catalog.variables.filter((v) => !mapped.variables.has(v.id)).map((v) => ({ state: 'unmapped', variable: v.id, machine: machineOf(v), usedBy: [] }));
  return {
    rows: [...missing, ...ok, ...unmapped],
    counts: { mapped: mapped.variables.size, ok: ok.length, missing: missing.length, unmapped: unmapped.length, organisation: catalog.variables.length },
    openEnded: mapped.openEnded,
  };
}

const plural = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/** The table and summary `check --online` prints. */
export function renderCatalogReport(cmp: CatalogComparison): string {
  const header = { state: 'STATE', variable: 'MACHINE VARIABLE', machine: 'MACHINE', usedBy: 'USED BY' };
  const cells = cmp.rows.map((r) => ({ state: r.state, variable: r.variable, machine: r.machine ?? '-', usedBy: r.usedBy.length > 0 ? r.usedBy.join(', ') : '-' }));
  const width = (k: 'state' | 'variable' | 'machine') => Math.max(header[k].length, ...cells.map((c) => c[k].length));
  const w = { state: width('state'), variable: width('variable'), machine: width('machine') };
  const line = (c: typeof header) => `${c.state.padEnd(w.state)}  ${c.variable.padEnd(w.variable)}  ${c.machine.padEnd(w.machine)}  ${c.usedBy}`.trimEnd();
  const out = [line(header), ...cells.map(line), ''];
  const { mapped, ok, missing, unmapped, organisation } = cmp.counts;
  out.push(
    `mapped ${plural(mapped, 'machine variable')}: ${ok.toLocaleString('en-US')} found, ${missing === 0 ? 'none missing' : `${missing.toLocaleString('en-US')} MISSING in the organisation`}; ` +
      `${unmapped.toLocaleString('en-US')} of the organisation's ${plural(organisation, 'machine variable')} not mapped`,
  );
  for (const at of cmp.openEnded) {
    out.push(`note: ${at} also stores metrics named like a machine variable id (mvr_...) without a mapping entry; those can only be checked when data arrives`);
  }
  if (missing > 0) {
    out.push('Samples of a missing machine variable are refused by the service and set aside (edge-gateway set-aside list).');
    out.push('Fix the id in the setting named under USED BY, or create the variable in the tracking service.');
  }
  return `${out.join('\n')}\n`;
}
