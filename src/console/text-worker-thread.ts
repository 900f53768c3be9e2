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
port.on('message', (m: { id: number; job: TextJob }) => {
  queue = queue.then(async () => {
    let reply: TextWorkerReply;
    try {
      reply = { id: m.id, ok: true, result: await runTextJob(m.job) };
    } catch (err) {
      reply = { id: m.id, ok: false, failure: failureOf(err) };
    }
    port.postMessage(reply);
  });
});
