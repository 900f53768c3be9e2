import { toIsoUtc } from '../core/time.js';

/**
 * What the emulator has been sent, and its counters.
 *
 * Values: the pair (variable, timestamp) identifies a stored value and a later write replaces it
 * (CONTRACT.md, batch "Semantics" [V]). The key is the epoch ms of the timestamp, so one instant
 * written with different offsets is one key. Layout: Map<variable, Map<epochMs, {value, writes}>>.
 */
export interface StoredValue {
  value: number;
  /** How many times this (variable, timestamp) was written; > 1 means overwritten. */
  writes: number;
}

export interface ValueView {
  timestamp: string;
  value: number;
  writes: number;
}

/** Annotation as returned by POST /machine-data-annotations (§2.3 response). */
export interface AnnotationResponse {
  id: string;
  external_id: string | null;
  type: 'instant' | 'range';
  occurred_at?: string;
  started_at?: string;
  ended_at?: string;
  site: { id: string; external_id: string | null };
  created_at: string;
  text: string;
  machine_variables: Array<{ id: string }>;
}

export interface StoredAnnotation {
  organisation_id: string;
  annotation: AnnotationResponse;
}

export type ImportJobStatus = 'accepted' | 'processing' | 'finished' | 'failed';

/** Import job as returned by the status endpoint (§2.9). */
export interface ImportJobView {
  job_id: string;
  status: ImportJobStatus;
  items_received: number;
  created_at: string;
  items_accepted: number | null;
  items_rejected: number | null;
  errors: Array<{ index: number | null; code: string; message: string }> | null;
  finished_at: string | null;
}

export interface ImportJobRecord {
  organisationId: string;
  view: ImportJobView;
}

/** One variable in GET /_emulator/value-keys: the instants it holds and how many writes replaced a value. */
export interface ValueKeys {
  id: string;
  /** Epoch ms of every stored value, ascending. */
  epoch_ms: number[];
  /** Writes to an instant it already held (a value delivered twice counts 1). */
  overwritten: number;
  /** With `?values=1`: the value stored at each instant of `epoch_ms`, in the same order. */
  values?: number[];
}

export interface EmulatorStats {
  /** Distinct (variable, timestamp) pairs stored. */
  values_stored: number;
  /** Writes that replaced an existing (variable, timestamp). */
  values_overwritten: number;
  /** Batch requests answered 2xx. */
  batches_accepted: number;
  /** Responses by route (`POST /machine-data/batch`, relative to /tracking/v1) and status; `dropped` = socket destroyed. */
  requests: Record<string, Record<string, number>>;
  /** Requests refused by the rate limit (not counting forced 429 faults). */
  rate_limited: number;
  /** Sockets destroyed by the drop_connection_rate and outage faults. */
  dropped_connections: number;
  import_jobs: Record<ImportJobStatus, number>;
  annotations: number;
  tokens_issued: number;
  /** Requests of the other client behind the same address (fault neighbour_per_minute), admitted and refused. */
  neighbour?: { admitted: number; rate_limited: number };
}

export class Store {
  readonly values = new Map<string, Map<number, StoredValue>>();
  valuesStored = 0;
  valuesOverwritten = 0;
  batchesAccepted = 0;
  rateLimited = 0;
  droppedConnections = 0;
  tokensIssued = 0;
  private requests: Record<string, Record<string, number>> = Object.create(null);

  readonly annotations: StoredAnnotation[] = [];
  /** organisation -> external_id -> annotation (§4.1: 409 when it already exists). */
  readonly annotationExternalIds = new Map<string, Map<string, AnnotationResponse>>();
  readonly jobs = new Map<string, ImportJobRecord>();

  /** Stores one value; a write to an existing (variable, epoch ms) replaces it and counts. */
  put(variableId: string, epochMs: number, value: number): void {
    let series = this.values.get(variableId);
    if (series === undefined) {
      series = new Map();
      this.values.set(variableId, series);
    }
    const existing = series.get(epochMs);
    if (existing === undefined) {
      series.set(epochMs, { value, writes: 1 });
      this.valuesStored++;
    } else {
      existing.value = value;
      existing.writes++;
      this.valuesOverwritten++;
    }
  }

  get(variableId: string, epochMs: number): StoredValue | undefined {
    return this.values.get(variableId)?.get(epochMs);
  }

  /** Stored values of one variable sorted by timestamp. */
  valuesOf(variableId: string): ValueView[] {
    const series = this.values.get(variableId);
    if (!series) return [];
    return [...series.keys()].sort((a, b) => a - b).map((ms) => {
      const v = series.get(ms)!;
      return { timestamp: toIsoUtc(ms), value: v.value, writes: v.writes };
    });
  }

  /** Number of stored values per variable. */
  valueCounts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, series] of this.values) out[id] = series.size;
    return out;
  }

  /**
   * The (variable, instant) keys held, a page of variables at a time in id string order: enough for
   * a client to check exactly which of the values it sent arrived, and which arrived twice, without
   * one request per variable or the values themselves (GET /_emulator/value-keys).
   */
  valueKeys(q: { prefix: string; startingAfter: string | null; limit: number; values?: boolean }): { variables: ValueKeys[]; next_cursor: string | null } {
    const ids: string[] = [];
    for (const id of this.values.keys()) if (id.startsWith(q.prefix) && (q.startingAfter === null || id > q.startingAfter)) ids.push(id);
    ids.sort();
    const page = ids.slice(0, q.limit);
    const variables = page.map((id) => {
      const series = this.values.get(id)!;
      let overwritten = 0;
      for (const v of series.values()) overwritten += v.writes - 1;
      const epochMs = [...series.keys()].sort((a, b) => a - b);
      return q.values ? { id, epoch_ms: epochMs, overwritten, values: epochMs.map((ms) => series.get(ms)!.value) } : { id, epoch_ms: epochMs, overwritten };
    });
    return { variables, next_cursor: ids.length > q.limit ? page[page.length - 1] : null };
  }

  countRequest(route: string, status: number | 'dropped'): void {
    const byStatus = (this.requests[route] ??= Object.create(null) as Record<string, number>);
    const key = String(status);
    byStatus[key] = (byStatus[key] ?? 0) + 1;
  }

  stats(): EmulatorStats {
    const jobs: Record<ImportJobStatus, number> = { accepted: 0, processing: 0, finished: 0, failed: 0 };
    for (const j of this.jobs.values()) jobs[j.view.status]++;
    const requests: Record<string, Record<string, number>> = {};
    for (const [route, byStatus] of Object.entries(this.requests)) requests[route] = { ...byStatus };
    return {
      values_stored: this.valuesStored,
      values_overwritten: this.valuesOverwritten,
      batches_accepted: this.batchesAccepted,
      requests,
      rate_limited: this.rateLimited,
      dropped_connections: this.droppedConnections,
      import_jobs: jobs,
      annotations: this.annotations.length,
      tokens_issued: this.tokensIssued,
    };
  }

  /** POST /_emulator/reset: forget stored data, jobs and counters. */
  reset(): void {
    this.values.clear();
    this.valuesStored = 0;
    this.valuesOverwritten = 0;
    this.batchesAccepted = 0;
    this.rateLimited = 0;
    this.droppedConnections = 0;
    this.tokensIssued = 0;
    this.requests = Object.create(null);
    this.annotations.length = 0;
    this.annotationExternalIds.clear();
    this.jobs.clear();
  }
}
