import { z } from 'zod';
import type { SampleBuffer } from '../buffer/sample-buffer.js';
import { SetAsideStore, type SetAsideFilter } from '../buffer/set-aside.js';
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
 */
export function registerSetAsideRoutes(http: LocalHttpServer, buffer: SampleBuffer): void {
  const store = new SetAsideStore(buffer.database);
  http.route('GET', '/api/set-aside', ({ url }) => {
    const limit = Number(url.searchParams.get('limit') ?? 100);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new HttpError(400, 'bad_request', `limit: "${url.searchParams.get('limit')}" is not a whole number from 1 to 10000`, 'limit');
    const variable = url.searchParams.get('variable') ?? undefined;
    return { json: { ...store.summary(), rows: store.list({ limit, variable }) } };
  }, { name: 'set-aside list' });
  http.route('POST', '/api/set-aside/requeue', async (ctx) => {
    const filter = parseFilter(await ctx.json());
    const rows = store.select(filter);
    // Committed to the queue first, then removed from set-aside: a crash in between leaves a
    // duplicate, never a loss (re-sending replaces the same value upstream).
    await buffer.append(rows.map((r) => ({ variable: r.variable, ts: r.ts, value: r.value })));
    store.deleteIds(rows.map((r) => r.id));
    return { json: { requeued: rows.length } };
  }, { name: 'set-aside requeue' });
  http.route('POST', '/api/set-aside/drop', async (ctx) => {
    const filter = parseFilter(await ctx.json());
    return { json: { dropped: store.drop(filter) } };
  }, { name: 'set-aside drop' });
}
