import { parseIsoWithOffset, toIsoUtc } from '../core/time.js';
import type { Principal } from './auth.js';
import { EXTERNAL_ID_PATTERN, MAX_ANNOTATION_TEXT, MAX_ANNOTATION_VARIABLES, MAX_EXTERNAL_ID } from './contract.js';
import type { FixtureIndex, SiteRecord } from './fixture.js';
import { HttpError, badRequest, errorReply, type Reply } from './http.js';
import { newId } from './ids.js';
import type { AnnotationResponse, Store } from './store.js';

/**
 * POST /machine-data-annotations (§4.1) with every rule of the §2.3 request table. Each 400 names
 * the field (`machine_variables[2].id: ...`). Success: 201 with the §2.3 response. 409
 * `{code: "conflict"}` when the external_id already exists in the organisation (§4.1); since
 * external ids are unique "across all objects" of the organisation (§2.1), a site's external id
 * counts too.
 * [A] Unknown fields are refused, including the other variant's date-time fields.
 * [A] With an API key, a site outside the key's sites is a 400 naming `site` (see items.ts).
 */

export interface AnnotationScope {
  fixture: FixtureIndex;
  organisationId: string;
  principal: Principal;
  store: Store;
  now: () => number;
}

const COMMON = ['type', 'text', 'machine_variables', 'site', 'external_id'];
const VARIANT_FIELDS: Record<'instant' | 'range', string[]> = { instant: ['occurred_at'], range: ['started_at', 'ended_at'] };

function show(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v);
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return String(v);
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Date-time with an explicit offset (§2.3, §9); any number of fraction digits. */
function dateTime(o: Record<string, unknown>, field: string): number {
  const v = o[field];
  if (v === undefined) throw badRequest(`${field}: required field is missing`);
  if (typeof v !== 'string') throw badRequest(`${field}: ${show(v)} is not a string`);
  const ms = parseIsoWithOffset(v);
  if (ms === undefined) throw badRequest(`${field}: ${show(v)} is not an ISO 8601 date-time with an explicit offset (Z or ±hh:mm)`);
  return ms;
}

function resolveSite(o: Record<string, unknown>, scope: AnnotationScope): SiteRecord {
  const ref = o.site;
  if (ref === undefined) throw badRequest('site: required field is missing ({"id": ...} or {"external_id": ...})');
  if (!isObject(ref)) throw badRequest(`site: ${show(ref)} is not an object ({"id": ...} or {"external_id": ...})`);
  for (const k of Object.keys(ref)) if (k !== 'id' && k !== 'external_id') throw badRequest(`site.${k}: unknown field`);
  const hasId = ref.id !== undefined;
  const hasExt = ref.external_id !== undefined;
  // §2.2: exactly one of {id} / {external_id}; both together are not allowed.
  if (hasId && hasExt) throw badRequest('site: give either id or external_id, not both');
  if (!hasId && !hasExt) throw badRequest('site: give one of id or external_id');
  const org = scope.fixture.organisations.get(scope.organisationId)!;
  let site: SiteRecord | undefined;
  if (hasId) {
    if (typeof ref.id !== 'string') throw badRequest(`site.id: ${show(ref.id)} is not a string`);
    const s = scope.fixture.sites.get(ref.id);
    if (s === undefined || s.organisationId !== scope.organisationId) throw badRequest(`site.id: unknown site ${show(ref.id)} in organisation "${scope.organisationId}"`);
    site = s;
  } else {
    if (typeof ref.external_id !== 'string') throw badRequest(`site.external_id: ${show(ref.external_id)} is not a string`);
    site = org.sitesByExternalId.get(ref.external_id);
    if (site === undefined) throw badRequest(`site.external_id: no site with external_id ${show(ref.external_id)} in organisation "${scope.organisationId}"`);
  }
  const allowed = scope.principal.sites;
  if (allowed !== null && !allowed.has(site.id)) throw badRequest(`site: site "${site.id}" is outside the API key's sites`);
  return site;
}

export function createAnnotation(body: unknown, scope: AnnotationScope): Reply {
  if (!isObject(body)) throw badRequest(`request body: ${show(body)} is not a JSON object`);
  const type = body.type;
  if (type === undefined) throw badRequest('type: required field is missing ("instant" or "range")');
  if (type !== 'instant' && type !== 'range') throw badRequest(`type: ${show(type)} is not one of instant, range`);

  for (const key of Object.keys(body)) {
    if (COMMON.includes(key) || VARIANT_FIELDS[type].includes(key)) continue;
    const other = type === 'instant' ? 'range' : 'instant';
    if (VARIANT_FIELDS[other].includes(key)) throw badRequest(`${key}: not allowed when type is "${type}" (it belongs to "${other}")`);
    throw badRequest(`${key}: unknown field`);
  }

  // Date-times (§2.3): instant -> occurred_at; range -> started_at < ended_at.
  let times: Pick<AnnotationResponse, 'occurred_at' | 'started_at' | 'ended_at'>;
  if (type === 'instant') {
    times = { occurred_at: toIsoUtc(dateTime(body, 'occurred_at')) };
  } else {
    const start = dateTime(body, 'started_at');
    const end = dateTime(body, 'ended_at');
    if (!(end > start)) throw badRequest(`ended_at: ${show(body.ended_at)} must be after started_at ${show(body.started_at)}`);
    times = { started_at: toIsoUtc(start), ended_at: toIsoUtc(end) };
  }

  // Text (§2.3): required, trimmed, not blank, at most 5000 characters.
  if (body.text === undefined) throw badRequest('text: required field is missing');
  if (typeof body.text !== 'string') throw badRequest(`text: ${show(body.text)} is not a string`);
  const text = body.text.trim();
  if (text.length === 0) throw badRequest('text: must not be blank');
  if (text.length > MAX_ANNOTATION_TEXT) throw badRequest(`text: ${text.length} characters after trimming is more than the maximum of ${MAX_ANNOTATION_TEXT}`);

  const site = resolveSite(body, scope);

  // machine_variables (§2.3): required, at most 100, may be empty, all available at the site.
  const mv = body.machine_variables;
  if (mv === undefined) throw badRequest('machine_variables: required field is missing (may be an empty list)');
  if (!Array.isArray(mv)) throw badRequest(`machine_variables: ${show(mv)} is not a list`);
  if (mv.length > MAX_ANNOTATION_VARIABLES) throw badRequest(`machine_variables: ${mv.length} entries is more than the maximum of ${MAX_ANNOTATION_VARIABLES}`);
  const variables: Array<{ id: string }> = [];
  mv.forEach((entry, i) => {
    const where = `machine_variables[${i}]`;
    if (!isObject(entry)) throw badRequest(`${where}: ${show(entry)} is not an object ({"id": ...})`);
    for (const k of Object.keys(entry)) if (k !== 'id') throw badRequest(`${where}.${k}: unknown field`);
    if (entry.id === undefined) throw badRequest(`${where}.id: required field is missing`);
    if (typeof entry.id !== 'string') throw badRequest(`${where}.id: ${show(entry.id)} is not a string`);
    const v = scope.fixture.variables.get(entry.id);
    if (v === undefined || v.organisationId !== scope.organisationId) throw badRequest(`${where}.id: unknown machine variable ${show(entry.id)}`);
    if (v.siteId !== site.id) throw badRequest(`${where}.id: machine variable ${show(entry.id)} is not available at site "${site.id}" (its machine is at "${v.siteId}")`);
    variables.push({ id: v.id });
  });

  // external_id (§2.1, §2.3): optional, not nullable, 1-100 of [A-Za-z0-9-_].
  let externalId: string | null = null;
  if (body.external_id !== undefined) {
    const e = body.external_id;
    if (e === null) throw badRequest('external_id: must not be null (leave it out instead)');
    if (typeof e !== 'string') throw badRequest(`external_id: ${show(e)} is not a string`);
    if (e.length < 1 || e.length > MAX_EXTERNAL_ID) throw badRequest(`external_id: must be 1 to ${MAX_EXTERNAL_ID} characters, got ${e.length}`);
    if (!EXTERNAL_ID_PATTERN.test(e)) throw badRequest(`external_id: ${show(e)} does not match ^[A-Za-z0-9\\-_]+$`);
    externalId = e;
  }

  const org = scope.fixture.organisations.get(scope.organisationId)!;
  let byExternal = scope.store.annotationExternalIds.get(scope.organisationId);
  if (externalId !== null && (byExternal?.has(externalId) || org.sitesByExternalId.has(externalId))) {
    throw new HttpError(errorReply(409, 'conflict', `external_id: "${externalId}" already exists in organisation "${scope.organisationId}"`));
  }

  const annotation: AnnotationResponse = {
    id: newId('mda'),
    external_id: externalId,
    type,
    ...times,
    site: { id: site.id, external_id: site.external_id },
    created_at: toIsoUtc(scope.now()),
    text,
    machine_variables: variables,
  };
  scope.store.annotations.push({ organisation_id: scope.organisationId, annotation });
  if (externalId !== null) {
    if (!byExternal) {
      byExternal = new Map();
      scope.store.annotationExternalIds.set(scope.organisationId, byExternal);
    }
    byExternal.set(externalId, annotation);
  }
  return { status: 201, body: annotation };
}
