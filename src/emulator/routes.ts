import { createAnnotation } from './annotations.js';
import type { Auth } from './auth.js';
import { acceptBatch } from './batch.js';
import type { FixtureIndex } from './fixture.js';
import { readBody, readJson, type Reply } from './http.js';
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
}

export function trackingRoutes(deps: RouteDeps): Record<string, Record<string, TrackingHandler>> {
  const scope = (ctx: TrackingContext) => ({ fixture: deps.fixture, organisationId: ctx.organisationId, principal: ctx.principal });
  return {
    '/machine-data/batch': { POST: async (ctx) => acceptBatch(await readJson(ctx.req), scope(ctx), deps.store) },
    '/machine-data/import-jobs': { POST: (ctx) => deps.jobs.upload(ctx.req, scope(ctx)) },
    '/machine-data-annotations': {
      POST: async (ctx) => createAnnotation(await readJson(ctx.req), { ...scope(ctx), store: deps.store, now: deps.now }),
    },
    '/machines': { GET: (ctx) => listObjects('machines', ctx.query, scope(ctx)) },
    '/machine-variables': { GET: (ctx) => listObjects('machine-variables', ctx.query, scope(ctx)) },
  };
}

/** POST {auth_url}/oauth2/token (§5.2-5.3); the form body has the JSON body's size limit [A]. */
export function tokenHandler(auth: Auth, store: Store): Handler {
  return async (ctx): Promise<Reply> => {
    const body = await readBody(ctx.req);
    const r = auth.issueToken(ctx.req.headers.authorization, ctx.req.headers['content-type'], body.toString('utf8'));
    if (!r.ok) return { status: r.failure.status, body: r.failure.body, headers: r.failure.headers };
    store.tokensIssued++;
    return { status: 200, body: r.body, headers: { 'Cache-Control': 'no-store' } };
  };
}
