import { createReadStream, createWriteStream } from 'node:fs';
import { unlink } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import type { Logger } from '../core/logger.js';
import { toIsoUtc } from '../core/time.js';
import { MAX_IMPORT_FILE_BYTES, MAX_JOB_ERRORS } from './contract.js';
import type { FaultState } from './faults.js';
import { ClientGone, HttpError, badRequest, errorReply, notFound, type Reply } from './http.js';
import { newId } from './ids.js';
import { checkItem, describeProblem, isProblem, type ItemScope } from './items.js';
import { ItemsScanner } from './items-scanner.js';
import { noteBody, noteBodyBytes } from './journal.js';
import type { ImportJobRecord, ImportJobView, Store } from './store.js';

/**
 * Asynchronous import (CONTRACT.md "POST /machine-data/import-jobs", §2.9, §4.7):
 * - upload: multipart/form-data with one file part `file`, streamed to a temp file (never held in
 *   memory), at most 128,000,000 bytes (413 beyond); answered 202 with the job in `accepted`;
 * - background: `accepted` for `delayMs`, then `processing` for at least `delayMs`, then
 *   `finished` (valid items stored exactly like batch items, invalid ones rejected per item) or
 *   `failed` (unreadable file, or a job_failure_rate fault). The temp file is deleted after.
 * [A] Items are validated while streaming and staged in typed arrays (20 bytes per item), then
 * committed to the store when the file has been read to its end, so a file found broken halfway
 * stores nothing.
 * [A] `errors` lists `{index, code, message}` per rejected item (at most MAX_JOB_ERRORS objects;
 * `items_rejected` counts all). A failed job: `items_accepted` 0, `items_rejected` 0,
 * `errors: [{index: null, code: "unreadable_file" | "job_failed", message}]`.
 * [A] The `file` part must be a file part (Content-Disposition with a filename, or
 * Content-Type application/octet-stream); other file parts are refused, plain text fields ignored.
 */

const MULTIPART_OVERHEAD = 1_000_000;
const COMMIT_SLICE = 100_000;

interface JobRuntime {
  record: ImportJobRecord;
  path: string | null;
  scope: ItemScope;
  fail: boolean;
  timer: NodeJS.Timeout | null;
  cancelled: boolean;
}

export interface ImportJobsDeps {
  store: Store;
  faults: FaultState;
  now: () => number;
  delayMs: number;
  tmpDir: string;
  logger: Logger;
  maxErrors?: number;
}

class Staging {
  ord: Int32Array;
  ms: Float64Array;
  val: Float64Array;
  length = 0;
  constructor(capacity: number) {
    const c = Math.max(16, capacity);
    this.ord = new Int32Array(c);
    this.ms = new Float64Array(c);
    this.val = new Float64Array(c);
  }
  push(ord: number, ms: number, val: number): void {
    if (this.length === this.ord.length) {
      const grow = <T extends Int32Array | Float64Array>(a: T, make: (n: number) => T): T => {
        const b = make(a.length * 2);
        b.set(a);
        return b;
      };
      this.ord = grow(this.ord, (n) => new Int32Array(n));
      this.ms = grow(this.ms, (n) => new Float64Array(n));
      this.val = grow(this.val, (n) => new Float64Array(n));
    }
    this.ord[this.length] = ord;
    this.ms[this.length] = ms;
    this.val[this.length] = val;
    this.length++;
  }
}

export class ImportJobs {
  private readonly jobs = new Map<string, JobRuntime>();
  private readonly maxErrors: number;

  constructor(private readonly deps: ImportJobsDeps) {
    this.maxErrors = deps.maxErrors ?? MAX_JOB_ERRORS;
  }

  /** POST /machine-data/import-jobs: receives the file, creates the job, answers 202. */
  async upload(req: IncomingMessage, scope: ItemScope): Promise<Reply> {
    const type = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data\s*;/i.test(type)) throw badRequest(`Content-Type: ${type ? `"${type}"` : 'missing'}; an import job is uploaded as multipart/form-data with one part "file"`);
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_IMPORT_FILE_BYTES + MULTIPART_OVERHEAD) {
      throw new HttpError(errorReply(413, 'payload_too_large', `upload of ${declared.toLocaleString('en-US')} bytes is over the file limit of ${MAX_IMPORT_FILE_BYTES.toLocaleString('en-US')} bytes`, { close: true }));
    }
    let bb: busboy.Busboy;
    try {
      // busboy's fileSize fires its 'limit' when the file reaches that many bytes, but a file of
      // exactly MAX_IMPORT_FILE_BYTES is allowed (CONTRACT.md "at most 128 MB"): one byte more.
      bb = busboy({ headers: req.headers, limits: { fileSize: MAX_IMPORT_FILE_BYTES + 1, files: 1, fieldSize: 1024, parts: 20 } });
    } catch (err) {
      throw badRequest(`Content-Type: ${(err as Error).message}`);
    }

    const jobId = newId('job');
    const path = join(this.deps.tmpDir, `${jobId}.json`);
    const counter = new ItemsScanner({ parse: false });
    let problem: HttpError | null = null;
    let gotFile = false;
    let truncated = false;
    let fileBytes = 0;
    // Set from busboy callbacks; an object so TypeScript does not narrow them to null.
    const part: { stream: Readable | null; writing: Promise<void> | null } = { stream: null, writing: null };

    const parsed = new Promise<void>((resolve, reject) => {
      bb.on('file', (name, stream) => {
        if (name !== 'file' || gotFile) {
          problem ??= badRequest(name === 'file' ? 'file: only one file part is allowed' : `unknown file part "${name}"; the file goes in the part "file"`);
          stream.resume();
          return;
        }
        gotFile = true;
        part.stream = stream;
        stream.on('limit', () => {
          truncated = true;
        });
        const count = new Transform({
          transform(chunk: Buffer, _enc, cb) {
            fileBytes += chunk.length;
            counter.push(chunk);
            cb(null, chunk);
          },
        });
        part.writing = pipeline(stream, count, createWriteStream(path));
        part.writing.catch(() => undefined);
      });
      bb.on('field', (name) => {
        if (name === 'file') problem ??= badRequest('file: must be a file part (Content-Disposition with a filename, or Content-Type application/octet-stream)');
      });
      bb.on('filesLimit', () => {
        problem ??= badRequest('file: only one file part is allowed');
      });
      bb.on('partsLimit', () => {
        problem ??= badRequest('too many parts; send one part "file"');
      });
      bb.on('error', (err: Error) => reject(badRequest(`malformed multipart body: ${err.message}`)));
      bb.on('close', () => resolve());
      req.on('close', () => {
        if (!req.complete) reject(new ClientGone());
      });
    });
    req.pipe(bb);

    try {
      await parsed;
      if (part.writing) await part.writing;
    } catch (err) {
      // Client gone or broken multipart: stop writing the temp file before deleting it.
      req.unpipe(bb);
      part.stream?.destroy();
      await part.writing?.catch(() => undefined);
      await unlink(path).catch(() => undefined);
      if (err instanceof HttpError || err instanceof ClientGone) throw err;
      throw new HttpError(errorReply(500, 'internal_server_error', `cannot store the upload: ${(err as Error).message}`));
    }
    noteBodyBytes(req, Number.isFinite(declared) ? declared : fileBytes);
    noteBody(req, { file_bytes: fileBytes });
    if (problem || truncated || !gotFile) {
      await unlink(path).catch(() => undefined);
      if (problem) throw problem;
      if (truncated) throw new HttpError(errorReply(413, 'payload_too_large', `file is over the limit of ${MAX_IMPORT_FILE_BYTES.toLocaleString('en-US')} bytes`));
      throw badRequest('file: required part is missing');
    }
    counter.end();
    noteBody(req, { items_received: counter.count, job_id: jobId });

    const view: ImportJobView = {
      job_id: jobId,
      status: 'accepted',
      items_received: counter.count,
      created_at: toIsoUtc(this.deps.now()),
      items_accepted: null,
      items_rejected: null,
      errors: null,
      finished_at: null,
    };
    const record: ImportJobRecord = { organisationId: scope.organisationId, view };
    const job: JobRuntime = { record, path, scope, fail: this.deps.faults.jobShouldFail(), timer: null, cancelled: false };
    this.deps.store.jobs.set(jobId, record);
    this.jobs.set(jobId, job);
    job.timer = setTimeout(() => void this.run(job), this.deps.delayMs);
    return { status: 202, body: { ...view } };
  }

  /** GET [/v1]/machine-data/import-jobs/{job_id} (§4.7); another organisation's job is a 404 [A]. */
  get(jobId: string, organisationId: string): Reply {
    const record = this.deps.store.jobs.get(jobId);
    if (!record || record.organisationId !== organisationId) throw notFound(`import job "${jobId}" not found`);
    return { status: 200, body: { ...record.view } };
  }

  private wait(job: JobRuntime, ms: number): Promise<void> {
    return new Promise((resolve) => {
      job.timer = setTimeout(resolve, Math.max(0, ms));
    });
  }

  private async run(job: JobRuntime): Promise<void> {
    const view = job.record.view;
    if (job.cancelled) return;
    view.status = 'processing';
    const started = performance.now();
    let outcome: { staged: Staging; rejected: number; errors: ImportJobView['errors'] } | { failure: string };
    try {
      outcome = await this.read(job);
    } catch (err) {
      outcome = { failure: `cannot read the file: ${(err as Error).message}` };
    }
    if (job.cancelled) return;
    await this.wait(job, this.deps.delayMs - (performance.now() - started));
    if (job.cancelled) return;

    if ('failure' in outcome || job.fail) {
      const failure = 'failure' in outcome ? { index: null, code: 'unreadable_file', message: outcome.failure } : { index: null, code: 'job_failed', message: 'the job failed (injected fault: job_failure_rate)' };
      Object.assign(view, { status: 'failed', items_accepted: 0, items_rejected: 0, errors: [failure], finished_at: toIsoUtc(this.deps.now()) });
    } else {
      const { staged } = outcome;
      const list = job.scope.fixture.variableList;
      const store = this.deps.store;
      for (let i = 0; i < staged.length; i++) {
        store.put(list[staged.ord[i]].id, staged.ms[i], staged.val[i]);
        if (i % COMMIT_SLICE === COMMIT_SLICE - 1) {
          await new Promise<void>((r) => setImmediate(r));
          if (job.cancelled) return;
        }
      }
      Object.assign(view, { status: 'finished', items_accepted: staged.length, items_rejected: outcome.rejected, errors: outcome.errors, finished_at: toIsoUtc(this.deps.now()) });
    }
    this.deps.logger.debug({ job_id: view.job_id, status: view.status, items_accepted: view.items_accepted, items_rejected: view.items_rejected }, 'import job ended');
    this.jobs.delete(view.job_id);
    await this.discard(job);
  }

  /** Streams the file through the scanner, validating and staging every item. */
  private async read(job: JobRuntime): Promise<{ staged: Staging; rejected: number; errors: NonNullable<ImportJobView['errors']> } | { failure: string }> {
    const staged = new Staging(job.record.view.items_received);
    const errors: NonNullable<ImportJobView['errors']> = [];
    let rejected = 0;
    const scanner = new ItemsScanner({
      onItem: (item, index) => {
        const r = checkItem(item, job.scope);
        if (isProblem(r)) {
          rejected++;
          if (errors.length < this.maxErrors) errors.push({ index, code: r.code, message: describeProblem(index, r) });
        } else staged.push(r.variable.ordinal, r.epochMs, r.value);
      },
    });
    const stream = createReadStream(job.path!, { highWaterMark: 1 << 20 });
    try {
      for await (const chunk of stream) {
        scanner.push(chunk as Buffer);
        if (scanner.failed || job.cancelled) break;
      }
    } finally {
      stream.destroy();
    }
    scanner.end();
    if (scanner.error !== null) return { failure: `unreadable file: ${scanner.error}` };
    return { staged, rejected, errors };
  }

  private async discard(job: JobRuntime): Promise<void> {
    if (job.timer) clearTimeout(job.timer);
    job.timer = null;
    const path = job.path;
    job.path = null;
    if (path) await unlink(path).catch(() => undefined);
  }

  /** Stops every job (reset or close) and deletes their files. */
  async cancelAll(): Promise<void> {
    const all = [...this.jobs.values()];
    this.jobs.clear();
    for (const job of all) job.cancelled = true;
    await Promise.all(all.map((job) => this.discard(job)));
  }
}
