import { createAnnotation } from './annotations.js';
import type { Auth } from './auth.js';
import { acceptBatch } from './batch.js';
import type { FixtureIndex } from './fixture.js';
import { readBody, readJson, type Reply } from './http.js';
import { noteBody, noteClient } from './journal.js';
import type { ImportJobs } from './import-jobs.js';
import { listObjects } from './lists.js';
import type { Handler, TrackingContext, TrackingHandler } from './server.js';
import type { Store } from './store.js';

/**
 * The endpoints the gateway calls (CONTRACT.md "Endpoints the gateway calls"), as handlers of the
 * server's routing table. Paths are relative to /tracking/v1 (§Conventions); the import-job status
 * paths are routed in server.ts because they carry the job id.
 */
export interface RouteDeps {
  fixture: FixtureIndex;
  store: Store;
  jobs: ImportJobs;
  now: () => number;
  /** How refused batch items are worded (fault refusal_wording). */
  wording?: () => 'detailed' | 'terse';
}

export function trackingRoutes(deps: RouteDeps): Record<string, Record<string, TrackingHandler>> {
  const scope = (ctx: TrackingContext) => ({ fixture: deps.fixture, organisationId: ctx.organisationId, principal: ctx.principal });
  return {
    '/machine-data/batch': {
      POST: async (ctx) => {
        const body = await readJson(ctx.req);
        noteBody(ctx.req, batchSummary(body));
        return acceptBatch(body, scope(ctx), deps.store, deps.wording?.() ?? 'detailed');
      },
    },
    '/machine-data/import-jobs': { POST: (ctx) => deps.jobs.upload(ctx.req, scope(ctx)) },
    '/machine-data-annotations': {
      POST: async (ctx) => {
        const body = await readJson(ctx.req);
        const o = (body ?? {}) as Record<string, unknown>;
        noteBody(ctx.req, { type: o.type ?? null, external_id: o.external_id ?? null, machine_variables: Array.isArray(o.machine_variables) ? o.machine_variables.length : null });
        return createAnnotation(body, { ...scope(ctx), store: deps.store, now: deps.now });
      },
    },
    '/machines': { GET: (ctx) => listObjects('machines', ctx.query, scope(ctx)) },
    '/machine-variables': { GET: (ctx) => listObjects('machine-variables', ctx.query, scope(ctx)) },
  };
}

/** POST {auth_url}/oauth2/token (§5.2-5.3); the form body has the JSON body's size limit [A]. */
export function tokenHandler(auth: Auth, store: Store): Handler {
  return async (ctx): Promise<Reply> => {
    const body = await readBody(ctx.req);
    // The journal gets the form's grant and audience and the client id, never the secret.
    const form = new URLSearchParams(body.toString('utf8'));
    noteBody(ctx.req, { grant_type: form.get('grant_type'), audience: form.get('audience') });
    const basic = /^Basic\s+(\S+)/i.exec(ctx.req.headers.authorization ?? '')?.[1];
    const clientId = basic ? Buffer.from(basic, 'base64').toString('utf8').split(':')[0] : '';
    if (clientId) noteClient(ctx.req, clientId);
    const r = auth.issueToken(ctx.req.headers.authorization, ctx.req.headers['content-type'], body.toString('utf8'));
    if (!r.ok) return { status: r.failure.status, body: r.failure.body, headers: r.failure.headers };
    store.tokensIssued++;
    return { status: 200, body: r.body, headers: { 'Cache-Control': 'no-store' } };
  };
}

/** Journal summary of a batch body: item count, distinct variables and the time span sent. */
function batchSummary(body: unknown): Record<string, unknown> {
  const items = (body as { items?: unknown } | null)?.items;
  if (!Array.isArray(items)) return { items: null };
  const variables = new Set<unknown>();
  let first: string | undefined;
  let last: string | undefined;
  for (const it of items) {
    const o = (it ?? {}) as Record<string, unknown>;
    variables.add(o.machine_variable_id ?? o.machine_data_point_config_id);
    if (typeof o.timestamp === 'string') {
      if (first === undefined || o.timestamp < first) first = o.timestamp;
      if (last === undefined || o.timestamp > last) last = o.timestamp;
    }
  }
  return { items: items.length, machine_variables: variables.size, first_timestamp: first ?? null, last_timestamp: last ?? null };
}
