import type { Database } from 'better-sqlite3';

/**
 * Runs `fn` in its own IMMEDIATE transaction, and refuses to run inside somebody else's.
 *
 * README.md B8: a room changes its in-memory counts only after its transaction committed. Inside
 * an outer transaction its "commit" is only a savepoint release: a later rollback of the outer one
 * would undo the file but not the counts. So no write of the buffer runs nested; a caller that
 * needs two writes in one transaction asks the buffer for one method doing both.
 */
export function inOwnTransaction<T>(db: Database, what: string, fn: () => T): T {
  assertNotNested(db, what);
  return db.transaction(fn).immediate();
}

export function assertNotNested(db: Database, what: string): void {
  if (db.inTransaction) throw new Error(`${what} runs in its own transaction and was called inside another one (src/buffer/README.md B8)`);
}
