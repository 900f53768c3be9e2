import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { SeqRange } from '../buffer/types.js';
import type { BackfillBuffer } from '../buffer/views.js';
import { describeError, GatewayError } from '../core/errors.js';
import { siblingModule, startModuleWorker } from '../core/module-worker.js';
import { buildImportFile, type BuildResult } from './import-file.js';

/** What the backfill asks the worker for (import-file-worker.ts). */
export interface BuildRequest {
  type: 'build';
  id: number;
  range: SeqRange;
  idField: string;
  path: string;
  maxBytes: number;
  rows?: number;
}

export type WorkerReply = { type: 'built'; id: number; result: BuildResult } | { type: 'failed'; id: number; message: string; code: string };

/**
 * Builds import-job files (import-file.ts) on a worker thread with its own read-only connection to
 * the buffer (buffer/imports/detached-reader.ts), so serializing up to 128 MB of JSON does not take
 * the main thread's turns from ingest, the sync path and the console: at 100,000 variables it was
 * a fifth of the main thread (bench/README.md, "MQTT at 30,000 and 100,000 variables").
 *
 * The worker starts with the first build and is kept for the next (a job every few seconds under a
 * large backlog). A buffer without a file (`:memory:`), or a worker that cannot start, builds on
 * the main thread as before. A worker that dies fails its build (the backfill puts the range back
 * in the queue) and a new one starts with the next.
 */
export class ImportFileBuilder {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: BuildResult) => void; reject: (e: Error) => void }>();
  private inline: boolean;

  constructor(private readonly o: { buffer: Pick<BackfillBuffer, 'importReader' | 'filePath'>; logger: Logger }) {
    this.inline = o.buffer.filePath === null;
  }

  /** True while builds run on a worker thread (false: on the main thread). */
  get onWorker(): boolean {
    return !this.inline;
  }

  build(range: SeqRange, idField: string, path: string, maxBytes: number, signal?: AbortSignal): Promise<BuildResult> {
    if (this.inline) return buildImportFile(this.o.buffer.importReader(range, idField), path, maxBytes, signal);
    const worker = this.worker ?? this.start();
    if (!worker) return buildImportFile(this.o.buffer.importReader(range, idField), path, maxBytes, signal);
    const id = this.nextId++;
    return new Promise<BuildResult>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      const onAbort = () => worker.postMessage({ type: 'abort', id });
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => signal?.removeEventListener('abort', onAbort);
      this.pending.set(id, {
        resolve: (r) => (done(), resolve(r)),
        reject: (e) => (done(), reject(e)),
      });
      worker.ref();
      worker.postMessage({ type: 'build', id, range, idField, path, maxBytes } satisfies BuildRequest);
    });
  }

  /** Ends the worker (after the backfill's builds have ended or been aborted). */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (!w) return;
    this.failAll(new Error('import file builder closed'));
    const exited = new Promise<void>((r) => w.once('exit', () => r()));
    w.postMessage({ type: 'close' });
    // A worker stuck in a long read still ends: terminate after a grace period.
    const timer = setTimeout(() => void w.terminate(), 5_000);
    await exited;
    clearTimeout(timer);
  }

  private start(): Worker | null {
    const dbPath = this.o.buffer.filePath;
    if (dbPath === null) return null;
    try {
      const w = startModuleWorker(siblingModule(import.meta.url, 'import-file-worker'), { workerData: { dbPath } });
      w.on('message', (m: WorkerReply) => {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (this.pending.size === 0) w.unref();
        if (m.type === 'built') p.resolve(m.result);
        else p.reject(new GatewayError(m.code || 'IMPORT_FILE_BUILD_FAILED', m.message));
      });
      w.on('error', (err) => {
        this.o.logger.warn({ err: describeError(err) }, 'the import-file worker failed; its build returns to the queue and the next build starts a new worker');
        this.failAll(err);
      });
      w.on('exit', () => {
        if (this.worker === w) this.worker = null;
        this.failAll(new Error('the import-file worker ended'));
      });
      // An idle worker keeps nothing alive (the gateway's stop closes it); a build in progress does.
      w.unref();
      this.worker = w;
      return w;
    } catch (err) {
      this.inline = true;
      this.o.logger.warn({ err: describeError(err) }, 'the import-file worker cannot start; import files are built on the main thread');
      return null;
    }
  }

  private failAll(err: Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(err);
  }
}
