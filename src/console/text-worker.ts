import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Worker } from 'node:worker_threads';
import { SHARE_ENV } from 'node:worker_threads';
import { ConfigError } from '../core/errors.js';
import { siblingModule, startModuleWorker } from '../core/module-worker.js';
import { HttpError } from '../http/server.js';
import type { Catalog } from './api/build.js';
import { placeholderKey } from './config-edit.js';
import { MergeError } from './config-merge.js';
import { failureOf, jobSize, runTextJob, type JobFailure, type JobResults, type TextJob } from './text-jobs.js';

const nextTurnPause = (): Promise<void> => nextTurn().then(() => undefined);

export interface TextWorkerData {
  /** The key of the secrets' placeholders (config-edit.ts), the same for every worker of this gateway. */
  placeholderKey: Uint8Array;
}

export type TextWorkerReply = { id: number; ok: true; result: JobResults[keyof JobResults] } | { id: number; ok: true; json: Uint8Array } | { id: number; ok: false; failure: JobFailure };

/** Jobs waiting or running at once; more are refused with 429 (each may take a few seconds). */
export const MAX_QUEUED_JOBS = 4;
/** Longest a job may run; the worker is then ended and the request refused (503). */
export const JOB_TIMEOUT_MS = 60_000;
/** Heap the worker may use (a 5 MB text read into a document takes a few hundred MB). */
export const WORKER_HEAP_MB = 1_024;
/** An idle worker is ended after this long (its modules and heap are the gateway's memory too). */
const IDLE_MS = 30_000;
/**
 * Texts up to this size are worked on in the gateway's own thread, in slices with a turn of the
 * event loop between them (a hand-written configuration of 60 kB: longest block under 20 ms,
 * bench/console-config-check.ts), without waiting for a worker to start; larger ones go to the
 * worker.
 */
export const INLINE_MAX_CHARS = 64 * 1024;

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout;
}

/**
 * The console's work on configuration texts and CSV files (text-jobs.ts) on a worker thread: a
 * text of several MB read into a document, checked, merged or compared takes seconds that must not
 * be the gateway's event loop's (PLCs, the broker, /healthz and the operator page share it). The
 * worker starts with the first job, runs one job at a time, and ends after IDLE_MS without work;
 * a job that runs past JOB_TIMEOUT_MS or a worker that dies (out of memory) refuses its request
 * with a message that names the limit, and the next job starts a new worker.
 */
export class ConsoleTextWorker {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private idle: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly start: (data: TextWorkerData) => Worker = defaultStart) {}

  /** Runs a job on the worker; its refusal comes back as MergeError, ConfigError or HttpError. */
  run<K extends TextJob['job']>(job: Extract<TextJob, { job: K }>): Promise<JobResults[K]> {
    return this.send(job, false) as Promise<JobResults[K]>;
  }

  /** `run`, its answer serialized as JSON (UTF-8) on the worker: for a route that sends it to the client as it is. */
  runJson(job: TextJob): Promise<Uint8Array> {
    return this.send(job, true) as Promise<Uint8Array>;
  }

  /**
   * A route's JSON body handed to the worker as bytes, without a copy (the request is read by the
   * server, parsed and checked there): answered as JSON bytes to send as they are.
   */
  runRequest(route: Extract<TextJob, { job: 'request' }>['route'], bytes: Buffer, catalog?: Catalog | null): Promise<Uint8Array> {
    const body = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? new Uint8Array(bytes.buffer) : new Uint8Array(bytes);
    return this.send({ job: 'request', route, body, catalog }, true, [body.buffer as ArrayBuffer]) as Promise<Uint8Array>;
  }

  private send(job: TextJob, serialized: boolean, transfer: ArrayBuffer[] = []): Promise<unknown> {
    if (jobSize(job) <= INLINE_MAX_CHARS && !this.closed) return this.inline(job, serialized);
    if (this.closed) return Promise.reject(new HttpError(503, 'stopping', 'the gateway is stopping'));
    if (this.pending.size >= MAX_QUEUED_JOBS) return Promise.reject(new HttpError(429, 'busy', `the gateway is working on ${this.pending.size} other configuration texts; try again in a moment`));
    const worker = this.worker ?? this.startWorker();
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    const id = this.nextId++;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => this.fail(new HttpError(503, 'too_long', `the gateway stopped working on this text after ${JOB_TIMEOUT_MS / 1000} s; a configuration or CSV file this large is checked on the gateway (edge-gateway check --config FILE)`)), JOB_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      worker.postMessage({ id, job, serialized }, transfer);
    });
  }

  /** A small job in this thread, sliced; its refusals as the worker's would be. */
  private async inline(job: TextJob, serialized: boolean): Promise<unknown> {
    try {
      const result = await runTextJob(job, nextTurnPause);
      return serialized ? new TextEncoder().encode(JSON.stringify(result)) : result;
    } catch (err) {
      throw errorOf(failureOf(err));
    }
  }

  /** Ends the worker; jobs under way are refused. */
  async close(): Promise<void> {
    this.closed = true;
    this.fail(new HttpError(503, 'stopping', 'the gateway is stopping'));
  }

  private startWorker(): Worker {
    // The key of this thread's placeholders: a small text masked here and a large one masked there name their secrets alike.
    const w = this.start({ placeholderKey: placeholderKey() });
    w.on('message', (m: TextWorkerReply) => this.answer(m));
    w.on('error', (err) => {
      if (this.worker !== w) return;
      const oom = (err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.fail(oom ? new HttpError(413, 'too_large', `reading this text needs more than the ${WORKER_HEAP_MB} MB the console's text worker may use; check a file this large on the gateway with edge-gateway check --config FILE`) : new HttpError(500, 'worker_failed', `the console's text worker failed: ${err.message}`));
    });
    w.on('exit', () => {
      if (this.worker === w) this.fail(new HttpError(500, 'worker_failed', "the console's text worker ended"));
    });
    w.unref();
    this.worker = w;
    return w;
  }

  private answer(m: TextWorkerReply): void {
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    clearTimeout(p.timer);
    if (!m.ok) p.reject(errorOf(m.failure));
    else p.resolve('json' in m ? m.json : m.result);
    if (this.pending.size === 0 && this.worker) {
      const w = this.worker;
      this.idle = setTimeout(() => {
        if (this.worker === w && this.pending.size === 0) {
          this.worker = null;
          void w.terminate();
        }
      }, IDLE_MS);
      this.idle.unref();
    }
  }

  /** Refuses every job under way with `err` and ends the worker (the next job starts a new one). */
  private fail(err: Error): void {
    const w = this.worker;
    this.worker = null;
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(err);
      this.pending.delete(id);
    }
    if (w) void w.terminate();
  }
}

function errorOf(f: JobFailure): Error {
  if (f.kind === 'http') return new HttpError(f.status, f.code, f.message, f.field);
  if (f.kind === 'merge') return new MergeError(f.message);
  if (f.kind === 'config') return new ConfigError(f.problems);
  return new HttpError(500, 'worker_failed', f.message);
}

function defaultStart(data: TextWorkerData): Worker {
  return startModuleWorker(siblingModule(import.meta.url, 'text-worker-thread'), { workerData: data, env: SHARE_ENV, resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB } });
}
