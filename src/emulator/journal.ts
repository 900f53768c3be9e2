import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';

/**
 * Request journal [A, emulator only]: the most recent requests to the emulated service (token
 * endpoint and /tracking/v1, not /_emulator), as GET /_emulator/requests shows them, so a team can
 * see what its client really sent and what it got back. Credentials never enter it: the
 * Authorization header keeps only its scheme, and bodies are summarised (sizes, counts, ids), never
 * copied, so a client secret in a form body or a token cannot be read back.
 */

export interface JournalEntry {
  request_id: string;
  /** When the request arrived (UTC, ms). */
  at: string;
  method: string;
  path: string;
  /** Query string without the `?`, or null. */
  query: string | null;
  /** Response status, or "dropped" when a fault destroyed the socket without an answer. */
  status: number | 'dropped';
  duration_ms: number;
  /** Who authenticated: the client id, "api key", or null (no or bad credential). */
  client: string | null;
  /** The Service-Organisation-Id header as sent, or null. */
  organisation_id: string | null;
  /** Request headers; credentials replaced by `<scheme> [redacted]`. */
  headers: Record<string, string>;
  /** What the body was: bytes read, content type, and per endpoint counts/ids. */
  body: Record<string, unknown>;
  /** Error code and message of a 4xx/5xx answer (standard or 429 envelope). */
  error: { code: string; message: string } | null;
  /** The injected fault that answered, if any (error_rate, fail_next, outage_seconds, ...). */
  fault: string | null;
}

/** Headers whose values are credentials (§5.2, §5.5, §5.8) or could be. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie', 'set-cookie', 'x-api-key']);

export function redactHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, raw] of Object.entries(headers)) {
    if (raw === undefined) continue;
    const value = Array.isArray(raw) ? raw.join(', ') : raw;
    if (CREDENTIAL_HEADERS.has(name)) {
      const scheme = /^(\S+)\s+\S/.exec(value)?.[1];
      out[name] = scheme && name.endsWith('authorization') ? `${scheme} [redacted]` : '[redacted]';
    } else out[name] = value;
  }
  return out;
}

/** Per-request notes the handlers leave for the journal (body summary, who authenticated). */
interface Notes {
  bytes?: number;
  summary?: Record<string, unknown>;
  client?: string;
}
const notes = new WeakMap<IncomingMessage, Notes>();

const noteOf = (req: IncomingMessage): Notes => {
  let n = notes.get(req);
  if (!n) {
    n = {};
    notes.set(req, n);
  }
  return n;
};

/** Bytes of the body as read (http.ts readBody, the import upload). */
export function noteBodyBytes(req: IncomingMessage, bytes: number): void {
  noteOf(req).bytes = bytes;
}

/** What the body held, per endpoint: item counts, annotation type and external_id, job id ... */
export function noteBody(req: IncomingMessage, summary: Record<string, unknown>): void {
  const n = noteOf(req);
  n.summary = { ...n.summary, ...summary };
}

export function noteClient(req: IncomingMessage, client: string): void {
  noteOf(req).client = client;
}

export function notesOf(req: IncomingMessage): Notes {
  return notes.get(req) ?? {};
}

/** Reads the code and message of either error envelope (CONTRACT.md "Error bodies"). */
export function errorOf(body: unknown): { code: string; message: string } | null {
  if (body === null || typeof body !== 'object') return null;
  const b = body as { code?: unknown; message?: unknown; error?: { code?: unknown; message?: unknown } };
  const e = b.error && typeof b.error === 'object' ? b.error : b;
  return typeof e.code === 'string' ? { code: e.code, message: typeof e.message === 'string' ? e.message : '' } : null;
}

export interface JournalQuery {
  limit?: number;
  /** Path prefix, full or relative to /tracking/v1. */
  path?: string;
  status?: number | 'dropped';
}

/** A ring of the last `capacity` entries (0 keeps none). */
export class RequestJournal {
  private entries: JournalEntry[] = [];
  private seen = 0;

  constructor(readonly capacity: number) {}

  add(entry: JournalEntry): void {
    this.seen++;
    if (this.capacity === 0) return;
    this.entries.push(entry);
    if (this.entries.length > this.capacity) this.entries.splice(0, this.entries.length - this.capacity);
  }

  /** Oldest first; `limit` keeps the newest N after filtering. */
  list(q: JournalQuery = {}, basePath = ''): { requests: JournalEntry[]; recorded: number; capacity: number } {
    let list = this.entries;
    if (q.path !== undefined) {
      const p = q.path;
      list = list.filter((e) => e.path.startsWith(p) || (basePath !== '' && e.path.startsWith(basePath) && e.path.slice(basePath.length).startsWith(p)));
    }
    if (q.status !== undefined) list = list.filter((e) => e.status === q.status);
    if (q.limit !== undefined) list = list.slice(Math.max(0, list.length - q.limit));
    return { requests: list.map((e) => ({ ...e })), recorded: this.seen, capacity: this.capacity };
  }

  clear(): void {
    this.entries = [];
    this.seen = 0;
  }
}
