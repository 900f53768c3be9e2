import type { Principal } from './auth.js';
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, MIN_PAGE_LIMIT, SITE_FILTER_PARAM } from './contract.js';
import type { FixtureIndex, MachineRecord, VariableRecord } from './fixture.js';
import { badRequest, type Reply } from './http.js';

/**
 * GET /machines (§4.2) and GET /machine-variables (§4.10) with the cursor pagination of §8:
 * `limit` 1-50 (default 10), `starting_after` an object id, response
 * `{data, pagination: {starting_after, limit, has_more, next_cursor}}` where `starting_after` is the
 * cursor used (null on the first page) and `next_cursor` is null when `has_more` is false.
 * Order: by id, stable. Records: machine `{id, name, site: {id, external_id}}` (§2.4); machine
 * variable `{id, name, machine: {id}, site: {id, external_id}, unit}` [A].
 * [A] Site filter parameter `site_id`; an unknown site (or one outside an API key's sites) is a 400.
 * [A] `starting_after` must be the id of an object of that kind the caller can see; else 400.
 * [A] An API key lists only the objects at its sites.
 * [A] Unknown query parameters are ignored.
 */

export interface ListScope {
  fixture: FixtureIndex;
  organisationId: string;
  principal: Principal;
}

type Kind = 'machines' | 'machine-variables';
type Rec = MachineRecord | VariableRecord;

function parseLimit(raw: string | null): number {
  if (raw === null) return DEFAULT_PAGE_LIMIT;
  if (!/^\d+$/.test(raw)) throw badRequest(`limit: "${raw}" is not an integer (${MIN_PAGE_LIMIT} to ${MAX_PAGE_LIMIT})`);
  const n = Number(raw);
  if (n < MIN_PAGE_LIMIT || n > MAX_PAGE_LIMIT) throw badRequest(`limit: ${n} is outside ${MIN_PAGE_LIMIT} to ${MAX_PAGE_LIMIT}`);
  return n;
}

/** Index of the first record whose id sorts after `id` (records are sorted by id). */
function firstAfter(list: readonly Rec[], id: string): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid].id <= id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function render(kind: Kind, r: Rec, fixture: FixtureIndex): unknown {
  const site = fixture.sites.get(r.siteId)!;
  const siteRef = { id: site.id, external_id: site.external_id };
  if (kind === 'machines') return { id: r.id, name: r.name, site: siteRef };
  const v = r as VariableRecord;
  return { id: v.id, name: v.name, machine: { id: v.machineId }, site: siteRef, unit: v.unit };
}

export function listObjects(kind: Kind, query: URLSearchParams, scope: ListScope): Reply {
  const limit = parseLimit(query.get('limit'));
  const org = scope.fixture.organisations.get(scope.organisationId)!;
  const allowedSites = scope.principal.sites;
  const noun = kind === 'machines' ? 'machine' : 'machine variable';

  let list: readonly Rec[] = kind === 'machines' ? org.machines : org.variables;
  const siteId = query.get(SITE_FILTER_PARAM);
  if (siteId !== null) {
    const site = scope.fixture.sites.get(siteId);
    if (site === undefined || site.organisationId !== scope.organisationId) throw badRequest(`${SITE_FILTER_PARAM}: unknown site "${siteId}" in organisation "${scope.organisationId}"`);
    if (allowedSites !== null && !allowedSites.has(siteId)) throw badRequest(`${SITE_FILTER_PARAM}: site "${siteId}" is outside the API key's sites`);
    list = (kind === 'machines' ? org.machinesBySite.get(siteId) : org.variablesBySite.get(siteId)) ?? [];
  }
  const visible = (r: Rec) => allowedSites === null || allowedSites.has(r.siteId);

  const cursor = query.get('starting_after');
  let start = 0;
  if (cursor !== null) {
    const known = kind === 'machines' ? scope.fixture.machines.get(cursor) : scope.fixture.variables.get(cursor);
    if (known === undefined || known.organisationId !== scope.organisationId || !visible(known)) {
      throw badRequest(`starting_after: unknown ${noun} "${cursor}" (the cursor is the id of the last ${noun} of the previous page)`);
    }
    start = firstAfter(list, cursor);
  }

  const page: Rec[] = [];
  let hasMore = false;
  for (let i = start; i < list.length; i++) {
    if (!visible(list[i])) continue;
    if (page.length === limit) {
      hasMore = true;
      break;
    }
    page.push(list[i]);
  }
  return {
    status: 200,
    body: {
      data: page.map((r) => render(kind, r, scope.fixture)),
      pagination: { starting_after: cursor, limit, has_more: hasMore, next_cursor: hasMore ? page[page.length - 1].id : null },
    },
  };
}
