import type { OwnerSchema } from '../store/migrations.js';

/**
 * The sample buffer's tables in the gateway's file (src/store/README.md: the store runs the
 * steps; an owner never edits a released step). The samples owner is the store's remainder: its
 * bytes are what the other owners leave of the file's pages in use.
 */
export const SAMPLES_SCHEMA: OwnerSchema = {
  owner: 'samples',
  tables: ['meta', 'variables', 'samples', 'chunks', 'import_jobs', 'sync_only_ranges', 'last_committed'],
  steps: [
    {
      // Released with the first version: the buffer's tables (and set_aside, which the set-aside
      // owner keeps: set-aside.ts).
      version: 1,
      up: `
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

      -- Dictionary of machine variable ids, so a sample row stores a small integer.
      CREATE TABLE variables (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);

      -- Unsent samples in arrival order. seq is assigned by the buffer from meta.next_seq and is
      -- never reused (B3 of README.md).
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
      // Buffer v2 (chunks/store.ts, chunks/sealer.ts): sealed per-variable chunks beside the live
      // rows. A v1 file's backlog is sealed in place afterwards, a seq range at a time (sealed_upto
      // starts at 0).
      version: 3,
      up: `
      -- Sealed samples of one variable: seqs seq_from .. seq_from + n - 1 (B3 of README.md),
      -- timestamps and values encoded by chunks/codec.ts.
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
      // Chunk format 2 (chunks/codec.ts: the grid layout of quantized values). No table changes,
      // and format-1 chunks stay as they are (this version reads both); the step exists so that an
      // earlier version, which cannot read format-2 chunks, refuses the file at open
      // (BUFFER_SCHEMA_NEWER) instead of failing on a chunk later.
      version: 5,
      up: `INSERT OR IGNORE INTO meta (key, value) VALUES ('chunk_formats', '1,2');`,
    },
    {
      // Chunk format 3 (chunks/codec-v3.ts: range-coded residuals), for the same reason as step 5:
      // an earlier version cannot read format-3 chunks, so it refuses the file at open
      // (BUFFER_SCHEMA_NEWER) instead of failing on the first sealed sample it delivers.
      version: 7,
      up: `INSERT INTO meta (key, value) VALUES ('chunk_formats', '1,2,3') ON CONFLICT(key) DO UPDATE SET value = excluded.value;`,
    },
  ],
};
