import { MAX_BATCH_ITEMS, MIN_BATCH_ITEMS } from './contract.js';
import { badRequest, type Reply } from './http.js';
import { checkItem, describeProblem, isProblem, type ItemOk, type ItemScope } from './items.js';
import type { Store } from './store.js';

/**
 * POST /machine-data/batch (CONTRACT.md; §4.10, §8): `{items: [ITEM, ...]}` with 1 to 200 items.
 * One request is one unit: any invalid item makes it a 400 `{code: "bad_request", message}` naming
 * the first bad item's index and field, and nothing is stored; otherwise every item is stored.
 * [A] Success is 200 `{items_received: n}` (CONTRACT.md: any 2xx, body not relied on).
 * [A] Top-level fields other than `items` are refused.
 * With `terse` wording (fault refusal_wording) a bad item's 400 says only that the payload is
 * invalid: §7 promises `{code, message}` and nothing about the message's words.
 */
export const TERSE_REFUSAL = 'The request payload is invalid.';

export function acceptBatch(body: unknown, scope: ItemScope, store: Store, wording: 'detailed' | 'terse' = 'detailed'): Reply {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('request body: must be a JSON object {"items": [...]}');
  const o = body as Record<string, unknown>;
  for (const key in o) if (key !== 'items') throw badRequest(`${key}: unknown field (the body is {"items": [...]})`);
  const items = o.items;
  if (items === undefined) throw badRequest('items: required field is missing');
  if (!Array.isArray(items)) throw badRequest('items: must be a list');
  if (items.length < MIN_BATCH_ITEMS) throw badRequest(`items: needs at least ${MIN_BATCH_ITEMS} item`);
  if (items.length > MAX_BATCH_ITEMS) throw badRequest(`items: ${items.length} items is more than the maximum of ${MAX_BATCH_ITEMS}`);

  const ok: ItemOk[] = new Array(items.length);
  for (let i = 0; i < items.length; i++) {
    const r = checkItem(items[i], scope);
    if (isProblem(r)) throw badRequest(wording === 'terse' ? TERSE_REFUSAL : describeProblem(i, r));
    ok[i] = r;
  }
  for (let i = 0; i < ok.length; i++) store.put(ok[i].variable.id, ok[i].epochMs, ok[i].value);
  store.batchesAccepted++;
  return { status: 200, body: { items_received: items.length } };
}
