import type { Database, Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import { describeError, errorCode } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import type { DiskReserve } from './disk-reserve.js';
import { ownerInfoNow, RECORD_OWNER_SQL } from './file/owner-lock.js';
import { migrate, type OwnerSchema } from './migrations.js';
import { SpaceAccounts, type FullPolicy, type OwnerSpace } from './space.js';
import { DiskUsage } from './usage.js';
import { Writes, type WriteTx } from './write.js';

/**
 * The one owner of the gateway's SQLite file (README.md): the connection, the migration registry,
 * the writes (write.ts), the space per owner (space.ts) and the disk-full state (disk-reserve.ts).
 * Everything that keeps tables in the file is an owner registered here with its schema; it gets a
 * `StoreOwner` (prepare, write, admit, its bytes) and never the connection.
 */

export interface StoreOptions {
  /** Every owner's schema (migrations.ts); the file is brought to their version. */
  schemas: readonly OwnerSchema[];
  /** The owner whose bytes are what the others leave of the file (default: the first schema's). */
  remainder?: string;
  /** Bound of each owner (bytes); owners not named have none until they set one. */
  limits?: Readonly<Record<string, number>>;
  logger: Logger;
  metrics?: Metrics | null;
  /** The disk-full state and its reserve (open.ts); null: writes meeting a full disk only fail. */
  reserve?: DiskReserve | null;
  /** Check the schema only, write nothing (tools reading a file). */
  readOnly?: boolean;
}

export interface StoreStatus {
  /** In the disk-full state (README.md S6): new samples are refused while the backlog is delivered. */
  disk_full: boolean;
  disk_full_reason: string | null;
  /** Free bytes on the file system holding the file (null when unknown). */
  disk_free_bytes: number | null;
  /** store.disk_reserve, and what the reserve file holds now. */
  reserve_bytes: number;
  reserve_held_bytes: number;
  /** Bytes in use of the whole file (all owners) and free pages inside it. */
  used_bytes: number;
  free_bytes: number;
  owners: OwnerSpace[];
}

export class Store {
  readonly usage: DiskUsage;
  private readonly writes: Writes;
  readonly space: SpaceAccounts;
  private readonly owners = new Map<string, StoreOwner>();
  private readonly unbind: Array<() => void> = [];
  private closed = false;

  constructor(
    private readonly db: Database,
    private readonly o: StoreOptions,
  ) {
    migrate(db, o.schemas, { readOnly: o.readOnly });
    this.usage = new DiskUsage(db);
    const metrics = o.metrics ?? null;
    this.writes = new Writes(db, { usedPages: () => this.usage.usedPages(), settle: (pages) => this.space.settle(pages), failed: (err) => this.failed(err) });
    this.space = new SpaceAccounts(db, o.schemas, o.remainder ?? o.schemas[0]?.owner ?? 'samples', this.usage, { metrics, logger: o.logger, inWrite: () => this.writes.current !== null });
    for (const s of o.schemas) this.owners.set(s.owner, new StoreOwner(s.owner, db, this.writes, this.space));
    for (const [owner, bytes] of Object.entries(o.limits ?? {})) if (this.owners.has(owner)) this.space.setMaxBytes(owner, bytes);
    if (metrics) {
      this.unbind.push(metrics.storeBytes.readFrom('store', () => this.space.status().map((s) => ({ labels: { owner: s.owner }, value: s.bytes }))));
      this.unbind.push(metrics.storeMaxBytes.readFrom('store', () => this.space.status().map((s) => ({ labels: { owner: s.owner }, value: s.max_bytes ?? -1 }))));
      metrics.storeDiskFull.set(this.diskFull ? 1 : 0);
    }
  }

  /** The handle of a registered owner. */
  owner(name: string): StoreOwner {
    const o = this.owners.get(name);
    if (!o) throw new Error(`no owner "${name}" is registered with the store (registered: ${[...this.owners.keys()].join(', ')})`);
    return o;
  }

  /** The file (absolute path; ':memory:' in memory). */
  get path(): string {
    return this.db.name;
  }

  get diskFull(): boolean {
    return this.o.reserve?.full ?? false;
  }

  get diskFullReason(): string | null {
    return this.o.reserve?.reason ?? null;
  }

  /** Called with true when the disk-full state starts and false when it ends. */
  onDiskFull(listener: (full: boolean) => void): () => void {
    return this.o.reserve?.onChange(listener) ?? (() => undefined);
  }

  /** Notes in `meta` who holds the file (the message a refused second gateway prints); a full disk only skips it. */
  noteHolder(): void {
    try {
      this.db.prepare(RECORD_OWNER_SQL).run(JSON.stringify(ownerInfoNow()));
    } catch (err) {
      this.o.logger.warn({ err: describeError(err) }, 'who holds the buffer file could not be noted in it (a second gateway on it is refused all the same)');
    }
  }

  private failed(err: unknown): void {
    if (errorCode(err, '') === 'SQLITE_FULL') this.o.reserve?.diskFull('a write got SQLITE_FULL');
  }

  status(): StoreStatus {
    const r = this.o.reserve;
    const free = r?.freeBytes() ?? Infinity;
    return {
      disk_full: this.diskFull,
      disk_full_reason: this.diskFullReason,
      disk_free_bytes: Number.isFinite(free) ? free : null,
      reserve_bytes: r?.reserveBytes ?? 0,
      reserve_held_bytes: r?.held() ?? 0,
      used_bytes: this.usage.usedBytes(),
      free_bytes: this.usage.freeBytes(),
      owners: this.space.status(),
    };
  }

  /**
   * Closes the file: a last TRUNCATE checkpoint (a busy or full disk only leaves the WAL for the
   * next open to replay), then the connection. Safe to call twice.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const u of this.unbind.splice(0)) u();
    this.o.reserve?.close();
    if (!this.db.open) return;
    try {
      if (!this.diskFull && !this.o.readOnly) this.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // replayed at the next open
    }
    this.db.close();
  }
}

/**
 * What prepares statements: an owner, or, for a reader on a read-only connection of its own that
 * never writes (the import-file worker's), that connection.
 */
export interface StatementSource {
  prepare(sql: string): Statement;
}

/**
 * File-level pragmas on the connection (checkpoints, incremental vacuum, busy timeout, page
 * counts) and the file's name: what the buffer's capacity rooms need of the file, no more. None of
 * them changes a row.
 */
export interface FileAccess {
  readonly name: string;
  /** True for a database in memory (no file: checkpoints stay on the main thread). */
  readonly memory: boolean;
  pragma(source: string, options?: { simple?: boolean }): unknown;
}

/**
 * What an owner gets: statements (those that change the file run only inside its own `write`),
 * its writes, its space. Shaped like the part of better-sqlite3's Database the owners used
 * (`prepare`, `pragma`, `name`, `memory`), so an owner's code reads as before.
 */
export class StoreOwner {
  constructor(
    readonly owner: string,
    private readonly db: Database,
    private readonly writes: Writes,
    private readonly space: SpaceAccounts,
  ) {}

  prepare(sql: string): Statement {
    return this.writes.guard(this.owner, this.db.prepare(sql));
  }

  /**
   * A pragma on the file (page counts, checkpoints, incremental vacuum, busy timeout): none of them
   * changes a row, so none needs a write.
   */
  pragma(source: string, options?: { simple?: boolean }): unknown {
    return this.db.pragma(source, options);
  }

  /** The file (absolute path). */
  get name(): string {
    return this.db.name;
  }

  get memory(): boolean {
    return this.db.memory;
  }

  /** Whether a write of this owner runs now (the innermost one). */
  get writing(): boolean {
    return this.writes.current === this.owner;
  }

  /** Whether any write runs now. */
  get inWrite(): boolean {
    return this.writes.current !== null;
  }

  /**
   * Runs `fn` as this owner's write (write.ts): alone in its own transaction, or, with `join`,
   * inside the write running now (committed or rolled back with it).
   */
  write<T>(what: string, fn: (tx: WriteTx) => T, options: { join?: boolean } = {}): T {
    return this.writes.run(this.owner, what, fn, options.join === true);
  }

  /** Bytes in use by this owner. */
  get bytes(): number {
    return this.space.bytes(this.owner);
  }

  get maxBytes(): number {
    return this.space.maxBytes(this.owner);
  }

  set maxBytes(bytes: number) {
    this.space.setMaxBytes(this.owner, bytes);
  }

  /** Sets what this owner does at its bound. */
  fullPolicy(policy: FullPolicy): void {
    this.space.setPolicy(this.owner, policy);
  }

  /** Admits a new entry, making room first when over the bound; throws StoreFullError (counted) otherwise. */
  admit(what: string): void {
    this.space.admit(this.owner, what);
  }

  /** Whether a new entry fits now (making room first when over the bound and no write runs). */
  hasRoom(): boolean {
    return this.space.hasRoom(this.owner);
  }

  /** Counts a refusal and throws its StoreFullError (an owner that checked `hasRoom` itself). */
  refuse(what: string): never {
    return this.space.refuse(this.owner, what);
  }

  /**
   * The usual full policy: `step` (one write deleting at most `stepRows` of the oldest rows that
   * may go; returns how many) until this owner is below 90 % of its bound, or nothing more may go.
   * Returns the rows deleted.
   */
  deleteOldest(what: string, stepRows: number, step: (tx: WriteTx) => number): number {
    let removed = 0;
    for (let i = 0; i < 1_000 && this.bytes > this.maxBytes * 0.9; i++) {
      const n = this.write(what, step);
      removed += n;
      if (n < stepRows) break;
    }
    return removed;
  }

  /** Counts a refusal the owner reports its own way (a counted event, a log line). */
  countRefusal(): void {
    this.space.countRefusal(this.owner);
  }

  /** The error a refusal gives its sender (not counted). */
  fullError(what: string): Error {
    return this.space.fullError(this.owner, what);
  }
}

export type { WriteTx } from './write.js';
export { NestedWriteError } from './write.js';
export { StoreFullError, type FullPolicy } from './space.js';
