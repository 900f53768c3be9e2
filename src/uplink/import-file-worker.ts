import { parentPort, workerData } from 'node:worker_threads';
import { openDetachedReader } from '../buffer/imports/detached-reader.js';
import { errorCode } from '../core/errors.js';
import { buildImportFile } from './import-file.js';
import type { BuildRequest, WorkerReply } from './import-file-builder.js';

/**
 * The import-file worker (import-file-builder.ts): builds the files of import jobs from its own
 * read-only connection to the buffer, one request at a time as the backfill sends them, and
 * answers with what the file covers. An `abort` ends the build in progress (the gateway stops).
 */
const port = parentPort;
if (!port) throw new Error('import-file-worker runs as a worker thread');
const source = openDetachedReader((workerData as { dbPath: string }).dbPath);
const aborts = new Map<number, AbortController>();

port.on('message', (m: BuildRequest | { type: 'abort'; id: number } | { type: 'close' }) => {
  if (m.type === 'close') {
    // Sent once no build runs: the connection closes and the thread ends on its own.
    source.close();
    port.close();
    return;
  }
  if (m.type === 'abort') {
    aborts.get(m.id)?.abort(new Error('import file build aborted'));
    return;
  }
  const ctrl = new AbortController();
  aborts.set(m.id, ctrl);
  buildImportFile(source.importReader(m.range, m.idField, m.rows), m.path, m.maxBytes, ctrl.signal)
    .then(
      (result): WorkerReply => ({ type: 'built', id: m.id, result }),
      (err: unknown): WorkerReply => ({ type: 'failed', id: m.id, message: err instanceof Error ? err.message : String(err), code: errorCode(err, '') }),
    )
    .then((reply) => {
      aborts.delete(m.id);
      port.postMessage(reply);
    });
});
