import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';

/**
 * Machine variables the tracking service does not know, found by structure, never by wording
 * (interface §7 gives a 400 only `{code, message}`; how the message names an item or a reason is
 * not shown, and differs between implementations). A 400 for an unknown machine variable is a
 * refusal of that variable, not an outage and not a reason to halt: its samples are set aside
 * (CONTRACT.md error table, "invalid payload": "set them aside with the server's message, deliver
 * the rest") and every other variable keeps flowing.
 *
 * - Suspect: an item that the batch split isolated as refused (or that the refusal located by its
 *   `items[N]` path) makes its variable suspect, whatever the message says. The samples of a suspect
 *   are set aside without a request until the catalog has spoken: a variable refused alone is not
 *   tried again item by item at full rate.
 * - The catalog decides: a suspect starts a read of the organisation's catalog (`GET
 *   /machine-variables`, §4.10, every page, ahead of data in the request budget). A variable it
 *   does not list is unknown, and so is every other mapped variable it does not list (one read
 *   classifies all of them). A suspect it lists was refused for another reason: it is cleared and
 *   its set-aside samples go back into the queue (`onCleared`); if its items keep being refused
 *   alone (QUARANTINE_AFTER within a minute) its samples are set aside for QUARANTINE_MS at a time.
 * - The catalog is read again every CATALOG_REFRESH_MS while unknown variables exist; a variable
 *   that appeared upstream (created by the operator) is delivered again from then on. A suspect the
 *   catalog cannot judge (the read fails) is tried again after SUSPECT_MS with its new samples.
 *
 * Their samples wait in the set-aside list, bounded by uplink.unknown_variables.keep_set_aside
 * (sync-sender.ts trims the oldest beyond it), and go back into the queue by themselves when a
 * catalog read lists the variable (`onCreated`, wired in runtime/stages/uplink.ts when
 * requeue_when_created is on), or when the operator requeues them.
 */

/** Every set-aside reason of an unknown variable starts with this (the cap counts them by it). */
export const UNKNOWN_VARIABLE_REASON = 'unknown machine variable: ';

/** What the registry remembers about an unknown variable. */
export interface UnknownVariable {
  variable: string;
  /** What the service said (its 400 message), or why the catalog says so. */
  message: string;
  requestId?: string;
  /** Epoch ms it was first found unknown (or suspect). */
  since: number;
  /** `catalog`: the catalog does not list it; `suspect`: refused alone, the catalog has not spoken; `quarantine`: listed, but refused alone again and again. */
  via: 'catalog' | 'suspect' | 'quarantine';
}

/** The registry in the status (first examples; the count is exact). */
export interface UnknownVariablesSnapshot {
  /** Variables the catalog does not list (their samples are set aside). */
  count: number;
  /** Variables refused alone that the catalog has not judged yet (their samples wait set aside). */
  suspects: number;
  /** Variables the catalog lists whose items the service keeps refusing (set aside for a while). */
  quarantined: number;
  examples: Array<{ variable: string; source: string | null; message: string; since: string; via: UnknownVariable['via'] }>;
  /** Unknown variables by source name (null: no configured source names it). */
  by_source: Record<string, number>;
  /** When the catalog was last read (ISO), null before; and why the last read failed. */
  catalog_read_at: string | null;
  catalog_error: string | null;
  /** A catalog read is under way. */
  catalog_reading: boolean;
}

/**
 * The item a refusal locates by its JSON path (`items[17]` or `items[17].field: ...`), whatever the
 * words around it; null when it names none. A hint for finding the item without splitting the
 * batch, never a judgement on the variable (the catalog judges).
 */
export function itemIndexInMessage(message: string | undefined): number | null {
  if (!message) return null;
  const m = /(?:^|[^A-Za-z0-9_])items\[(\d{1,4})\]/.exec(message);
  return m ? Number(m[1]) : null;
}

/** The service's message about one item, without the index of the batch it happened to be in. */
export function itemMessage(message: string): string {
  return message.replace(/^items\[\d+\]\.?/, '');
}

/** Reads again while unknown variables exist, so a variable created upstream is picked up. */
export const CATALOG_REFRESH_MS = 5 * 60_000;
/** A failed catalog read is tried again after this long (per-item isolation works meanwhile). */
const CATALOG_RETRY_MS = 60_000;
/** A suspect the catalog could not judge is tried again (with its new samples) after this long. */
export const SUSPECT_MS = 5 * 60_000;
/** A listed variable refused alone this many times within QUARANTINE_WINDOW_MS is quarantined... */
const QUARANTINE_AFTER = 3;
const QUARANTINE_WINDOW_MS = 60_000;
/** ...for this long: its samples are set aside without a request, then tried again. */
export const QUARANTINE_MS = 5 * 60_000;
const EXAMPLES = 20;
/** The count of unknown variables is logged at most this often. */
const COUNT_LOG_MS = 60_000;
/** A configuration reload changes which source maps a variable; the status shows it within this. */
const SOURCE_LOOKUP_MS = 10_000;

export interface UnknownVariablesOptions {
  clock: Clock;
  logger: Logger;
  /** Every machine variable id the organisation's catalog lists; null when it cannot be read. */
  readCatalog?: (signal: AbortSignal) => Promise<ReadonlySet<string>>;
  /** Variables that were unknown and that a catalog read now lists (created upstream). */
  onCreated?: (variables: string[]) => void;
  /** Suspects a catalog read lists (refused for another reason): their set-aside samples go back into the queue. */
  onCleared?: (variables: string[]) => void;
}

/** A listed variable's recent refusals of a lone item. */
interface Refusals {
  times: number[];
  message: string;
  requestId?: string;
}

export class UnknownVariables {
  private readonly unknown = new Map<string, UnknownVariable>();
  private readonly suspects = new Map<string, UnknownVariable & { until: number }>();
  private readonly quarantine = new Map<string, UnknownVariable & { until: number }>();
  private readonly refusals = new Map<string, Refusals>();
  private catalog: ReadonlySet<string> | null = null;
  private catalogReadAt: number | null = null;
  /** Monotonic ms of the last successful read (freshness). */
  private catalogReadMono = -Infinity;
  private catalogError: string | null = null;
  private reading: Promise<void> | null = null;
  /** Monotonic ms the next catalog read may start. */
  private nextReadMono = 0;
  /** Which configured source names a variable (set by the runtime; the sources start after the uplink). */
  sourceOf: () => (variable: string) => string | null = () => () => null;
  private readonly abort = new AbortController();
  private readonly throttle: LogThrottle;
  /** Found since the last count line, the last one found, and when that line was written. */
  private newSinceLog = 0;
  private lastFound: UnknownVariable | null = null;
  private lastCountLog = -Infinity;

  constructor(private readonly o: UnknownVariablesOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  /** Variables the catalog does not list. */
  get count(): number {
    return this.unknown.size;
  }

  /** True when some variable's samples are set aside without a request (unknown, suspect or quarantined). */
  get holdsAny(): boolean {
    return this.unknown.size > 0 || this.suspects.size > 0 || this.quarantine.size > 0 || this.catalog !== null;
  }

  /** Suspects wait for a catalog read that is under way or due. */
  get awaitingCatalog(): boolean {
    return this.suspects.size > 0 && (this.reading !== null || this.o.clock.monotonic() >= this.nextReadMono) && !!this.o.readCatalog;
  }

  /** The entry when this variable's samples are set aside without a request: unknown, suspect or quarantined. */
  lookup(variable: string): UnknownVariable | undefined {
    const hit = this.unknown.get(variable);
    if (hit) return hit;
    const now = this.o.clock.monotonic();
    const held = this.suspects.get(variable) ?? this.quarantine.get(variable);
    if (held) {
      if (now < held.until) return held;
      // Not judged in time (suspect) or served its time (quarantine): its new samples are tried again.
      this.suspects.delete(variable);
      this.quarantine.delete(variable);
    }
    if (this.catalog === null || this.catalog.has(variable)) return undefined;
    return this.add({ variable, message: `not in the organisation's catalog (GET /machine-variables lists ${this.catalog.size} variables)`, since: this.o.clock.now(), via: 'catalog' });
  }

  /**
   * The service refused an item of `variable` on its own (the batch split isolated it, or the
   * refusal located it): whatever the words, the variable is suspect until the catalog speaks; a
   * fresh catalog speaks at once. Returns the entry under which its samples are held, if any.
   */
  refusedAlone(variable: string, message: string, requestId?: string): UnknownVariable | undefined {
    const known = this.lookup(variable);
    if (known) return known;
    const now = this.o.clock.monotonic();
    const text = itemMessage(message);
    if (this.catalog !== null && now - this.catalogReadMono < CATALOG_REFRESH_MS) {
      // Fresh catalog lists it (lookup() above found no entry): refused for another reason.
      return this.listedRefusal(variable, text, requestId, now);
    }
    const entry = { variable, message: text, requestId, since: this.o.clock.now(), via: 'suspect' as const, until: now + SUSPECT_MS };
    this.suspects.set(variable, entry);
    this.readCatalogSoon(true);
    return entry;
  }

  /** A listed variable refused alone: counted; quarantined when it keeps happening. */
  private listedRefusal(variable: string, message: string, requestId: string | undefined, now: number): UnknownVariable | undefined {
    const r = this.refusals.get(variable) ?? { times: [], message };
    r.times = r.times.filter((t) => now - t < QUARANTINE_WINDOW_MS);
    r.times.push(now);
    r.message = message;
    r.requestId = requestId;
    this.refusals.set(variable, r);
    if (r.times.length < QUARANTINE_AFTER) return undefined;
    this.refusals.delete(variable);
    const entry = { variable, message, requestId, since: this.o.clock.now(), via: 'quarantine' as const, until: now + QUARANTINE_MS };
    this.quarantine.set(variable, entry);
    this.throttle.warn(
      'quarantine',
      { variable, service_said: message, quarantined: this.quarantine.size, for_s: QUARANTINE_MS / 1000 },
      `the service keeps refusing items of ${variable}, which its catalog lists; its samples are set aside for ${QUARANTINE_MS / 60_000} minutes at a time (edge-gateway set-aside list)`,
    );
    return entry;
  }

  /**
   * The operator requeued set-aside samples of these variables (or of all): that says the mapping
   * or the catalog was fixed, so they are tried again at once instead of being set aside again
   * until the next catalog read. The cached catalog goes too (it may predate the fix); a variable
   * that is still unknown is found again by the next refusal and catalog read.
   */
  forget(variables: readonly string[] | 'all'): void {
    if (variables === 'all') {
      this.unknown.clear();
      this.suspects.clear();
      this.quarantine.clear();
    } else {
      for (const v of variables) {
        this.unknown.delete(v);
        this.suspects.delete(v);
        this.quarantine.delete(v);
      }
    }
    this.catalog = null;
    this.catalogReadMono = -Infinity;
    this.nextReadMono = 0;
  }

  /** For /status: the count, the first examples with their source, counts by source. */
  snapshot(): UnknownVariablesSnapshot {
    const sourceOf = this.unknown.size + this.suspects.size > 0 ? this.cachedSourceOf() : () => null;
    const bySource: Record<string, number> = {};
    const examples: UnknownVariablesSnapshot['examples'] = [];
    for (const u of this.unknown.values()) {
      const source = sourceOf(u.variable);
      const key = source ?? '(no configured source)';
      bySource[key] = (bySource[key] ?? 0) + 1;
      if (examples.length < EXAMPLES) examples.push({ variable: u.variable, source, message: u.message, since: new Date(u.since).toISOString(), via: u.via });
    }
    for (const u of [...this.suspects.values(), ...this.quarantine.values()]) {
      if (examples.length >= EXAMPLES) break;
      examples.push({ variable: u.variable, source: sourceOf(u.variable), message: u.message, since: new Date(u.since).toISOString(), via: u.via });
    }
    return {
      count: this.unknown.size,
      suspects: this.suspects.size,
      quarantined: this.quarantine.size,
      examples,
      by_source: bySource,
      catalog_read_at: this.catalogReadAt === null ? null : new Date(this.catalogReadAt).toISOString(),
      catalog_error: this.catalogError,
      catalog_reading: this.reading !== null,
    };
  }

  /** The source lookup, rebuilt at most every SOURCE_LOOKUP_MS (the status is read every second). */
  private cachedSourceOf(): (variable: string) => string | null {
    const now = this.o.clock.monotonic();
    if (!this.lookupCache || now - this.lookupCache.at > SOURCE_LOOKUP_MS) this.lookupCache = { at: now, fn: this.sourceOf() };
    return this.lookupCache.fn;
  }

  private lookupCache: { at: number; fn: (variable: string) => string | null } | null = null;

  /** Reads the catalog again when it is due (called by the sync path while variables are held). */
  tick(): void {
    if (this.unknown.size > 0 || this.suspects.size > 0) this.readCatalogSoon(false);
    this.logCount();
  }

  /** Reads the catalog now, not at the next refresh (an operator says the variables were created). */
  async readCatalogNow(): Promise<void> {
    await this.reading;
    this.nextReadMono = 0;
    this.readCatalogSoon(false);
    await this.reading;
  }

  /** Waits for a catalog read in flight (tests, stop, the sync path holding rows for it). */
  async settled(): Promise<void> {
    await this.reading;
  }

  stop(): void {
    this.abort.abort(new Error('gateway stopping'));
  }

  private add(entry: UnknownVariable): UnknownVariable {
    this.unknown.set(entry.variable, entry);
    this.newSinceLog += 1;
    this.lastFound = entry;
    this.logCount();
    return entry;
  }

  /**
   * One line a minute at most, with the count as it is then (not one per batch): the first find at
   * once, and while more are found, the count that updates (tick() calls this, so the line after a
   * catalog read that found thousands comes within a minute, not never).
   */
  private logCount(): void {
    const now = this.o.clock.monotonic();
    const e = this.lastFound;
    if (this.newSinceLog === 0 || !e || now - this.lastCountLog < COUNT_LOG_MS) return;
    this.lastCountLog = now;
    this.o.logger.warn(
      { unknown_variables: this.unknown.size, new_since_last_line: this.newSinceLog, example: e.variable, service_said: e.message, via: e.via },
      `${this.unknown.size} machine variable${this.unknown.size === 1 ? ' is' : 's are'} unknown to the organisation's catalog; their samples are set aside (edge-gateway set-aside list). Fix the mapping or create them upstream`,
    );
    this.newSinceLog = 0;
  }

  /** `suspect`: a new suspect may cut the wait of a refresh short (not of a retry after a failure). */
  private readCatalogSoon(suspect: boolean): void {
    const read = this.o.readCatalog;
    if (!read || this.reading || this.abort.signal.aborted) return;
    const now = this.o.clock.monotonic();
    const afterFailure = this.catalogError !== null;
    if (now < this.nextReadMono && !(suspect && !afterFailure)) return;
    this.reading = (async () => {
      try {
        const ids = await read(this.abort.signal);
        this.judge(ids);
      } catch (err) {
        this.catalogError = describeError(err);
        this.nextReadMono = this.o.clock.monotonic() + CATALOG_RETRY_MS;
        if (!this.abort.signal.aborted) this.throttle.warn('unknown_variables_catalog', { err: describeError(err) }, 'could not read the organisation\'s catalog of machine variables; variables refused alone stay suspect and their samples set aside, and are tried again after 5 minutes');
      } finally {
        this.reading = null;
      }
    })();
  }

  /** A catalog read came back: suspects are judged, created variables released. */
  private judge(ids: ReadonlySet<string>): void {
    this.catalog = ids;
    this.catalogReadAt = this.o.clock.now();
    this.catalogReadMono = this.o.clock.monotonic();
    this.catalogError = null;
    this.nextReadMono = this.catalogReadMono + CATALOG_REFRESH_MS;
    // A variable created upstream since it was found unknown is delivered again from now on.
    const created = [...this.unknown.keys()].filter((v) => ids.has(v));
    for (const v of created) this.unknown.delete(v);
    if (created.length > 0) this.o.onCreated?.(created);
    const cleared: string[] = [];
    for (const [v, s] of this.suspects) {
      this.suspects.delete(v);
      if (ids.has(v)) {
        cleared.push(v);
        this.listedRefusal(v, s.message, s.requestId, this.o.clock.monotonic());
      } else this.add({ variable: v, message: s.message, requestId: s.requestId, since: s.since, via: 'catalog' });
    }
    if (cleared.length > 0) this.o.onCleared?.(cleared);
  }
}
