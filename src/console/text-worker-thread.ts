import { parentPort, workerData } from 'node:worker_threads';
import { usePlaceholderKey } from './config-edit.js';
import { failureOf, runTextJob, type TextJob } from './text-jobs.js';
import type { TextWorkerData, TextWorkerReply } from './text-worker.js';

/**
 * The console's text worker (text-worker.ts): runs one job at a time, in the order asked, and
 * answers each with its result or its refusal as data.
 */
const port = parentPort;
if (!port) throw new Error('text-worker-thread runs as a worker thread');
usePlaceholderKey((workerData as TextWorkerData).placeholderKey);

let queue: Promise<void> = Promise.resolve();
port.on('message', (m: { id: number; job: TextJob; serialized?: boolean }) => {
  queue = queue.then(async () => {
    let reply: TextWorkerReply;
    try {
      const result = await runTextJob(m.job);
      if (m.serialized) {
        // Serialized and encoded here when the answer goes to the client as it is, and handed over
        // without a copy: JSON.stringify and UTF-8 encoding of a 4 MB text and its diff are then
        // not the gateway's event loop's work either.
        const json = new TextEncoder().encode(JSON.stringify(result));
        port.postMessage({ id: m.id, ok: true, json } satisfies TextWorkerReply, [json.buffer]);
        return;
      }
      reply = { id: m.id, ok: true, result };
    } catch (err) {
      reply = { id: m.id, ok: false, failure: failureOf(err) };
    }
    port.postMessage(reply);
  });
});
