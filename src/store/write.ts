import type { Database, Statement } from 'better-sqlite3';
import { GatewayError } from '../core/errors.js';

/**
 * `write(owner, what, fn)`: the only way to change the file (README.md S2, S3).
 *
 * - A write outside any other runs `fn` in its own IMMEDIATE transaction. When it returns, the
 *   transaction has committed; when it throws, the file is as before.
 * - A write inside another write is refused (NestedWriteError) unless it asks to `join`: then it
 *   runs inside the outer transaction, as a savepoint. It commits or rolls back with the outermost
 *   write, never on its own; when its own part fails, that part is rolled back to its savepoint and
 *   the error goes on to the outer write.
 * - In-memory state follows the file (B8 of src/buffer/README.md, for every owner): what a write
 *   changes in memory is registered with `tx.onCommit` (run once the outermost transaction has
 *   committed, in order) or undone with `tx.onRollback` (run when its part rolled back). A write
 *   that does not join is alone by construction, so code after it runs after its commit.
 * - Every write statement an owner prepares runs only inside that owner's own write (`guard`):
 *   a statement run outside one throws, so nothing changes the file unseen, unmeasured (S4) or
 *   outside a transaction.
 * - The pages each owner's part took or gave back are measured (pages in use before and after
 *   it, its joined parts apart) and handed to the space accounting after the commit (S4).
 */

export interface WriteTx {
  /** The owner whose write this is. */
  readonly owner: string;
  /** Runs `fn` once the outermost transaction has committed (in registration order). */
  onCommit(fn: () => void): void;
  /** Runs `fn` when this write's part is rolled back. */
  onRollback(fn: () => void): void;
}

export class NestedWriteError extends GatewayError {
  constructor(what: string, outer: string) {
    super('STORE_NESTED_WRITE', `${what} runs in its own transaction and was called inside ${outer} (src/store/README.md S3)`);
  }
}

class Scope implements WriteTx {
  readonly commits: Array<() => void> = [];
  readonly rollbacks: Array<() => void> = [];
  /** Pages each owner's part took (negative: gave back), this scope's joined parts included once settled. */
  readonly pages = new Map<string, number>();
  /** Pages taken by the joined parts, counted apart from this scope's own. */
  innerPages = 0;

  constructor(
    readonly owner: string,
    readonly what: string,
    readonly startPages: number,
    readonly depth: number,
  ) {}

  onCommit(fn: () => void): void {
    this.commits.push(fn);
  }

  onRollback(fn: () => void): void {
    this.rollbacks.push(fn);
  }

  /** This scope's own part: what it took less what its joined parts took. */
  close(endPages: number): number {
    const total = endPages - this.startPages;
    this.pages.set(this.owner, (this.pages.get(this.owner) ?? 0) + total - this.innerPages);
    return total;
  }

  /** A joined part that succeeded: its pages and hooks go with this scope. */
  absorb(inner: Scope, innerTotal: number): void {
    this.innerPages += innerTotal;
    for (const [owner, n] of inner.pages) this.pages.set(owner, (this.pages.get(owner) ?? 0) + n);
    this.commits.push(...inner.commits);
    this.rollbacks.push(...inner.rollbacks);
  }
}

export interface WritesOptions {
  /** Pages in use now (page_count − freelist_count), read inside the transaction. */
  usedPages: () => number;
  /** After a commit: the pages each owner took or gave back. */
  settle: (pages: ReadonlyMap<string, number>) => void;
  /** After a write failed (the disk may be full). */
  failed: (err: unknown) => void;
}

export class Writes {
  private readonly stack: Scope[] = [];
  private readonly st: { begin: Statement; commit: Statement; rollback: Statement };
  private readonly savepoints: Array<{ open: Statement; release: Statement; undo: Statement }> = [];

  constructor(
    private readonly db: Database,
    private readonly o: WritesOptions,
  ) {
    this.st = { begin: db.prepare('BEGIN IMMEDIATE'), commit: db.prepare('COMMIT'), rollback: db.prepare('ROLLBACK') };
  }

  /** The owner whose write runs now (the innermost), or null. */
  get current(): string | null {
    return this.stack.length > 0 ? this.stack[this.stack.length - 1].owner : null;
  }

  run<T>(owner: string, what: string, fn: (tx: WriteTx) => T, join: boolean): T {
    const outer = this.stack[this.stack.length - 1];
    if (outer) {
      if (!join) throw new NestedWriteError(`${what} (${owner})`, `${outer.what} (${outer.owner})`);
      return this.joined(owner, what, fn, outer);
    }
    if (this.db.inTransaction) throw new NestedWriteError(`${what} (${owner})`, 'a transaction opened outside the store');
    return this.alone(owner, what, fn);
  }

  private alone<T>(owner: string, what: string, fn: (tx: WriteTx) => T): T {
    this.st.begin.run();
    const scope = new Scope(owner, what, this.o.usedPages(), 0);
    this.stack.push(scope);
    let result: T;
    try {
      result = notAsync(fn(scope), what);
      scope.close(this.o.usedPages());
      this.st.commit.run();
    } catch (err) {
      if (this.db.inTransaction) this.st.rollback.run();
      this.stack.pop();
      runAll(scope.rollbacks.reverse());
      this.o.failed(err);
      throw err;
    }
    this.stack.pop();
    this.o.settle(scope.pages);
    runAll(scope.commits);
    return result;
  }

  private joined<T>(owner: string, what: string, fn: (tx: WriteTx) => T, outer: Scope): T {
    const sp = this.savepoint(outer.depth + 1);
    sp.open.run();
    const scope = new Scope(owner, what, this.o.usedPages(), outer.depth + 1);
    this.stack.push(scope);
    try {
      const result = notAsync(fn(scope), what);
      const total = scope.close(this.o.usedPages());
      sp.release.run();
      this.stack.pop();
      outer.absorb(scope, total);
      return result;
    } catch (err) {
      if (this.db.inTransaction) {
        sp.undo.run();
        sp.release.run();
      }
      this.stack.pop();
      runAll(scope.rollbacks.reverse());
      throw err;
    }
  }

  private savepoint(depth: number): { open: Statement; release: Statement; undo: Statement } {
    let sp = this.savepoints[depth];
    if (!sp) {
      sp = { open: this.db.prepare(`SAVEPOINT store_w${depth}`), release: this.db.prepare(`RELEASE store_w${depth}`), undo: this.db.prepare(`ROLLBACK TO store_w${depth}`) };
      this.savepoints[depth] = sp;
    }
    return sp;
  }

  /**
   * A statement of `owner`: one that changes the file runs only inside `owner`'s own write (S2).
   * Read-only statements run anywhere.
   */
  guard(owner: string, stmt: Statement): Statement {
    if (stmt.readonly) return stmt;
    const self = this as Writes;
    const patched = stmt as unknown as Record<'run' | 'get' | 'all' | 'iterate', (...args: unknown[]) => unknown>;
    for (const m of ['run', 'get', 'all', 'iterate'] as const) {
      const original = patched[m];
      patched[m] = function guarded(this: unknown, ...args: unknown[]): unknown {
        if (self.current !== owner) throw new Error(`a write of ${owner} ran outside store.write(${owner}) (src/store/README.md S2): ${stmt.source.replace(/\s+/g, ' ').slice(0, 80)}`);
        return original.apply(stmt, args);
      };
    }
    return stmt;
  }
}

function notAsync<T>(r: T, what: string): T {
  if (r && typeof (r as { then?: unknown }).then === 'function') throw new TypeError(`${what}: a store write must be synchronous`);
  return r;
}

/** Runs every hook, the rest too when one throws; rethrows the first error after. */
function runAll(hooks: ReadonlyArray<() => void>): void {
  let first: unknown = null;
  for (const h of hooks) {
    try {
      h();
    } catch (err) {
      first ??= err;
    }
  }
  if (first !== null) throw first;
}
