import BetterSqlite3 from 'better-sqlite3';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openBufferDatabase } from '../../src/buffer/file/database.js';
import { silentLogger } from '../../src/core/logger.js';

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
  it('refuses a file written by a newer version and leaves it in place (no downgrade guessing)', () => {
    const { dir, path } = fresh();
    const first = openBufferDatabase(path, { synchronous: 'full', logger: silentLogger() });
    first.db.prepare("INSERT INTO meta (key, value) VALUES ('marker', 'keep me')").run();
    const current = first.db.pragma('user_version', { simple: true }) as number;
    first.db.pragma(`user_version = ${current + 5}`);
    first.db.close();
    expect(() => openBufferDatabase(path, { synchronous: 'full', logger: silentLogger() })).toThrow(
      new RegExp(`buffer.path: .*buffer\\.db cannot be opened: the buffer file was written by a newer edge-gateway \\(buffer schema ${current + 5}; this version knows up to ${current}\\)`),
    );
    expect(readdirSync(dir).filter((f) => f.includes('damaged'))).toEqual([]);
    const db = new BetterSqlite3(path, { readonly: true });
    expect(db.prepare("SELECT value FROM meta WHERE key = 'marker'").pluck().get()).toBe('keep me');
    db.close();
  });

  it('a file locked by another process is not mistaken for a damaged one', () => {
    const { dir, path } = fresh();
    openBufferDatabase(path, { synchronous: 'full', logger: silentLogger() }).db.close();
    const holder = new BetterSqlite3(path);
    holder.pragma('locking_mode = EXCLUSIVE');
    holder.exec('BEGIN EXCLUSIVE');
    try {
      let error: unknown;
      try {
        openBufferDatabase(path, { synchronous: 'full', logger: silentLogger() });
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
