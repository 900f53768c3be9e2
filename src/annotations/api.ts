import { HttpError, type LocalHttpServer, type Reply, type RouteContext } from '../http/server.js';
import type { AnnotationListResponse, PanelView } from './api-model.js';
import type { AnnotationViews } from './annotation-view.js';
import { entryView, type DeliveryState, type Origin } from './model.js';
import { AnnotationError, downtimeView, type AnnotationService } from './service.js';
import type { AnnotationStore } from './store.js';
import { registerHmiPage } from './hmi-page.js';

/**
 * The local HTTP API of operator annotations, on the gateway's own server (src/http/server.ts gives
 * every route the rate limit, the body size limit, and the checks of src/http/guard.ts: Host, and
 * for writes same origin, a JSON or X-Requested-By request and the bearer token).
 *
 *   GET  /                                       operator (HMI) page, its bundle under /hmi (hmi-page.ts)
 *   GET  /api/panel                              what the page shows, in one request
 *   GET  /api/annotations?limit=&state=&machine= recent outbox entries with their delivery state
 *   GET  /api/annotations/:external_id           one entry
 *   POST /api/annotations                        create an instant or range annotation (§2.3 body)
 *   GET  /api/machines                           configured machines and their open downtimes
 *   POST /api/machines/:machine/downtime/start   body {reason?, text?, at?}
 *   POST /api/machines/:machine/downtime/stop    body {reason?, text?, at?}: queues the range annotation
 *   POST /api/machines/:machine/downtime/cancel  forget a downtime started by mistake
 *
 * Errors: `{error: {code, message, field, problems?}}`, `field` naming the JSON field at fault.
 */

export interface ApiDeps {
  service: AnnotationService;
  store: AnnotationStore;
  /** Annotations with their alarm details, links and flags; plain entries without. */
  views?: AnnotationViews;
  /** Panel data (machines, detector episodes, uplink, recent entries). */
  panel: () => PanelView;
  title: string;
  hmiEnabled: boolean;
  isClosed: () => boolean;
}

const STATES: DeliveryState[] = ['queued', 'delivered', 'refused'];
const ORIGIN_HEADER = 'x-annotation-origin';

function originOf(ctx: RouteContext): Origin {
  const h = ctx.req.headers[ORIGIN_HEADER];
  const v = Array.isArray(h) ? h[0] : h;
  return v === 'hmi' || v === 'cli' ? v : 'api';
}

function errorReply(err: AnnotationError): Reply {
  return {
    status: err.status,
    json: { error: { code: err.code, message: err.message, ...(err.field ? { field: err.field } : {}), ...(err.problems ? { problems: err.problems } : {}), ...(err.detail ?? {}) } },
  };
}

export function registerAnnotationRoutes(http: LocalHttpServer, deps: ApiDeps): void {
  const { service, store } = deps;

  /** Wraps a handler: refuses during shutdown, turns AnnotationErrors into JSON replies. */
  const guarded =
    (fn: (ctx: RouteContext) => Promise<Reply> | Reply) =>
    async (ctx: RouteContext): Promise<Reply> => {
      if (deps.isClosed()) throw new HttpError(503, 'shutting_down', 'the gateway is stopping; try again in a moment');
      try {
        return await fn(ctx);
      } catch (err) {
        if (err instanceof AnnotationError) return errorReply(err);
        throw err;
      }
    };

  if (deps.hmiEnabled) registerHmiPage(http, deps.title);

  http.route('GET', '/api/panel', guarded(() => ({ json: deps.panel() })), { name: 'annotations_panel', essential: true });

  http.route(
    'GET',
    '/api/annotations',
    guarded((ctx) => {
      const q = ctx.url.searchParams;
      const limitText = q.get('limit');
      const limit = limitText === null ? 50 : Number(limitText);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1_000) throw new HttpError(400, 'bad_request', `limit: ${JSON.stringify(limitText)} is not a whole number from 1 to 1000`, 'limit');
      const state = q.get('state');
      if (state !== null && !STATES.includes(state as DeliveryState)) throw new HttpError(400, 'bad_request', `state: ${JSON.stringify(state)} is not one of ${STATES.join(', ')}`, 'state');
      const machine = q.get('machine');
      if (machine !== null) service.machine(machine);
      const entries = store.recent(limit, { state: (state as DeliveryState | null) ?? undefined, machine: machine ?? undefined });
      const view = deps.views;
      return {
        json: {
          annotations: entries.map((e) => (view ? view.entry(e) : entryView(e))),
          counts: store.counts(),
          // Machine conditions active now: their range annotation is queued when they end.
          open_alarms: view ? view.openAlarms(machine ?? undefined) : [],
        } satisfies AnnotationListResponse,
      };
    }),
    { name: 'annotations_list' },
  );

  http.route(
    'GET',
    '/api/annotations/:external_id',
    guarded((ctx) => {
      const e = store.byExternalId(ctx.params.external_id);
      if (!e) throw new HttpError(404, 'not_found', `external_id: no annotation "${ctx.params.external_id}" in the outbox (delivered and refused ones are kept for annotations.retention)`, 'external_id');
      return { json: { annotation: deps.views ? deps.views.entry(e) : entryView(e) } };
    }),
    { name: 'annotations_get' },
  );

  http.route(
    'POST',
    '/api/annotations',
    guarded(async (ctx) => {
      const body = await ctx.json();
      const { entry, created } = service.create(body, originOf(ctx));
      return { status: created ? 201 : 200, json: { annotation: entryView(entry), created } };
    }),
    { name: 'annotations_create' },
  );

  http.route(
    'GET',
    '/api/machines',
    guarded(() => ({
      json: {
        machines: [...service.machines.values()].map((m) => {
          const open = service.openDowntime(m.key);
          return { key: m.key, name: m.name, machine_variables: m.machineVariables, reasons: m.reasons, downtime: open ? downtimeView(open) : null };
        }),
      },
    })),
    { name: 'machines_list' },
  );

  /**
   * Start/stop/cancel accept an empty body or a JSON object. Bodiless, they still need
   * `Content-Type: application/json` or an `X-Requested-By` header (the guard's CSRF rule).
   */
  const optionalBody = async (ctx: RouteContext): Promise<unknown> => {
    const length = Number(ctx.req.headers['content-length'] ?? 0);
    const chunked = ctx.req.headers['transfer-encoding'] !== undefined;
    if (length === 0 && !chunked) return {};
    return ctx.json();
  };

  http.route(
    'POST',
    '/api/machines/:machine/downtime/start',
    guarded(async (ctx) => {
      const body = await optionalBody(ctx);
      const d = service.startDowntime(ctx.params.machine, body, originOf(ctx));
      return { status: 201, json: { downtime: downtimeView(d) } };
    }),
    { name: 'downtime_start', essential: true },
  );

  http.route(
    'POST',
    '/api/machines/:machine/downtime/stop',
    guarded(async (ctx) => {
      const body = await optionalBody(ctx);
      const entry = service.stopDowntime(ctx.params.machine, body, originOf(ctx));
      return { status: 201, json: { annotation: entryView(entry) } };
    }),
    { name: 'downtime_stop', essential: true },
  );

  http.route(
    'POST',
    '/api/machines/:machine/downtime/cancel',
    guarded(async (ctx) => {
      await optionalBody(ctx);
      const d = service.cancelDowntime(ctx.params.machine, originOf(ctx));
      return { json: { cancelled: downtimeView(d) } };
    }),
    { name: 'downtime_cancel', essential: true },
  );
}
