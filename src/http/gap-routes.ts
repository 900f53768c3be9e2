import type { GapLedger } from '../buffer/gaps.js';
import { HttpError, type LocalHttpServer } from './server.js';

/**
 * The gap ledger as JSON, for `edge-gateway gaps list` and the web console:
 *   GET /api/gaps?state=open|all&limit=N
 *   → {"gaps": [{id, source, variables (null = all of the source), from, to (null = open),
 *                reason, filled: no|partial|yes|pending, note (why not filled, or null),
 *                annotation: {state, external_id} | null}]}
 * Times are epoch milliseconds. Newest first. The shape is a contract with the console: add
 * fields or reasons, never rename.
 */
export function registerGapRoutes(http: LocalHttpServer, ledger: GapLedger): void {
  http.route('GET', '/api/gaps', ({ url }) => {
    const state = url.searchParams.get('state') ?? 'all';
    if (state !== 'open' && state !== 'all') throw new HttpError(400, 'bad_request', `state: ${JSON.stringify(state)} is not one of open, all`, 'state');
    const rawLimit = url.searchParams.get('limit') ?? '100';
    const limit = Number(rawLimit);
    if (!/^\d+$/.test(rawLimit) || !Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new HttpError(400, 'bad_request', `limit: ${JSON.stringify(rawLimit)} is not a whole number from 1 to 10000`, 'limit');
    return { json: { gaps: ledger.list({ state, limit }).map((g) => ledger.view(g)) } };
  }, { name: 'gaps list' });
}
