import BetterSqlite3 from 'better-sqlite3';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NEW_FILE_PAGE_SIZE, openBufferDatabase } from '../../src/store/file/database.js';
import { silentLogger } from '../../src/core/logger.js';
import { GATEWAY_SCHEMAS } from '../../src/runtime/store-schemas.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function fresh(): { dir: string; path: string } {
  const dir = mkdtempSync(join(tmpdir(), 'gw-open-'));
  dirs.push(dir);
  return { dir, path: join(dir, 'buffer.db') };
}

describe('opening the buffer file', () => {
  it('a new file takes 2 KB pages (fixed pages of empty tables cost half); an existing file keeps its own page size and content', () => {
    const { path } = fresh();
    const created = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() }).db;
    expect(NEW_FILE_PAGE_SIZE).toBe(2048);
    expect(created.pragma('page_size', { simple: true })).toBe(2048);
    // The page size was set before the first page: auto_vacuum and WAL still hold.
    expect(created.pragma('auto_vacuum', { simple: true })).toBe(2);
    expect(created.pragma('journal_mode', { simple: true })).toBe('wal');
    created.close();
    expect(openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() }).db.pragma('page_size', { simple: true })).toBe(2048);

    // A file created with 4 KB pages (every file before this version) opens as it is.
    const older = fresh().path;
    const db4 = openBufferDatabase(older, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger(), pageSize: 4096 }).db;
    db4.prepare("INSERT INTO meta (key, value) VALUES ('marker', 'keep me')").run();
    db4.close();
    const reopened = openBufferDatabase(older, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() }).db;
    expect(reopened.pragma('page_size', { simple: true })).toBe(4096);
    expect(reopened.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(reopened.prepare("SELECT value FROM meta WHERE key = 'marker'").pluck().get()).toBe('keep me');
    reopened.close();
  });

  it('refuses a file written by a newer version and leaves it in place (no downgrade guessing)', () => {
    const { dir, path } = fresh();
    const first = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
    first.db.prepare("INSERT INTO meta (key, value) VALUES ('marker', 'keep me')").run();
    const current = first.db.pragma('user_version', { simple: true }) as number;
    first.db.pragma(`user_version = ${current + 5}`);
    first.db.close();
    expect(() => openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() })).toThrow(
      new RegExp(`buffer.path: .*buffer\\.db cannot be opened: the buffer file was written by a newer edge-gateway \\(buffer schema ${current + 5}; this version knows up to ${current}\\)`),
    );
    expect(readdirSync(dir).filter((f) => f.includes('damaged'))).toEqual([]);
    const db = new BetterSqlite3(path, { readonly: true });
    expect(db.prepare("SELECT value FROM meta WHERE key = 'marker'").pluck().get()).toBe('keep me');
    db.close();
  });

  it('a file locked by another process is not mistaken for a damaged one', () => {
    const { dir, path } = fresh();
    openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() }).db.close();
    const holder = new BetterSqlite3(path);
    holder.pragma('locking_mode = EXCLUSIVE');
    holder.exec('BEGIN EXCLUSIVE');
    try {
      let error: unknown;
      try {
        openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
      } catch (err) {
        error = err;
      }
      expect(String(error)).toMatch(/buffer\.path: .* cannot be opened: .*lock/i);
      expect((error as { code?: string }).code).toMatch(/^SQLITE_BUSY/);
      expect(readdirSync(dir).filter((f) => f.includes('damaged'))).toEqual([]);
      expect(existsSync(path)).toBe(true);
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
  }, 20_000);
});
