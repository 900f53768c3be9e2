import { z } from 'zod';
import { formatIssues } from '../config/issues.js';
import type { Announcement } from '../uplink/budget-sharing.js';
import type { FleetStatusDoc } from './status-doc.js';

/**
 * Reading what other gateways (or strangers) publish under the fleet prefix: the size is checked
 * before a byte is decoded, then the document is checked against a schema (issue 21 §5: a 64 MB
 * retained message cost every gateway 270 MB; `"uplink": 5` broke `edge-gateway fleet` and the
 * console's Fleet page). The schemas accept what every released gateway publishes (optional
 * fields) and refuse wrong types, so a viewer never meets a number where it expects a string.
 * Unknown fields are dropped: a viewer keeps a document per gateway, and a stranger's 60 kB of
 * padding per fake gateway name would otherwise be held for as long as the viewer runs.
 */

/** Largest fleet document read (ours are under 4 kB: 20 source names, an error of 300 characters). */
export const MAX_FLEET_DOC_BYTES = 64 * 1024;

const count = z.number().finite().nonnegative();
const seconds = z.number().finite().nullable();
const text = (max: number) => z.string().max(max);

const statusDocSchema = z.object({
  v: z.number().int().min(1),
  gateway: text(200).optional(),
  state: z.enum(['online', 'offline', 'stopped']),
  at: text(64),
  version: text(64).optional(),
  interval_s: z.number().finite().positive().max(86_400).optional(),
  uplink: text(200).optional(),
  sources: z.object({ up: count, down: count, down_names: z.array(text(200)).max(100) }).optional(),
  backlog: count.optional(),
  oldest_unsent_age_s: seconds.optional(),
  eta_s: seconds.optional(),
  capacity_left_bytes: count.nullable().optional(),
  capacity_left_s: seconds.optional(),
  last_error: text(2_000).nullable().optional(),
  budget: z.object({ group: text(60), share_per_minute: count, used_last_minute: count, members: count }).nullable().optional(),
  reason: text(2_000).optional(),
  instance: text(64).optional(),
  duplicate_name: text(2_000).nullable().optional(),
});

const announcementSchema = z.looseObject({
  group: text(60),
  demand_per_min: count,
  // A missing or odd lease falls back to the default rather than dropping the member.
  lease_ms: z.number().finite().positive().optional().catch(undefined),
});

export type ReadResult<T> = { ok: true; doc: T } | { ok: false; problem: string };

function readJson(payload: Buffer | string): ReadResult<unknown> {
  const bytes = typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length;
  if (bytes > MAX_FLEET_DOC_BYTES) return { ok: false, problem: `${bytes.toLocaleString('en-US')} bytes, more than the ${MAX_FLEET_DOC_BYTES.toLocaleString('en-US')} a fleet document may have` };
  try {
    return { ok: true, doc: JSON.parse(typeof payload === 'string' ? payload : payload.toString('utf8')) as unknown };
  } catch {
    return { ok: false, problem: 'not JSON' };
  }
}

/** A status document (`<prefix>/<gateway>/status` or `/last`), or what is wrong with it (naming the field and value). */
export function readStatusDoc(payload: Buffer | string): ReadResult<FleetStatusDoc> {
  const json = readJson(payload);
  if (!json.ok) return json;
  const r = statusDocSchema.safeParse(json.doc, { reportInput: true });
  if (!r.success) return { ok: false, problem: formatIssues(r.error.issues).join('; ') };
  return { ok: true, doc: r.data as FleetStatusDoc };
}

/** A budget announcement (`<prefix>/<gateway>/budget`), lease capped at 10 min, or what is wrong with it. */
export function readAnnouncement(payload: Buffer | string): ReadResult<Announcement> {
  const json = readJson(payload);
  if (!json.ok) return json;
  const r = announcementSchema.safeParse(json.doc, { reportInput: true });
  if (!r.success) return { ok: false, problem: formatIssues(r.error.issues).join('; ') };
  const lease = r.data.lease_ms === undefined ? 15_000 : Math.min(r.data.lease_ms, 600_000);
  return { ok: true, doc: { group: r.data.group, demand_per_min: r.data.demand_per_min, lease_ms: lease } };
}
