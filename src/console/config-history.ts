import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { ConfigVersion } from './api/config.js';

/**
 * Previous versions of the configuration file (README "Configuration history"): each text the file
 * had when the console's Apply or a rollback wrote it, or when the gateway reloaded it after an
 * edit elsewhere, with when, who (the writer's user agent) and what the reload changed. Kept in
 * `<data_dir>/config-history/`: one file per version (mode 0600: a version holds the secrets written
 * in the file, as the file does) and an index, each written to a temporary name, fsynced and
 * renamed, so a power cut leaves the history as it was before or after a version, never half.
 * Diffs are made when shown (text-jobs.ts `diff`), from the texts.
 *
 * Bounded: at most MAX_VERSIONS versions and MAX_HISTORY_BYTES of texts; the oldest go first (the
 * newest is always kept).
 */

export const MAX_VERSIONS = 50;
export const MAX_HISTORY_BYTES = 64 * 1024 * 1024;

/** A version kept: the shared model of the console's API (api/config.ts ConfigVersion). */
export type HistoryEntry = ConfigVersion;

interface Index {
  next: number;
  entries: HistoryEntry[];
}

export function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

export class ConfigHistory {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = join(dataDir, 'config-history');
  }

  /** Every version kept, the newest last. */
  list(): HistoryEntry[] {
    return this.index().entries;
  }

  latest(): HistoryEntry | null {
    return this.index().entries.at(-1) ?? null;
  }

  get(version: number): HistoryEntry | null {
    return this.index().entries.find((e) => e.version === version) ?? null;
  }

  /** A version's text, or null when it is not kept (any more). */
  text(version: number): string | null {
    if (!this.get(version)) return null;
    try {
      return readFileSync(this.textPath(version), 'utf8');
    } catch {
      return null;
    }
  }

  /** The text before `version` among those kept (the diff's left side), or null. */
  previous(version: number): HistoryEntry | null {
    const entries = this.index().entries;
    const at = entries.findIndex((e) => e.version === version);
    return at > 0 ? entries[at - 1] : null;
  }

  /**
   * Keeps `text` as the newest version, unless it is already the newest (the same digest): then
   * that one is answered, its `changed` filled in when given. Returns the entry.
   */
  record(text: string, o: { by: string; userAgent?: string | null; changed?: string[] | null; note?: string | null; at?: number }): HistoryEntry {
    const index = this.index();
    const digest = digestOf(text);
    const last = index.entries.at(-1);
    if (last && last.digest === digest) {
      if (o.changed && !last.changed) {
        last.changed = o.changed;
        this.save(index);
      }
      return last;
    }
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const entry: HistoryEntry = {
      version: index.next,
      at: new Date(o.at ?? Date.now()).toISOString(),
      by: o.by,
      user_agent: o.userAgent ? o.userAgent.slice(0, 256) : null,
      digest,
      bytes: Buffer.byteLength(text),
      changed: o.changed ?? null,
      note: o.note ?? null,
    };
    writeDurably(this.textPath(entry.version), text);
    index.entries.push(entry);
    index.next += 1;
    const dropped = prune(index.entries);
    this.save(index);
    for (const e of dropped) rmSync(this.textPath(e.version), { force: true });
    return entry;
  }

  /** Fills in what the reload of a version changed. */
  noteChanged(version: number, changed: string[]): void {
    const index = this.index();
    const e = index.entries.find((x) => x.version === version);
    if (!e) return;
    e.changed = changed;
    this.save(index);
  }

  private textPath(version: number): string {
    return join(this.dir, `v${String(version).padStart(6, '0')}.yaml`);
  }

  private index(): Index {
    try {
      const parsed = JSON.parse(readFileSync(join(this.dir, 'index.json'), 'utf8')) as Index;
      if (Array.isArray(parsed.entries) && Number.isInteger(parsed.next)) return parsed;
    } catch {
      /* no history yet, or an index that cannot be read: start one */
    }
    return { next: 1, entries: [] };
  }

  private save(index: Index): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    writeDurably(join(this.dir, 'index.json'), `${JSON.stringify(index, null, 1)}\n`);
  }
}

/** The oldest entries beyond MAX_VERSIONS or MAX_HISTORY_BYTES, removed from `entries` (the newest stays). */
function prune(entries: HistoryEntry[]): HistoryEntry[] {
  const dropped: HistoryEntry[] = [];
  let bytes = entries.reduce((n, e) => n + e.bytes, 0);
  while (entries.length > 1 && (entries.length > MAX_VERSIONS || bytes > MAX_HISTORY_BYTES)) {
    const e = entries.shift()!;
    bytes -= e.bytes;
    dropped.push(e);
  }
  return dropped;
}

/** Written beside `path`, fsynced, renamed over it: a power cut leaves the old file or the new one. */
function writeDurably(path: string, text: string): void {
  const tmp = `${path}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dir = openSync(join(path, '..'), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
