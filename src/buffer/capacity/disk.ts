import type { Database, Statement } from 'better-sqlite3';

/**
 * What the buffer file uses: pages in use (what buffer.max_bytes limits, README.md B9) and pages
 * the file holds.
 */
export class DiskUsage {
  readonly pageSize: number;
  private readonly st: { pageCount: Statement; freelistCount: Statement };

  constructor(db: Database) {
    this.pageSize = db.pragma('page_size', { simple: true }) as number;
    this.st = {
      pageCount: db.prepare('PRAGMA page_count').pluck(true),
      freelistCount: db.prepare('PRAGMA freelist_count').pluck(true),
    };
  }

  /** Bytes in use by the database: pages less free pages. */
  usedBytes(): number {
    return ((this.st.pageCount.get() as number) - (this.st.freelistCount.get() as number)) * this.pageSize;
  }

  /** Bytes of the database's pages, free ones included. */
  pageBytes(): number {
    return (this.st.pageCount.get() as number) * this.pageSize;
  }

  freeBytes(): number {
    return (this.st.freelistCount.get() as number) * this.pageSize;
  }
}
