import BetterSqlite3, { type Database } from 'better-sqlite3';
import { ChunkStore } from '../chunks/store.js';
import type { ImportReader, SeqRange } from '../types.js';
import { SampleReader } from './reader.js';

/**
 * The import reader on a connection of its own, read-only, for a worker thread that builds import
 * files beside the gateway's main thread (src/uplink/import-file-builder.ts). At 100,000 variables
 * serializing files was a fifth of the main thread (bench/README.md, "MQTT at 30,000 and 100,000
 * variables"); the buffer is in WAL mode with normal locking (the one-gateway lock is a file of
 * its own, src/store/file/owner-lock.ts), so a second connection reads while the main one commits.
 *
 * What keeps it right (src/buffer/README.md): the range is held by its import job, so nothing
 * renumbers, seals or re-encodes its samples while the worker walks it (B3); each block is read in
 * one read transaction, so the chunk lookup and the rows before it come from one snapshot, as they
 * did in one synchronous turn of the main thread. Variable names are read from the `variables`
 * table: an id there never changes its name, and every sample's variable is committed with it.
 */
export interface DetachedReader {
  importReader(range: SeqRange, idField: string, rows?: number): ImportReader;
  close(): void;
}

export function openDetachedReader(path: string): DetachedReader {
  const db: Database = new BetterSqlite3(path, { readonly: true, fileMustExist: true, timeout: 5_000 });
  // Sequential reads of old pages: a small cache is enough, and RSS is the budget (bench/memory.ts).
  db.pragma('cache_size = -2000');
  const nameOfId = db.prepare('SELECT name FROM variables WHERE id = ?').pluck(true);
  const names = new Map<number, string>();
  const dict = {
    nameOf(id: number): string {
      let name = names.get(id);
      if (name === undefined) {
        name = (nameOfId.get(id) as string | undefined) ?? `#${id}`;
        names.set(id, name);
      }
      return name;
    },
  };
  // `sealed > 0` only saves a chunk lookup on a buffer without chunks; here the lookup always runs.
  const reader = new SampleReader(db, { store: new ChunkStore(db), tally: { sealed: 1 }, dict });
  return {
    importReader(range, idField, rows) {
      const inner = reader.importReader(range, idField, rows);
      const nextBlock = db.transaction(() => inner.nextBlock());
      const itemsAfter = db.transaction((afterSeq: number, n: number) => inner.itemsAfter(afterSeq, n));
      return { nextBlock: () => nextBlock(), itemsAfter: (afterSeq, n) => itemsAfter(afterSeq, n) };
    },
    close() {
      db.close();
    },
  };
}
