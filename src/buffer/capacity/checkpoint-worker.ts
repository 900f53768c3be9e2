import BetterSqlite3 from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import { errorCode } from '../../core/errors.js';
import type { CheckpointReply, CheckpointRequest, CheckpointWorkerData } from './checkpointer.js';

/**
 * The WAL checkpoint worker (checkpointer.ts): a connection of its own to the buffer file that
 * runs `PRAGMA wal_checkpoint(PASSIVE)` when the main thread asks, one at a time, and answers with
 * SQLite's result. It never opens a transaction, so it never holds a lock between requests.
 *
 * - Read-write: copying WAL frames back writes the database file (a read-only connection cannot
 *   checkpoint).
 * - The main connection's `synchronous` setting: the checkpoint syncs the WAL before it copies and
 *   the database file after, with this connection's flags, so it is exactly as durable as the
 *   checkpoint the main connection ran before (src/store/file/database.ts).
 * - busy_timeout 0: it never waits for anything. A PASSIVE checkpoint never calls the busy handler
 *   anyway; when the main connection holds the checkpoint lock (a TRUNCATE) it answers busy = 1.
 */
const port = parentPort;
if (!port) throw new Error('checkpoint-worker runs as a worker thread');
const data = workerData as CheckpointWorkerData;
const db = new BetterSqlite3(data.path, { fileMustExist: true, timeout: 0 });
db.pragma(`synchronous = ${Math.floor(data.synchronous)}`);
// This connection never writes a transaction; should it ever, it must not checkpoint inside it.
db.pragma('wal_autocheckpoint = 0');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
/**
 * Passes per request at most. SQLite restarts the WAL from its beginning (and journal_size_limit
 * cuts the file back, B9) only at a commit that finds it wholly copied back. On the main thread no
 * commit could land during a checkpoint; here the main connection goes on committing, and a pass
 * that overlaps a commit leaves that commit's frames behind, so the WAL keeps growing until the
 * next TRUNCATE (a writer committing 240 kB every 20 ms: 214 MB in 15 s with one pass; with up
 * to four the WAL restarted in 11 of 14 seconds). Each further pass copies only what landed during
 * the previous one; one that finds nothing to copy syncs nothing and costs microseconds.
 */
const MAX_PASSES = 4;

type Result = { busy: number; log: number; checkpointed: number };
const pass = (): Result => checkpoint.get() as Result;

port.on('message', (m: CheckpointRequest) => {
  if (m.type === 'close') {
    // Messages are handled in order: a checkpoint asked for before this one has finished.
    db.close();
    port.close();
    return;
  }
  const started = performance.now();
  let reply: CheckpointReply;
  try {
    let r = pass();
    let passes = 1;
    while (r.busy === 0 && passes < MAX_PASSES) {
      const next = pass();
      passes++;
      // `log` is the WAL's last frame when a pass began: the same again means nothing was
      // committed during the previous pass (smaller: the main connection restarted the WAL).
      const landed = next.log > r.log;
      r = next;
      if (!landed) break;
    }
    reply = { type: 'checkpointed', busy: r.busy, log: r.log, checkpointed: r.checkpointed, passes, ms: performance.now() - started };
  } catch (err) {
    reply = { type: 'failed', message: err instanceof Error ? err.message : String(err), code: errorCode(err, '') };
  }
  port.postMessage(reply);
});
