import { parseIsoWithOffset, toIsoUtc } from '../core/time.js';
import { ConfigError } from '../core/errors.js';
import { createAnnotation } from './annotations.js';
import type { Principal } from './auth.js';
import type { Fixture, FixtureIndex } from './fixture.js';
import { HttpError } from './http.js';
import { newId } from './ids.js';
import { checkItem, isProblem } from './items.js';
import type { ImportJobView, Store } from './store.js';

/**
 * Seeds [A, emulator only]: what a fixture says the service already holds (stored values,
 * annotations, import jobs), put into the store at start and again on every reset. Each seed goes
 * through the rule of the endpoint that would have stored it (items.ts for values, annotations.ts
 * for annotations), so a fixture cannot hold data the real service would have refused; problems are
 * reported all at once, each naming its entry (`annotations[1]: text: must not be blank`).
 */
export function seedStore(index: FixtureIndex, store: Store, now: () => number, source = 'fixture'): void {
  const f: Fixture = index.fixture;
  const problems: string[] = [];

  f.values.forEach((v, i) => {
    const variable = index.variables.get(v.machine_variable_id);
    if (!variable) {
      problems.push(`values[${i}].machine_variable_id: unknown machine variable "${v.machine_variable_id}"`);
      return;
    }
    const principal: Principal = { kind: 'client', name: 'fixture', organisations: new Set([variable.organisationId]), sites: null };
    const r = checkItem(v, { fixture: index, organisationId: variable.organisationId, principal });
    if (isProblem(r)) problems.push(`values[${i}]${r.field ? `.${r.field}` : ''}: ${r.message}`);
    else store.put(r.variable.id, r.epochMs, r.value);
  });

  f.annotations.forEach((a, i) => {
    const { organisation, ...body } = a as { organisation: string } & Record<string, unknown>;
    if (!index.organisations.has(organisation)) {
      problems.push(`annotations[${i}].organisation: unknown organisation "${organisation}"`);
      return;
    }
    const principal: Principal = { kind: 'client', name: 'fixture', organisations: new Set([organisation]), sites: null };
    try {
      createAnnotation(body, { fixture: index, organisationId: organisation, principal, store, now });
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      problems.push(`annotations[${i}]: ${err.message}`);
    }
  });

  f.import_jobs.forEach((j, i) => {
    if (!index.organisations.has(j.organisation)) {
      problems.push(`import_jobs[${i}].organisation: unknown organisation "${j.organisation}"`);
      return;
    }
    const at = (field: 'created_at' | 'finished_at', value: string | null | undefined): string | null | undefined => {
      if (value === undefined || value === null) return value;
      const ms = parseIsoWithOffset(value);
      if (ms === undefined) problems.push(`import_jobs[${i}].${field}: "${value}" is not an ISO 8601 date-time with an explicit offset`);
      return ms === undefined ? null : toIsoUtc(ms);
    };
    const created = at('created_at', j.created_at) ?? toIsoUtc(now());
    const ended = j.status === 'finished' || j.status === 'failed';
    const jobId = j.job_id ?? newId('job');
    if (store.jobs.has(jobId)) problems.push(`import_jobs[${i}].job_id: duplicate job id "${jobId}"`);
    const rejected = j.items_rejected ?? (ended ? 0 : null);
    const view: ImportJobView = {
      job_id: jobId,
      status: j.status,
      items_received: j.items_received,
      created_at: created,
      // §2.9: null until the job ends; a failed job accepted nothing.
      items_accepted: j.items_accepted ?? (j.status === 'finished' ? j.items_received - (rejected ?? 0) : j.status === 'failed' ? 0 : null),
      items_rejected: rejected,
      errors: j.errors ?? (j.status === 'failed' ? [{ index: null, code: 'job_failed', message: 'import job failed (fixture)' }] : ended ? [] : null),
      finished_at: at('finished_at', j.finished_at) ?? (ended ? created : null),
    };
    if (view.items_accepted !== null && view.items_rejected !== null && view.items_accepted + view.items_rejected > view.items_received) {
      problems.push(`import_jobs[${i}]: items_accepted ${view.items_accepted} + items_rejected ${view.items_rejected} is more than items_received ${view.items_received}`);
    }
    store.jobs.set(jobId, { organisationId: j.organisation, view });
  });

  if (problems.length) throw new ConfigError(problems.map((p) => `${source}: ${p}`));
}

/** The fixture as GET /_emulator/fixture shows it: client secrets and API keys replaced. */
export function publicFixture(index: FixtureIndex): unknown {
  const f = index.fixture;
  return {
    ...f,
    clients: f.clients.map((c) => ({ ...c, client_secret: '[redacted]' })),
    api_keys: f.api_keys.map((k) => ({ ...k, key: `[redacted; ${k.key.length} characters]` })),
  };
}
