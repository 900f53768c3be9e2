import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import { describeError } from '../../core/errors.js';
import { siblingModule, startModuleWorker } from '../../core/module-worker.js';
import type { FileAccess } from '../../store/store.js';

/** What the checkpoint worker (checkpoint-worker.ts) starts with. */
export interface CheckpointWorkerData {
  /** The buffer file. */
  path: string;
  /** The main connection's `PRAGMA synchronous` (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA). */
  synchronous: number;
}

export type CheckpointRequest = { type: 'checkpoint' } | { type: 'close' };

export type CheckpointReply = { type: 'checkpointed'; busy: number; log: number; checkpointed: number; passes: number; ms: number } | { type: 'failed'; message: string; code: string };

/** A worker still running its checkpoint when the buffer closes is ended after this long. */
const CLOSE_GRACE_MS = 5_000;

export interface CheckpointerOptions {
  logger: Logger;
  /** Starts the worker (tests give one that fails); by default checkpoint-worker.ts beside this module. */
  startWorker?: (data: CheckpointWorkerData) => Worker;
  /**
   * Checkpoints run on the main thread while each takes less than this (ms); the first slower one
   * starts the worker, which then takes them all. Unset: the worker from the first checkpoint. A
   * worker thread is its own V8 instance (~11 MB of RSS with better-sqlite3): a small plant, whose
   * checkpoints copy a few pages, should not carry one (bench/small-plant.ts).
   */
  inlineBelowMs?: number;
}

/**
 * The buffer's regular PASSIVE checkpoint (capacity/disk.ts, B9) off the main thread.
 *
 * At 100,000 variables/s a PASSIVE checkpoint (copying a second of WAL back into the file and
 * syncing it) held the gateway's event loop for 87–114 ms, every second (CPU profile, issue 25). It now runs on
 * a worker thread with a connection of its own to the same file (checkpoint-worker.ts); the main
 * thread only posts a message. The buffer is in WAL mode with normal locking (the one-gateway lock
 * is a file of its own, src/store/file/owner-lock.ts), so the worker's checkpoint runs beside the main
 * connection's commits, as SQLite's checkpoints are made to.
 *
 * Durability does not change (src/buffer/README.md B1, B9): with synchronous=FULL every commit
 * has synced its WAL frames before its acknowledgement, and a checkpoint only copies committed
 * frames into the database file; it syncs with the main connection's setting (with NORMAL it syncs
 * the WAL before copying, as the main connection's checkpoint did). One cut short by a crash or a
 * power cut is redone from the WAL at the next open: SQLite never reuses WAL frames the file does
 * not hold yet.
 *
 * - At most one checkpoint is in flight: asked while one runs, `request()` skips (the next falls
 *   due a second later).
 * - The TRUNCATE checkpoints stay on the main connection (capacity/wal.ts, DiskReturn.truncateWal,
 *   the buffer's close). They wait while `running` (a TRUNCATE that met the worker's checkpoint
 *   lock would answer busy and be put off as if a reader held the WAL); `close()` ends the worker
 *   before the buffer's last TRUNCATE, so the file is left with an empty WAL as before.
 * - The worker starts with the first checkpoint (a buffer that never writes starts none). A buffer
 *   without a file (`:memory:`), a worker that cannot start, or one that dies: the checkpoint runs
 *   on the main thread as before, said once in the log.
 */
export class Checkpointer {
  private worker: Worker | null = null;
  private inline: boolean;
  private inFlight = false;
  private closing = false;
  private warned = false;

  constructor(
    private readonly db: FileAccess,
    private readonly o: CheckpointerOptions,
  ) {
    this.inline = db.memory;
    this.light = o.inlineBelowMs !== undefined;
  }

  /** True while a checkpoint asked of the worker has not answered. */
  get running(): boolean {
    return this.inFlight;
  }

  /** True while checkpoints run on the worker (false: on the main thread). */
  get onWorker(): boolean {
    return !this.inline && !this.light;
  }

  /** Checkpoints cheap enough for the main thread so far (`inlineBelowMs`): no worker yet. */
  private light: boolean;

  /** One PASSIVE checkpoint, on the worker when it runs. False when skipped: the previous one has not answered, or the buffer closes. */
  request(): boolean {
    if (this.inFlight || this.closing) return false;
    if (this.light && !this.inline) {
      const t = performance.now();
      this.inThread();
      if (performance.now() - t >= this.o.inlineBelowMs!) {
        this.light = false;
        this.o.logger.debug({ ms: Math.round(performance.now() - t) }, 'a WAL checkpoint took long on the main thread: checkpoints move to a worker thread');
      }
      return true;
    }
    const worker = this.inline ? null : (this.worker ?? this.start());
    if (!worker) {
      this.inThread();
      return true;
    }
    this.inFlight = true;
    worker.postMessage({ type: 'checkpoint' } satisfies CheckpointRequest);
    return true;
  }

  /**
   * Ends the worker: a checkpoint it runs finishes first (messages are handled in order), then it
   * closes its connection; one still running after CLOSE_GRACE_MS is terminated. Resolves once the
   * thread has exited, so a TRUNCATE after it never meets the worker's checkpoint. The request to
   * close is sent before this returns its promise.
   */
  close(): Promise<void> {
    this.closing = true;
    const w = this.worker;
    this.worker = null;
    if (!w) return Promise.resolve();
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    w.postMessage({ type: 'close' } satisfies CheckpointRequest);
    const timer = setTimeout(() => void w.terminate(), CLOSE_GRACE_MS);
    return exited.finally(() => {
      clearTimeout(timer);
      this.inFlight = false;
    });
  }

  private start(): Worker | null {
    try {
      const data: CheckpointWorkerData = { path: this.db.name, synchronous: this.db.pragma('synchronous', { simple: true }) as number };
      const w = (this.o.startWorker ?? defaultStart)(data);
      w.on('message', (m: CheckpointReply) => {
        this.inFlight = false;
        if (m.type === 'failed') this.o.logger.warn({ err: m.code ? `${m.code}: ${m.message}` : m.message }, 'WAL checkpoint failed');
        else this.o.logger.debug({ event: 'buffer_checkpoint', ms: Math.round(m.ms), log: m.log, checkpointed: m.checkpointed, busy: m.busy, passes: m.passes }, 'WAL checkpoint on the worker thread');
      });
      w.on('error', (err) => this.fallBack(w, err));
      w.on('exit', (code) => this.fallBack(w, new Error(`the checkpoint worker ended (exit code ${code})`)));
      // The worker never keeps a process alive (a tool that forgot to close the buffer still exits).
      w.unref();
      this.worker = w;
      return w;
    } catch (err) {
      this.fallBack(null, err);
      return null;
    }
  }

  /** The worker could not start or died: checkpoints run on the main thread from now on. */
  private fallBack(w: Worker | null, err: unknown): void {
    if (this.closing) return;
    if (w && this.worker === w) this.worker = null;
    this.inline = true;
    this.inFlight = false;
    if (w) void w.terminate();
    if (this.warned) return;
    this.warned = true;
    this.o.logger.warn({ err: describeError(err) }, 'the WAL checkpoint worker failed; checkpoints run on the main thread from now on');
  }

  /** The checkpoint as it ran before the worker: a PASSIVE one never waits for a reader. */
  private inThread(): void {
    try {
      this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch (err) {
      this.o.logger.warn({ err: describeError(err) }, 'WAL checkpoint failed');
    }
  }
}

function defaultStart(data: CheckpointWorkerData): Worker {
  return startModuleWorker(siblingModule(import.meta.url, 'checkpoint-worker'), { workerData: data });
}
