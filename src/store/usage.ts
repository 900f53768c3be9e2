import type { Database, Statement } from 'better-sqlite3';
import { statSync } from 'node:fs';

/**
 * What the file uses, as SQLite counts it: pages in use (all pages less the free ones), free pages
 * inside the file, and what the file takes on disk. Read inside a transaction, the counts include
 * that transaction's own changes, which is how a write's pages are measured (write.ts, S4).
 */
export class DiskUsage {
  readonly pageSize: number;
  private readonly st: { pageCount: Statement; freelistCount: Statement };

  constructor(private readonly db: Database) {
    this.pageSize = db.pragma('page_size', { simple: true }) as number;
    this.st = {
      pageCount: db.prepare('PRAGMA page_count').pluck(true),
      freelistCount: db.prepare('PRAGMA freelist_count').pluck(true),
    };
  }

  /** Pages in use: all pages less free pages. */
  usedPages(): number {
    return (this.st.pageCount.get() as number) - (this.st.freelistCount.get() as number);
  }

  /** Bytes in use by the whole file (every owner): pages less free pages. */
  usedBytes(): number {
    return this.usedPages() * this.pageSize;
  }

  freePages(): number {
    return this.st.freelistCount.get() as number;
  }

  freeBytes(): number {
    return this.freePages() * this.pageSize;
  }

  /** Bytes the database file takes on disk (without its WAL). */
  fileBytes(): number {
    try {
      return statSync(this.db.name).size;
    } catch {
      return 0;
    }
  }
}
