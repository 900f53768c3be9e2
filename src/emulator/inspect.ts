import type { IncomingMessage } from 'node:http';
import { EMULATOR_PATH } from './contract.js';
import { parseFaults, type FaultState } from './faults.js';
import type { FixtureIndex } from './fixture.js';
import { badRequest, errorReply, notFound, readJson, type Reply } from './http.js';
import type { Store } from './store.js';

/**
 * Inspection and fault API under /_emulator/ [A, emulator only; not part of the tracking service].
 * No authentication, no rate limit, no faults, not counted in the stats.
 *
 *   GET    /_emulator/stats
 *   GET    /_emulator/values[?machine_variable_id=mvr_...]
 *   GET    /_emulator/annotations
 *   GET    /_emulator/import-jobs
 *   GET    /_emulator/faults     POST (merge a setting)     DELETE (clear)
 *   POST   /_emulator/reset
 */

export interface InspectorDeps {
  fixture: FixtureIndex;
  store: Store;
  faults: FaultState;
  /** Clears stored data, jobs, counters and rate-limit windows. */
  reset: () => Promise<void>;
}

const ENDPOINTS = [
  'GET /_emulator/stats',
  'GET /_emulator/values?machine_variable_id=mvr_...',
  'GET /_emulator/values',
  'GET /_emulator/annotations',
  'GET /_emulator/import-jobs',
  'GET /_emulator/faults',
  'POST /_emulator/faults',
  'DELETE /_emulator/faults',
  'POST /_emulator/reset',
];

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
        return method === 'GET' ? { status: 200, body: store.stats() } : notAllowed('GET');
      case '/values': {
        if (method !== 'GET') return notAllowed('GET');
        const id = query.get('machine_variable_id');
        if (id === null) return { status: 200, body: store.valueCounts() };
        if (!this.deps.fixture.variables.has(id)) throw notFound(`unknown machine variable "${id}"`);
        return { status: 200, body: store.valuesOf(id) };
      }
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
      case '/reset':
        if (method !== 'POST') return notAllowed('POST');
        await this.deps.reset();
        return { status: 200, body: { reset: true } };
      default:
        throw notFound(`no emulator endpoint ${path}; see GET ${EMULATOR_PATH}/`);
    }
  }
}
