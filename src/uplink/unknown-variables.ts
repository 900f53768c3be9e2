import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';

/**
 * Machine variables the tracking service does not know (issue 24 §1). A 400 for an unknown
 * machine variable is a refusal of that variable, not an outage and not a reason to halt: its
 * samples are set aside (CONTRACT.md error table, "invalid payload": "set them aside with the
 * server's message, deliver the rest") and every other variable keeps flowing.
 *
 * Finding them quickly. Bisecting a batch costs about log2(200) requests per bad item; with
 * thousands of unknown variables that was minutes of refused batches. So:
 * - a variable named by a refusal is remembered: its later samples are set aside without a request;
 * - the 400's message names the first bad item (the [A] format below); that item's variable is
 *   taken out of the batch and the rest is sent again at once, no bisecting;
 * - the first such refusal reads the organisation's catalog (`GET /machine-variables`, §4.10, every
 *   page): a variable the catalog does not list is unknown too, so one catalog read classifies all
 *   of them. It is read again every CATALOG_REFRESH_MS while unknown variables exist, and a variable
 *   that appeared upstream (created by the operator) is delivered again from then on.
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
  /** Epoch ms it was first found unknown. */
  since: number;
  /** A refusal of its own samples, or the catalog's list. */
  via: 'refusal' | 'catalog';
}

/** The registry in the status (first examples; the count is exact). */
export interface UnknownVariablesSnapshot {
  count: number;
  examples: Array<{ variable: string; source: string | null; message: string; since: string; via: 'refusal' | 'catalog' }>;
  /** Unknown variables by source name (null: no configured source names it). */
  by_source: Record<string, number>;
  /** When the catalog was last read (ISO), null before; and why the last read failed. */
  catalog_read_at: string | null;
  catalog_error: string | null;
}

/**
 * [A] How a 400 names an unknown machine variable: the service's message is not specified
 * (interface §7 gives only `{code, message}`); the emulator answers
 * `items[17].machine_variable_id: unknown machine variable "mvr_x"` (emulator/items.ts). Kept in
 * this one place; a message this does not match falls back to bisecting.
 */
const UNKNOWN_AT_INDEX = /items\[(\d+)\](?:\.[A-Za-z0-9_]+)?:\s*unknown machine variable\s+"([^"]*)"/i;
const UNKNOWN_ANY = /unknown machine variable/i;

/** The item index and variable a 400 message names as unknown, or null. */
export function unknownVariableInMessage(message: string | undefined): { index: number; variable: string } | null {
  if (!message) return null;
  const m = UNKNOWN_AT_INDEX.exec(message);
  return m ? { index: Number(m[1]), variable: m[2] } : null;
}

/** True when a refusal of a single item says its machine variable is unknown. */
export function saysUnknownVariable(message: string | undefined): boolean {
  return !!message && UNKNOWN_ANY.test(message);
}

/** The service's message about one item, without the index of the batch it happened to be in. */
export function itemMessage(message: string): string {
  return message.replace(/^items\[\d+\]\.?/, '');
}

/** Reads again while unknown variables exist, so a variable created upstream is picked up. */
export const CATALOG_REFRESH_MS = 5 * 60_000;
/** A failed catalog read is tried again after this long (per-item isolation works meanwhile). */
const CATALOG_RETRY_MS = 60_000;
const EXAMPLES = 20;
/** A configuration reload changes which source maps a variable; the status shows it within this. */
const SOURCE_LOOKUP_MS = 10_000;

export interface UnknownVariablesOptions {
  clock: Clock;
  logger: Logger;
  /** Every machine variable id the organisation's catalog lists; null when it cannot be read. */
  readCatalog?: (signal: AbortSignal) => Promise<ReadonlySet<string>>;
  /** Variables that were unknown and that a catalog read now lists (created upstream). */
  onCreated?: (variables: string[]) => void;
}

export class UnknownVariables {
  private readonly unknown = new Map<string, UnknownVariable>();
  private catalog: ReadonlySet<string> | null = null;
  private catalogReadAt: number | null = null;
  private catalogError: string | null = null;
  private reading: Promise<void> | null = null;
  /** Monotonic ms the next catalog read may start. */
  private nextReadMono = 0;
  /** Which configured source names a variable (set by the runtime; the sources start after the uplink). */
  sourceOf: () => (variable: string) => string | null = () => () => null;
  private readonly abort = new AbortController();
  private readonly throttle: LogThrottle;
  /** Found since the last log line. */
  private newSinceLog = 0;

  constructor(private readonly o: UnknownVariablesOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  get count(): number {
    return this.unknown.size;
  }

  /** The entry when this variable is known to be unknown (named by a refusal or missing from the catalog). */
  lookup(variable: string): UnknownVariable | undefined {
    const hit = this.unknown.get(variable);
    if (hit || this.catalog === null || this.catalog.has(variable)) return hit;
    return this.add({ variable, message: `not in the organisation's catalog (GET /machine-variables lists ${this.catalog.size} variables)`, since: this.o.clock.now(), via: 'catalog' });
  }

  /** The service refused `variable` as unknown: remember it and read the catalog to find the others. */
  refused(variable: string, message: string, requestId?: string): UnknownVariable {
    const hit = this.unknown.get(variable);
    if (hit && hit.via === 'refusal') return hit;
    const entry = this.add({ variable, message: itemMessage(message), requestId, since: hit?.since ?? this.o.clock.now(), via: 'refusal' });
    this.readCatalogSoon();
    return entry;
  }

  /**
   * The operator requeued set-aside samples of these variables (or of all): that says the mapping
   * or the catalog was fixed, so they are tried again at once instead of being set aside again
   * until the next catalog read. The cached catalog goes too (it may predate the fix); a variable
   * that is still unknown is named by the next refusal and found again.
   */
  forget(variables: readonly string[] | 'all'): void {
    if (variables === 'all') this.unknown.clear();
    else for (const v of variables) this.unknown.delete(v);
    this.catalog = null;
    this.nextReadMono = 0;
  }

  /** For /status: the count, the first examples with their source, counts by source. */
  snapshot(): UnknownVariablesSnapshot {
    const sourceOf = this.unknown.size > 0 ? this.cachedSourceOf() : () => null;
    const bySource: Record<string, number> = {};
    const examples: UnknownVariablesSnapshot['examples'] = [];
    for (const u of this.unknown.values()) {
      const source = sourceOf(u.variable);
      const key = source ?? '(no configured source)';
      bySource[key] = (bySource[key] ?? 0) + 1;
      if (examples.length < EXAMPLES) examples.push({ variable: u.variable, source, message: u.message, since: new Date(u.since).toISOString(), via: u.via });
    }
    return {
      count: this.unknown.size,
      examples,
      by_source: bySource,
      catalog_read_at: this.catalogReadAt === null ? null : new Date(this.catalogReadAt).toISOString(),
      catalog_error: this.catalogError,
    };
  }

  /** The source lookup, rebuilt at most every SOURCE_LOOKUP_MS (the status is read every second). */
  private cachedSourceOf(): (variable: string) => string | null {
    const now = this.o.clock.monotonic();
    if (!this.lookupCache || now - this.lookupCache.at > SOURCE_LOOKUP_MS) this.lookupCache = { at: now, fn: this.sourceOf() };
    return this.lookupCache.fn;
  }

  private lookupCache: { at: number; fn: (variable: string) => string | null } | null = null;

  /** Reads the catalog again when it is due (called by the sync path while unknown variables exist). */
  tick(): void {
    if (this.unknown.size > 0) this.readCatalogSoon();
  }

  /** Reads the catalog now, not at the next refresh (an operator says the variables were created). */
  async readCatalogNow(): Promise<void> {
    await this.reading;
    this.nextReadMono = 0;
    this.readCatalogSoon();
    await this.reading;
  }

  /** Waits for a catalog read in flight (tests, stop). */
  async settled(): Promise<void> {
    await this.reading;
  }

  stop(): void {
    this.abort.abort(new Error('gateway stopping'));
  }

  private add(entry: UnknownVariable): UnknownVariable {
    this.unknown.set(entry.variable, entry);
    this.newSinceLog += 1;
    // One line, throttled to one a minute with the number found since (not one per batch).
    this.throttle.warn(
      'unknown_variables',
      { unknown_variables: this.unknown.size, new_since_last_line: this.newSinceLog, example: entry.variable, service_said: entry.message, via: entry.via },
      `${this.unknown.size} machine variable${this.unknown.size === 1 ? ' is' : 's are'} unknown to the organisation's catalog; their samples are set aside (edge-gateway set-aside list). Fix the mapping or create them upstream`,
    );
    this.newSinceLog = 0;
    return entry;
  }

  private readCatalogSoon(): void {
    const read = this.o.readCatalog;
    if (!read || this.reading || this.abort.signal.aborted || this.o.clock.monotonic() < this.nextReadMono) return;
    this.reading = (async () => {
      try {
        const ids = await read(this.abort.signal);
        this.catalog = ids;
        this.catalogReadAt = this.o.clock.now();
        this.catalogError = null;
        this.nextReadMono = this.o.clock.monotonic() + CATALOG_REFRESH_MS;
        // A variable created upstream since it was refused is delivered again from now on.
        const created = [...this.unknown.keys()].filter((v) => ids.has(v));
        for (const v of created) this.unknown.delete(v);
        if (created.length > 0) this.o.onCreated?.(created);
      } catch (err) {
        this.catalogError = describeError(err);
        this.nextReadMono = this.o.clock.monotonic() + CATALOG_RETRY_MS;
        if (!this.abort.signal.aborted) this.throttle.warn('unknown_variables_catalog', { err: describeError(err) }, 'could not read the organisation\'s catalog of machine variables; unknown variables are found one refusal at a time');
      } finally {
        this.reading = null;
      }
    })();
  }
}
