import type { Database } from 'better-sqlite3';
import type { Logger } from 'pino';
import { describeError, GatewayError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import type { OwnerSchema } from './migrations.js';
import type { DiskUsage } from './usage.js';

/**
 * Space per owner, each with its bound and its full policy (README.md S4, S5).
 *
 * - Bytes per owner are pages: measured once at open (SQLite's dbstat over the owner's tables and
 *   their indexes), then kept by every write, which reports the pages each owner's part took or
 *   gave back (write.ts). The remainder owner (the sample buffer) has what is left of the file's
 *   pages in use: its own tables and what every owner shares (the schema, `meta`, pointer maps).
 *   So the counts always add up to the file's pages in use, and no owner's rows count against
 *   another owner's bound.
 * - Each owner has a bound (`maxBytes`; Infinity: none) and a full policy: what it deletes to make
 *   room (`makeRoom`, oldest first, only what may go) and whether it refuses new entries beyond
 *   that. A new entry is admitted (`admit`) only below the bound, after making room when over;
 *   otherwise it is refused with a StoreFullError naming the owner, its bytes, its bound and the
 *   policy, which the owner turns into its sender's error (HTTP 507, a counted MQTT refusal). An
 *   owner whose policy makes room after every write that went over (`afterWrite`: set-aside,
 *   trend, gaps) never refuses.
 */

export interface FullPolicy {
  /** What the owner does at its bound, in words (status, errors, docs). */
  text: string;
  /** Deletes what may go, oldest first, to get below the bound; returns the rows removed. Runs outside any write. */
  makeRoom?: () => number;
  /** Make room right after a write that left the owner over its bound (instead of only before admitting). */
  afterWrite?: boolean;
}

export class StoreFullError extends GatewayError {
  constructor(
    readonly owner: string,
    readonly bytes: number,
    readonly maxBytes: number,
    what: string,
    policy: string,
  ) {
    super('STORE_FULL', `no room for ${what}: the ${owner} space is full (${mb(bytes)} in use, store.${owner}_max_bytes is ${mb(maxBytes)}; ${policy})`, { details: { owner, bytes, max_bytes: maxBytes } });
    this.name = 'StoreFullError';
  }
}

export interface OwnerSpace {
  owner: string;
  bytes: number;
  max_bytes: number | null;
  full_policy: string;
  refused_total: number;
  removed_rows_total: number;
}

class Account {
  /** Pages in use (not kept for the remainder owner, which has what is left). */
  pages = 0;
  maxBytes = Infinity;
  policy: FullPolicy | null = null;
  refused = 0;
  removed = 0;
  makingRoom = false;
}

export class SpaceAccounts {
  private readonly accounts = new Map<string, Account>();

  constructor(
    db: Database,
    schemas: readonly OwnerSchema[],
    readonly remainder: string,
    private readonly usage: DiskUsage,
    private readonly o: { metrics: Metrics | null; logger: Logger; inWrite: () => boolean },
  ) {
    for (const s of schemas) this.accounts.set(s.owner, new Account());
    if (!this.accounts.has(remainder)) this.accounts.set(remainder, new Account());
    this.measure(db, schemas);
  }

  /** Pages of every owner but the remainder, from dbstat (their tables are bounded, so this stays short). */
  private measure(db: Database, schemas: readonly OwnerSchema[]): void {
    const btrees = db.prepare("SELECT name FROM sqlite_schema WHERE tbl_name = ? AND type IN ('table', 'index')").pluck(true);
    const size = db.prepare("SELECT coalesce(sum(pgsize), 0) FROM dbstat('main', 1) WHERE name = ?").pluck(true);
    for (const s of schemas) {
      if (s.owner === this.remainder) continue;
      let bytes = 0;
      for (const table of s.tables) for (const name of btrees.all(table) as string[]) bytes += size.get(name) as number;
      this.account(s.owner).pages = Math.round(bytes / this.usage.pageSize);
    }
  }

  private account(owner: string): Account {
    const a = this.accounts.get(owner);
    if (!a) throw new Error(`no owner "${owner}" is registered with the store`);
    return a;
  }

  get owners(): string[] {
    return [...this.accounts.keys()];
  }

  /** Bytes in use by `owner`. */
  bytes(owner: string): number {
    if (owner !== this.remainder) return this.account(owner).pages * this.usage.pageSize;
    let others = 0;
    for (const [name, a] of this.accounts) if (name !== this.remainder) others += a.pages;
    return Math.max(0, this.usage.usedPages() - others) * this.usage.pageSize;
  }

  maxBytes(owner: string): number {
    return this.account(owner).maxBytes;
  }

  setMaxBytes(owner: string, bytes: number): void {
    this.account(owner).maxBytes = bytes;
  }

  setPolicy(owner: string, policy: FullPolicy): void {
    this.account(owner).policy = policy;
  }

  /** After a commit: each owner's part. Then the owners that went over their bound make room (afterWrite). */
  settle(pages: ReadonlyMap<string, number>): void {
    // Never below nothing: rows another connection wrote beside the store (a test, a tool on a
    // stopped gateway's file) were counted with the remainder, and their deletes must not make an
    // owner's count negative. The next open measures again.
    for (const [owner, n] of pages) if (owner !== this.remainder) this.account(owner).pages = Math.max(0, this.account(owner).pages + n);
    for (const owner of pages.keys()) {
      const a = this.account(owner);
      if (a.policy?.afterWrite && this.over(owner)) this.makeRoom(owner, a);
    }
  }

  over(owner: string): boolean {
    return this.bytes(owner) >= this.account(owner).maxBytes;
  }

  /**
   * Whether `owner` has room for a new entry now; when over its bound, it first makes room (not
   * inside another write: there the bound is only checked).
   */
  hasRoom(owner: string): boolean {
    const a = this.account(owner);
    if (!this.over(owner)) return true;
    if (!this.o.inWrite()) this.makeRoom(owner, a);
    return !this.over(owner);
  }

  /** Admits a new entry of `owner`, or refuses it (counted) with a StoreFullError. */
  admit(owner: string, what: string): void {
    if (this.hasRoom(owner)) return;
    this.refuse(owner, what);
  }

  /** Counts a refusal of `owner` and throws its StoreFullError. */
  refuse(owner: string, what: string): never {
    this.countRefusal(owner);
    throw this.fullError(owner, what);
  }

  /** Counts a refusal of `owner` (one that says so its own way, e.g. a counted event). */
  countRefusal(owner: string): void {
    this.account(owner).refused += 1;
    this.o.metrics?.storeRefusedWrites.inc({ owner });
  }

  /** The error a refusal of `owner` gives its sender. */
  fullError(owner: string, what: string): StoreFullError {
    const a = this.account(owner);
    return new StoreFullError(owner, this.bytes(owner), a.maxBytes, what, a.policy?.text ?? 'it refuses new entries');
  }

  private makeRoom(owner: string, a: Account): void {
    if (!a.policy?.makeRoom || a.makingRoom) return;
    a.makingRoom = true;
    try {
      const n = a.policy.makeRoom();
      if (n > 0) {
        a.removed += n;
        this.o.metrics?.storeRemovedRows.inc({ owner }, n);
      }
    } catch (err) {
      this.o.logger.warn({ owner, err: describeError(err) }, `the ${owner} space could not make room; tried again at its next write`);
    } finally {
      a.makingRoom = false;
    }
  }

  status(): OwnerSpace[] {
    return this.owners.map((owner) => {
      const a = this.account(owner);
      return { owner, bytes: this.bytes(owner), max_bytes: Number.isFinite(a.maxBytes) ? a.maxBytes : null, full_policy: a.policy?.text ?? '', refused_total: a.refused, removed_rows_total: a.removed };
    });
  }
}

/** Sizes as the settings take them (MB = 10^6 bytes). */
function mb(bytes: number): string {
  return bytes >= 1_000_000 ? `${(bytes / 1_000_000).toFixed(1)} MB` : `${Math.round(bytes / 1_000)} kB`;
}
