import type { Database } from 'better-sqlite3';
import { GatewayError } from '../../core/errors.js';
import { GAPS_MIGRATION } from '../gaps.js';
import { TREND_MIGRATION } from '../trend.js';

/**
 * Schema of the buffer file, as ordered migrations keyed by `PRAGMA user_version`. A migration is
 * never edited once released; a change is a new step at the end.
 */
const MIGRATIONS: Array<{ version: number; up: string }> = [
  {
    version: 1,
    up: `
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

      -- Dictionary of machine variable ids, so a sample row stores a small integer.
      CREATE TABLE variables (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);

      -- Unsent samples in arrival order. seq is assigned by the buffer from meta.next_seq and is
      -- never reused (see the invariants in sample-buffer.ts).
      CREATE TABLE samples (
        seq   INTEGER PRIMARY KEY,
        var   INTEGER NOT NULL,
        ts    INTEGER NOT NULL,
        value REAL    NOT NULL
      );

      -- Samples the service refused (400 on a lone item, or an import job's rejected item), kept
      -- for the operator with the service's message (CONTRACT.md error table, "invalid payload").
      CREATE TABLE set_aside (
        id         INTEGER PRIMARY KEY,
        variable   TEXT,
        ts         INTEGER,
        value      REAL,
        path       TEXT NOT NULL,       -- 'sync' or 'import'
        reason     TEXT NOT NULL,       -- the service's message
        detail     TEXT,                -- JSON as it came (import job error objects), or null
        job_id     TEXT,
        request_id TEXT,
        created_at INTEGER NOT NULL
      );

      -- Import-job ledger: one row per job, covering the seq range [seq_from, seq_to] of samples.
      CREATE TABLE import_jobs (
        id          INTEGER PRIMARY KEY,
        seq_from    INTEGER NOT NULL,
        seq_to      INTEGER NOT NULL,
        state       TEXT NOT NULL,      -- building | built | uploading | submitted
        item_count  INTEGER,
        file_path   TEXT,
        file_bytes  INTEGER,
        job_id      TEXT,
        attempts    INTEGER NOT NULL DEFAULT 0,
        last_error  TEXT,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
      );

      -- Ranges that failed as import jobs twice: only the sync path (with poison isolation) may
      -- send them.
      CREATE TABLE sync_only_ranges (seq_from INTEGER NOT NULL, seq_to INTEGER NOT NULL, PRIMARY KEY (seq_from)) WITHOUT ROWID;
    `,
  },
  {
    // Operator annotations (src/annotations/store.ts): the outbox and the open downtimes.
    version: 2,
    up: `
      -- One row per annotation, in creation order (seq), which is also the delivery order. The
      -- external_id is assigned at creation and sent with every attempt, so a retry after a crash
      -- or a timeout can only meet a 409 (= already delivered, interface §4.1).
      CREATE TABLE annotation_outbox (
        seq               INTEGER PRIMARY KEY,
        external_id       TEXT    NOT NULL UNIQUE,
        type              TEXT    NOT NULL,           -- instant | range
        occurred_at       INTEGER,                    -- epoch ms (instant)
        started_at        INTEGER,                    -- epoch ms (range)
        ended_at          INTEGER,                    -- epoch ms (range)
        text              TEXT    NOT NULL,
        machine_variables TEXT    NOT NULL,           -- JSON list of ids
        site              TEXT    NOT NULL,           -- JSON {"id"} or {"external_id"}
        machine           TEXT,                       -- configured machine key, or null
        origin            TEXT    NOT NULL,           -- api | hmi | mqtt | cli | detector
        state             TEXT    NOT NULL,           -- queued | delivered | refused
        attempts          INTEGER NOT NULL DEFAULT 0,
        last_error        TEXT,                       -- last transient failure
        refusal           TEXT,                       -- the service's message (400)
        service_id        TEXT,                       -- mda_... from the 201
        request_id        TEXT,
        created_at        INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        delivered_at      INTEGER
      );
      CREATE INDEX annotation_outbox_state ON annotation_outbox (state, seq);

      -- Downtimes started and not yet stopped (manual), and detector episodes in progress, so both
      -- survive a restart of the gateway.
      CREATE TABLE downtimes (
        key               TEXT    PRIMARY KEY,        -- manual:<machine> | rule:<fingerprint>
        kind              TEXT    NOT NULL,           -- manual | detector
        machine           TEXT    NOT NULL,
        external_id       TEXT    NOT NULL,
        started_at        INTEGER NOT NULL,           -- epoch ms
        reason            TEXT,
        text              TEXT,
        machine_variables TEXT,                       -- JSON list of ids (detector), or null
        origin            TEXT    NOT NULL,
        created_at        INTEGER NOT NULL
      ) WITHOUT ROWID;
    `,
  },
  {
    // Buffer v2 (chunk-store.ts, sealer.ts): sealed per-variable chunks beside the live rows. A v1
    // file's backlog is sealed in place afterwards, a seq range at a time (sealed_upto starts at 0).
    version: 3,
    up: `
      -- Sealed samples of one variable: seqs seq_from .. seq_from + n - 1 (chunk-store.ts S1),
      -- timestamps and values encoded by chunk-codec.ts.
      CREATE TABLE chunks (
        seq_from INTEGER PRIMARY KEY,
        var      INTEGER NOT NULL,
        n        INTEGER NOT NULL,
        ts_min   INTEGER NOT NULL,
        ts_max   INTEGER NOT NULL,
        data     BLOB    NOT NULL
      );
      INSERT OR IGNORE INTO meta (key, value) VALUES ('sealed_upto', '0');
    `,
  },
  {
    // The gap ledger and the per-variable last committed timestamp (issue 14: src/buffer/gaps.ts,
    // src/buffer/last-committed.ts).
    version: 4,
    up: GAPS_MIGRATION,
  },
  {
    // Chunk format 2 (chunks/codec.ts: the grid layout of quantized values, issue 22 §3). No table
    // changes, and format-1 chunks stay as they are (this version reads both); the step exists so
    // that an earlier version, which cannot read format-2 chunks, refuses the file at open
    // (BUFFER_SCHEMA_NEWER) instead of failing on a chunk later.
    version: 5,
    up: `INSERT OR IGNORE INTO meta (key, value) VALUES ('chunk_formats', '1,2');`,
  },
  {
    // The console's recent trend kept across restarts (issue 24 §4, src/buffer/trend.ts): no
    // samples, only min/max/count buckets of the last minutes, pruned on the maintenance schedule.
    version: 6,
    up: TREND_MIGRATION,
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/** Registers an extra migration from another component (the annotation outbox). */
export function migrationsFor(extra: Array<{ version: number; up: string }> = []): Array<{ version: number; up: string }> {
  return [...MIGRATIONS, ...extra].sort((a, b) => a.version - b.version);
}

export function migrate(db: Database, extra: Array<{ version: number; up: string }> = []): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  const known = Math.max(...migrationsFor(extra).map((m) => m.version));
  if (current > known) {
    // A downgrade: this version cannot know what the newer one stores, and guessing could lose rows.
    throw new GatewayError(
      'BUFFER_SCHEMA_NEWER',
      `the buffer file was written by a newer edge-gateway (buffer schema ${current}; this version knows up to ${known}). Run the newer version, which still delivers what the file holds; downgrading needs a fresh buffer.path`,
    );
  }
  for (const m of migrationsFor(extra)) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.up);
      db.pragma(`user_version = ${m.version}`);
    })();
  }
}
