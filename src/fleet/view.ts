import { readStatusDoc } from './read-doc.js';
import type { FleetStatusDoc } from './status-doc.js';
import { parseFleetTopic } from './topics.js';

/**
 * The fleet table's model: fed with the messages under `<prefix>/+/status` and `<prefix>/+/last`
 * (topics.ts), it keeps one entry per gateway and turns them into rows. No I/O here, so the
 * `edge-gateway fleet` command and a console page can both use it.
 *
 * A gateway's figures come from its newest online status; its state from the `status` topic
 * (online, or the will's offline, or stopped). An online gateway whose status has not been
 * refreshed for three of its intervals is shown `stale` (its network may be cut while the broker
 * has not yet noticed: the will comes 1.5 keep-alives after the last packet, MQTT §3.1.2.10).
 *
 * Every document is checked (read-doc.ts) before it is used: one that is not a status document
 * (not JSON, a wrong type, too large) makes its gateway `invalid`, with what is wrong as its
 * `problem` and the figures of its last good status if any, instead of reaching a renderer that
 * would throw on it.
 */
export type FleetState = 'online' | 'stale' | 'offline' | 'stopped' | 'invalid';

export interface FleetRow {
  gateway: string;
  state: FleetState;
  /** Why it is offline or stopped (the will's text), else null. */
  reason: string | null;
  /** What is wrong with this row: its status document cannot be read (state invalid), or two gateways publish under this name. */
  problem: string | null;
  uplink: string | null;
  sources_up: number | null;
  sources_down: number | null;
  sources_down_names: string[];
  backlog: number | null;
  oldest_unsent_age_s: number | null;
  eta_s: number | null;
  capacity_left_bytes: number | null;
  capacity_left_s: number | null;
  share_per_minute: number | null;
  last_error: string | null;
  version: string | null;
  /** ISO time of the newest online status (what the figures are from), or null when never seen online. */
  last_status_at: string | null;
  /** Age of the newest online status by its own time stamp (null when never seen online). */
  last_status_age_s: number | null;
  /** Seconds since this viewer last heard from it. */
  heard_ago_s: number;
}

interface Entry {
  status: FleetStatusDoc | null;
  last: FleetStatusDoc | null;
  /** Bytes of the documents held in `status` and `last` (their payload sizes), for the table's budget. */
  statusBytes: number;
  lastBytes: number;
  /** What was wrong with the newest message on `status` / `last`, null when it was readable. */
  badStatus: string | null;
  badLast: string | null;
  heardAt: number;
}

const MAX_GATEWAYS = 10_000;
/**
 * Bytes of documents the table holds at most. Anyone allowed to publish under the prefix can make
 * up gateway names; 10,000 names with two padded documents each would be ~1.3 GB. Our own
 * documents are under 4 kB, so this holds two documents for 2,000 real gateways.
 */
export const MAX_FLEET_TABLE_BYTES = 16 * 1024 * 1024;

export class FleetView {
  private readonly entries = new Map<string, Entry>();
  private heldBytes = 0;
  private notKept = 0;

  constructor(
    readonly prefix: string,
    private readonly maxBytes = MAX_FLEET_TABLE_BYTES,
  ) {}

  /** Documents refused because the table's byte budget was spent (what the table's footer reports). */
  get notKeptDocuments(): NotKept {
    return { documents: this.notKept, maxBytes: this.maxBytes };
  }

  /** Takes one message; returns true when the table changed. An unreadable status document marks its gateway invalid. */
  ingest(topic: string, payload: Buffer | string, receivedAt: number): boolean {
    const t = parseFleetTopic(this.prefix, topic);
    if (!t || t.kind === 'budget') return false;
    if (payload.length === 0) {
      // A cleared retained status: the gateway was removed from the fleet.
      if (t.kind === 'status') return this.remove(t.gateway);
      return false;
    }
    const r = readStatusDoc(payload);
    const bytes = r.ok ? (typeof payload === 'string' ? Buffer.byteLength(payload) : payload.length) : 0;
    let e = this.entries.get(t.gateway);
    const before = e ? (t.kind === 'status' ? e.statusBytes : e.lastBytes) : 0;
    if (this.heldBytes - before + bytes > this.maxBytes || (!e && this.entries.size >= MAX_GATEWAYS)) {
      this.notKept++;
      return false;
    }
    if (!e) {
      e = { status: null, last: null, statusBytes: 0, lastBytes: 0, badStatus: null, badLast: null, heardAt: receivedAt };
      this.entries.set(t.gateway, e);
    }
    e.heardAt = receivedAt;
    if (!r.ok) {
      const problem = `unreadable status document: ${r.problem}`;
      if (t.kind === 'status') e.badStatus = problem;
      else e.badLast = problem;
      return true;
    }
    const doc = r.doc;
    if (t.kind === 'status') {
      e.badStatus = null;
      e.status = doc;
      this.heldBytes += bytes - e.statusBytes;
      e.statusBytes = bytes;
      if (doc.state === 'online') this.keepLast(e, doc, bytes);
    } else {
      e.badLast = null;
      if (doc.state === 'online') this.keepLast(e, doc, bytes);
    }
    return true;
  }

  private keepLast(e: Entry, doc: FleetStatusDoc, bytes: number): void {
    const kept = newer(e.last, doc);
    if (kept === e.last) return;
    e.last = kept;
    this.heldBytes += bytes - e.lastBytes;
    e.lastBytes = bytes;
  }

  private remove(gateway: string): boolean {
    const e = this.entries.get(gateway);
    if (!e) return false;
    this.heldBytes -= e.statusBytes + e.lastBytes;
    return this.entries.delete(gateway);
  }

  rows(now: number): FleetRow[] {
    const out: FleetRow[] = [];
    for (const [gateway, e] of this.entries) {
      const figures = e.last ?? (e.status?.state === 'online' ? e.status : null);
      const current = e.status ?? e.last;
      let state: FleetState = e.badStatus !== null || !current ? 'invalid' : current.state;
      const intervalMs = (figures?.interval_s ?? 10) * 1000;
      if (state === 'online' && now - e.heardAt > 3 * intervalMs) state = 'stale';
      out.push({
        gateway,
        state,
        reason: state === 'offline' || state === 'stopped' ? current?.reason ?? null : null,
        problem: e.badStatus ?? e.badLast ?? (figures?.duplicate_name ? `two gateways publish as ${gateway}: ${figures.duplicate_name}` : null),
        uplink: figures?.uplink ?? null,
        sources_up: figures?.sources?.up ?? null,
        sources_down: figures?.sources?.down ?? null,
        sources_down_names: figures?.sources?.down_names ?? [],
        backlog: figures?.backlog ?? null,
        oldest_unsent_age_s: figures?.oldest_unsent_age_s ?? null,
        eta_s: figures?.eta_s ?? null,
        capacity_left_bytes: figures?.capacity_left_bytes ?? null,
        capacity_left_s: figures?.capacity_left_s ?? null,
        share_per_minute: figures?.budget?.share_per_minute ?? null,
        last_error: figures?.last_error ?? null,
        version: figures?.version ?? null,
        last_status_at: figures?.at ?? null,
        last_status_age_s: ageOf(figures?.at, now),
        heard_ago_s: Math.max(0, Math.round((now - e.heardAt) / 1000)),
      });
    }
    // Trouble first (offline, invalid, stale, stopped), then by name.
    const rank: Record<FleetState, number> = { offline: 0, invalid: 1, stale: 2, stopped: 3, online: 4 };
    return out.sort((a, b) => rank[a.state] - rank[b.state] || a.gateway.localeCompare(b.gateway));
  }
}

/** Seconds since an ISO time (the gateway's clock; skew between machines shows here, never below 0). */
function ageOf(iso: string | undefined, now: number): number | null {
  const t = iso === undefined ? NaN : Date.parse(iso);
  return Number.isFinite(t) ? Math.max(0, Math.round((now - t) / 1000)) : null;
}

function newer(a: FleetStatusDoc | null, b: FleetStatusDoc): FleetStatusDoc {
  if (!a) return b;
  return Date.parse(b.at) >= Date.parse(a.at) ? b : a;
}

const int = (n: number | null) => (n === null ? '-' : Math.round(n).toLocaleString('en-US'));

function dur(s: number | null): string {
  if (s === null || !Number.isFinite(s)) return '-';
  if (s < 90) return `${Math.round(s)}s`;
  if (s < 5_400) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${(s / 3_600).toFixed(1)}h`;
  return `${(s / 86_400).toFixed(1)}d`;
}

function bytes(n: number | null): string {
  if (n === null) return '-';
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(0)} MB`;
  return `${Math.round(n / 1e3)} kB`;
}

/** The rows as a fixed-width text table (what `edge-gateway fleet` prints). */
export interface NotKept {
  documents: number;
  maxBytes: number;
}

export function renderFleetTable(rows: FleetRow[], notKeptDocs: NotKept = { documents: 0, maxBytes: MAX_FLEET_TABLE_BYTES }): string {
  const notKept = notKeptDocs.documents > 0 ? `${notKeptDocs.documents.toLocaleString('en-US')} status documents not kept: the table holds at most ${bytes(notKeptDocs.maxBytes)} of them (gateway names made up by a publisher under this prefix?)\n` : '';
  if (rows.length === 0) return `no gateway has published a status under this prefix yet\n${notKept}`;
  const cells = rows.map((r) => ({
    GATEWAY: r.gateway,
    STATE: r.state,
    UPLINK: r.uplink ?? '-',
    SOURCES: r.sources_up === null ? '-' : `${r.sources_up} up${r.sources_down ? `, ${r.sources_down} down` : ''}`,
    BACKLOG: int(r.backlog),
    OLDEST: dur(r.oldest_unsent_age_s),
    ETA: dur(r.eta_s),
    'BUFFER LEFT': r.capacity_left_s === null ? bytes(r.capacity_left_bytes) : `${bytes(r.capacity_left_bytes)} (${dur(r.capacity_left_s)})`,
    'SHARE/MIN': int(r.share_per_minute),
    VERSION: r.version ?? '-',
    // For an online gateway: how fresh the figures are; for an offline one: since when it is gone.
    'LAST STATUS': r.last_status_age_s === null ? '-' : `${dur(r.last_status_age_s)} ago`,
    'LAST ERROR / REASON': (r.problem ?? r.reason ?? r.last_error ?? '').replace(/\s+/g, ' ').slice(0, 80),
  }));
  const cols = Object.keys(cells[0]) as Array<keyof (typeof cells)[number]>;
  const widths = cols.map((c) => Math.max(c.length, ...cells.map((r) => r[c].length)));
  const line = (vals: string[]) => vals.map((v, i) => (i === vals.length - 1 ? v : v.padEnd(widths[i]))).join('  ').trimEnd();
  const offline = rows.filter((r) => r.state !== 'online').length;
  return [line(cols), ...cells.map((r) => line(cols.map((c) => r[c]))), '', `${rows.length} gateways, ${rows.length - offline} online`, ''].join('\n') + notKept;
}
