import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { formatIssues } from '../config/issues.js';
import { BASE_PATH, EMULATOR_PATH } from './contract.js';
import { parseFaults, type FaultState } from './faults.js';
import type { FixtureIndex } from './fixture.js';
import { badRequest, errorReply, notFound, parseJsonBody, readBody, readJson, type Reply } from './http.js';
import type { JournalQuery, RequestJournal } from './journal.js';
import type { Store } from './store.js';

/**
 * Inspection and fault API under /_emulator/ [A, emulator only; not part of the tracking service].
 * No authentication, no rate limit, no faults, not counted in the stats.
 *
 *   GET    /_emulator/stats
 *   GET    /_emulator/values[?machine_variable_id=mvr_...]
 *   GET    /_emulator/value-keys[?prefix=mvr_...&limit=N&starting_after=mvr_...&values=1]
 *   GET    /_emulator/annotations
 *   GET    /_emulator/import-jobs
 *   GET    /_emulator/faults     POST (merge a setting)     DELETE (clear)
 *   GET    /_emulator/requests[?limit=N&path=/machine-data/batch&status=400]   DELETE (clear)
 *   GET    /_emulator/fixture    (client secrets and API keys redacted)
 *   POST   /_emulator/tokens/expire
 *   POST   /_emulator/reset      optional body {"tokens": true, "faults": true}
 *   POST   /_emulator/machine-variables   {"id", "name", "unit", "machine"}: create a variable now
 */

export interface InspectorDeps {
  fixture: FixtureIndex;
  store: Store;
  faults: FaultState;
  /** Clears stored data, jobs, counters, journal and rate-limit windows; re-seeds; tokens and faults when asked. */
  reset: (opts: { tokens?: boolean; faults?: boolean }) => Promise<void>;
  journal: RequestJournal;
  expireTokens: () => number;
  publicFixture: () => unknown;
  /** The stats with what the store does not keep (the rate limiter's neighbour); default the store's. */
  stats?: () => unknown;
}

const resetSchema = z.strictObject({ tokens: z.boolean().optional(), faults: z.boolean().optional() });
const variableSchema = z.strictObject({
  id: z.string().regex(/^mvr_[A-Za-z0-9_]+$/, { error: 'is not a machine variable id (mvr_...)' }),
  name: z.string().min(1).max(200),
  unit: z.string().max(50).default(''),
  machine: z.string().min(1),
});

const ENDPOINTS = [
  'GET /_emulator/stats',
  'GET /_emulator/values?machine_variable_id=mvr_...',
  'GET /_emulator/values',
  'GET /_emulator/value-keys?prefix=mvr_...&limit=N&starting_after=mvr_...&values=1',
  'GET /_emulator/annotations',
  'GET /_emulator/import-jobs',
  'GET /_emulator/faults',
  'POST /_emulator/faults',
  'DELETE /_emulator/faults',
  'GET /_emulator/requests?limit=N&path=/machine-data/batch&status=400',
  'DELETE /_emulator/requests',
  'GET /_emulator/fixture',
  'POST /_emulator/tokens/expire',
  'POST /_emulator/reset',
  'POST /_emulator/reset with body {"tokens": true, "faults": true}',
  'POST /_emulator/machine-variables with body {"id": "mvr_...", "name": "...", "unit": "°C", "machine": "mch_..."}',
];

/** ?limit=&path=&status= of GET /_emulator/requests; 400 naming the parameter. */
function journalQuery(query: URLSearchParams): JournalQuery {
  const q: JournalQuery = {};
  const limit = query.get('limit');
  if (limit !== null) {
    if (!/^\d+$/.test(limit) || Number(limit) < 1) throw badRequest(`limit: "${limit}" is not a whole number of 1 or more`);
    q.limit = Number(limit);
  }
  const path = query.get('path');
  if (path !== null) {
    if (!path.startsWith('/')) throw badRequest(`path: "${path}" must start with / (full, or relative to ${BASE_PATH})`);
    q.path = path;
  }
  const status = query.get('status');
  if (status !== null) {
    if (status === 'dropped') q.status = 'dropped';
    else if (/^\d{3}$/.test(status)) q.status = Number(status);
    else throw badRequest(`status: "${status}" is not an HTTP status or "dropped"`);
  }
  return q;
}

const VALUE_KEYS_MAX_PAGE = 10_000;

/** ?prefix=&limit=&starting_after=&values= of GET /_emulator/value-keys; 400 naming the parameter. */
function valueKeysQuery(query: URLSearchParams): { prefix: string; startingAfter: string | null; limit: number; values: boolean } {
  const limit = query.get('limit') ?? '1000';
  if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > VALUE_KEYS_MAX_PAGE) throw badRequest(`limit: "${limit}" is not a whole number from 1 to ${VALUE_KEYS_MAX_PAGE}`);
  const values = query.get('values') ?? '0';
  if (values !== '0' && values !== '1') throw badRequest(`values: "${values}" is not 0 or 1`);
  return { prefix: query.get('prefix') ?? '', startingAfter: query.get('starting_after'), limit: Number(limit), values: values === '1' };
}

export class Inspector {
  constructor(private readonly deps: InspectorDeps) {}

  async handle(method: string, path: string, query: URLSearchParams, req: IncomingMessage): Promise<Reply> {
    const { store, faults } = this.deps;
    const sub = path.slice(EMULATOR_PATH.length) || '/';
    const notAllowed = (allow: string): Reply => errorReply(405, 'method_not_allowed', `${method} is not allowed on ${path} (allowed: ${allow})`, { headers: { Allow: allow } });
    switch (sub) {
      case '/':
        return method === 'GET' ? { status: 200, body: { endpoints: ENDPOINTS } } : notAllowed('GET');
      case '/stats':
        return method === 'GET' ? { status: 200, body: this.deps.stats?.() ?? store.stats() } : notAllowed('GET');
      case '/values': {
        if (method !== 'GET') return notAllowed('GET');
        const id = query.get('machine_variable_id');
        if (id === null) return { status: 200, body: store.valueCounts() };
        if (!this.deps.fixture.variables.has(id)) throw notFound(`unknown machine variable "${id}"`);
        return { status: 200, body: store.valuesOf(id) };
      }
      case '/value-keys':
        return method === 'GET' ? { status: 200, body: store.valueKeys(valueKeysQuery(query)) } : notAllowed('GET');
      case '/annotations':
        return method === 'GET' ? { status: 200, body: store.annotations.map((a) => ({ organisation_id: a.organisation_id, ...a.annotation })) } : notAllowed('GET');
      case '/import-jobs':
        return method === 'GET' ? { status: 200, body: [...store.jobs.values()].map((j) => ({ organisation_id: j.organisationId, ...j.view })) } : notAllowed('GET');
      case '/faults':
        if (method === 'GET') return { status: 200, body: faults.get() };
        if (method === 'DELETE') {
          faults.clear();
          return { status: 200, body: faults.get() };
        }
        if (method === 'POST') {
          const body = await readJson(req);
          let setting;
          try {
            setting = parseFaults(body);
          } catch (err) {
            throw badRequest((err as Error).message);
          }
          faults.set(setting);
          return { status: 200, body: faults.get() };
        }
        return notAllowed('GET, POST, DELETE');
      case '/reset': {
        if (method !== 'POST') return notAllowed('POST');
        const raw = await readBody(req);
        const parsed = resetSchema.safeParse(raw.length === 0 ? {} : parseJsonBody(raw));
        if (!parsed.success) throw badRequest(formatIssues(parsed.error.issues, [], resetSchema).join('; '));
        await this.deps.reset(parsed.data);
        return { status: 200, body: { reset: true } };
      }
      case '/requests':
        if (method === 'GET') return { status: 200, body: this.deps.journal.list(journalQuery(query), BASE_PATH) };
        if (method === 'DELETE') {
          this.deps.journal.clear();
          return { status: 200, body: { cleared: true } };
        }
        return notAllowed('GET, DELETE');
      case '/fixture':
        return method === 'GET' ? { status: 200, body: this.deps.publicFixture() } : notAllowed('GET');
      case '/machine-variables': {
        // An operator creating a machine variable in the service, while the emulator runs.
        if (method !== 'POST') return notAllowed('POST');
        const parsed = variableSchema.safeParse(await readJson(req));
        if (!parsed.success) throw badRequest(formatIssues(parsed.error.issues, [], variableSchema).join('; '));
        try {
          const v = this.deps.fixture.addVariable(parsed.data);
          return { status: 201, body: { id: v.id, name: v.name, unit: v.unit, machine: v.machineId } };
        } catch (err) {
          throw badRequest((err as Error).message);
        }
      }
      case '/tokens/expire':
        return method === 'POST' ? { status: 200, body: { expired: this.deps.expireTokens() } } : notAllowed('POST');
      default:
        throw notFound(`no emulator endpoint ${path}; see GET ${EMULATOR_PATH}/`);
    }
  }
}
