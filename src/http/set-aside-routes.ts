import { z } from 'zod';
import type { SampleBuffer } from '../buffer/sample-buffer.js';
import type { SetAsideFilter } from '../buffer/set-aside.js';
import { formatIssues } from '../config/issues.js';
import { HttpError, type LocalHttpServer } from './server.js';

const filterSchema = z
  .strictObject({
    ids: z.array(z.number().int().positive()).min(1).optional(),
    variable: z.string().min(1).optional(),
    all: z.literal(true).optional(),
  })
  .refine((f) => f.ids !== undefined || f.variable !== undefined || f.all === true, { error: 'say which samples: "ids", "variable" or "all": true' });

function parseFilter(body: unknown): SetAsideFilter {
  const r = filterSchema.safeParse(body, { reportInput: true });
  if (!r.success) {
    const first = r.error.issues[0];
    throw new HttpError(400, 'bad_request', formatIssues(r.error.issues).join('; '), first?.path.join('.') || undefined);
  }
  return r.data;
}

/**
 * The set-aside API of a running gateway (what `edge-gateway set-aside` uses when the gateway runs):
 *   GET  /api/set-aside?limit=N&variable=mvr_...   summary and rows
 *   POST /api/set-aside/requeue  {ids | variable | all}   back into the queue
 *   POST /api/set-aside/drop     {ids | variable | all}   delete for good
 *
 * Requeue answers 200 `{requeued, remaining}` once every matching sample is committed to the
 * buffer, and 503 `{error: {code, message}, requeued, remaining}` when the buffer refused a step
 * (refuse_new on a full buffer): what was requeued before stays requeued, the rest stays set aside.
 */
export interface SetAsideRouteHooks {
  /** Samples matching `filter` went back into the queue (the uplink forgets them as unknown). */
  onRequeued?: (filter: SetAsideFilter) => void;
}

export function registerSetAsideRoutes(http: LocalHttpServer, buffer: SampleBuffer, hooks: SetAsideRouteHooks = {}): void {
  const store = buffer.setAsideStore;
  // Requeue works in steps and yields between them; one write at a time keeps a second request
  // from taking the same rows (or dropping rows a requeue step has just committed).
  let writes: Promise<unknown> = Promise.resolve();
  const serialized = <T>(fn: () => Promise<T> | T): Promise<T> => {
    const run = writes.then(fn);
    writes = run.catch(() => undefined);
    return run;
  };
  http.route('GET', '/api/set-aside', ({ url }) => {
    const limit = Number(url.searchParams.get('limit') ?? 100);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new HttpError(400, 'bad_request', `limit: "${url.searchParams.get('limit')}" is not a whole number from 1 to 10000`, 'limit');
    const variable = url.searchParams.get('variable') ?? undefined;
    return { json: { ...store.summary(), rows: store.list({ limit, variable }) } };
  }, { name: 'set-aside list' });
  http.route('POST', '/api/set-aside/requeue', async (ctx) => {
    const filter = parseFilter(await ctx.json());
    // Before the first step is committed, so the sync path does not set them aside again at once.
    if (store.count(filter) > 0) hooks.onRequeued?.(filter);
    const r = await serialized(() => store.requeue(buffer, filter));
    if (r.refused) {
      const message = `${r.requeued} sample(s) requeued, ${r.remaining} stay set aside: ${r.refused.reason}`;
      return { status: 503, json: { error: { code: r.refused.code, message }, requeued: r.requeued, remaining: r.remaining } };
    }
    return { json: { requeued: r.requeued, remaining: r.remaining } };
  }, { name: 'set-aside requeue' });
  http.route('POST', '/api/set-aside/drop', async (ctx) => {
    const filter = parseFilter(await ctx.json());
    return { json: { dropped: await serialized(() => store.drop(filter)) } };
  }, { name: 'set-aside drop' });
}
