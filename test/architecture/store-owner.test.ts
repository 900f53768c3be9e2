import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * One owner of the SQLite file (src/store/README.md): only src/store opens it for the running
 * gateway, and the few other connections are named here with why. A new `import ... from
 * 'better-sqlite3'` anywhere else fails this test: it would be a way to write around
 * write(owner, fn).
 */
const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return files(path);
    return /\.tsx?$/.test(e.name) ? [path] : [];
  });
}

/** Files that open connections of their own, and why that is not a way around the store. */
const OPENS_CONNECTIONS: Record<string, string> = {
  'store/file/database.ts': 'opens the file for the store',
  'store/file/owner-lock.ts': 'the one-gateway lock file',
  'buffer/imports/detached-reader.ts': 'a read-only connection for the import-file worker',
  'buffer/capacity/checkpoint-worker.ts': 'checkpoints only (no row changes)',
  'commands/backup.ts': 'VACUUM INTO a copy; reads the copy through a read-only Store',
  'commands/gaps.ts': 'reads the file through a read-only Store',
  'commands/set-aside.ts': 'no gateway runs on the file; writes through a Store',
};
/** Files that name the connection's type without opening one. */
const NAMES_CONNECTIONS = ['runtime/store-schemas.ts'];

describe('one owner of the SQLite file', () => {
  const imports = files(SRC)
    .map((f) => ({ file: relative(SRC, f), text: readFileSync(f, 'utf8') }))
    .filter((f) => /from 'better-sqlite3'/.test(f.text));

  it('only the store and the named connections of their own import better-sqlite3', () => {
    const opening = imports.filter((f) => /^import (?!type )[^;]*from 'better-sqlite3'/m.test(f.text)).map((f) => f.file).sort();
    expect(opening).toEqual(Object.keys(OPENS_CONNECTIONS).sort());
    // Owners name statements (`Statement`), never the connection (`Database`).
    const naming = imports.filter((f) => !opening.includes(f.file) && !f.file.startsWith('store/') && /import type \{[^}]*\bDatabase\b[^}]*\} from 'better-sqlite3'/.test(f.text)).map((f) => f.file);
    expect(naming).toEqual(NAMES_CONNECTIONS);
  });
});
