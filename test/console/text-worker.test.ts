import type { Worker } from 'node:worker_threads';
import { SHARE_ENV } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { siblingModule, startModuleWorker } from '../../src/core/module-worker.js';
import { MergeError } from '../../src/console/config-merge.js';
import { ConsoleTextWorker, INLINE_MAX_CHARS, type TextWorkerData } from '../../src/console/text-worker.js';

/**
 * The console's text worker: a small text is worked on in the gateway's thread (no worker to wait
 * for), a large one on the worker, with the same answers and the same refusals; a worker that dies
 * refuses the job it ran and the next job starts another.
 */
const started: Worker[] = [];
const start = (data: TextWorkerData): Worker => {
  const w = startModuleWorker(siblingModule(new URL('../../src/console/text-worker.ts', import.meta.url).href, 'text-worker-thread'), { workerData: data, env: SHARE_ENV });
  started.push(w);
  return w;
};
const texts = new ConsoleTextWorker(start);
afterAll(async () => {
  await texts.close();
  await Promise.all(started.map((w) => w.terminate()));
});

const nodes = (n: number) => `opcua:\n  servers:\n    - name: plc1\n      endpoint: opc.tcp://10.0.0.1:4840\n      nodes:\n${Array.from({ length: n }, (_, i) => `        - { node_id: "ns=2;s=T${i}", variable: mvr_t${i} }\n`).join('')}`;

describe('the console text worker', () => {
  it('answers a small text in this thread and a large one on the worker, alike', async () => {
    const small = nodes(10);
    expect(small.length).toBeLessThan(INLINE_MAX_CHARS);
    const a = await texts.run({ job: 'mappings', yaml: small });
    expect(a.rows).toBe(10);
    expect(started).toHaveLength(0);
    const large = nodes(2_000);
    expect(large.length).toBeGreaterThan(INLINE_MAX_CHARS);
    const b = await texts.run({ job: 'mappings', yaml: large });
    expect(b.rows).toBe(2_000);
    expect(b.csv.split('\r\n')[1]).toBe(a.csv.split('\r\n')[1]);
    expect(started).toHaveLength(1);
  }, 120_000);

  it('refuses alike: a text that is not YAML is a MergeError from either', async () => {
    await expect(texts.run({ job: 'mappings', yaml: 'a: [' })).rejects.toThrow(MergeError);
    await expect(texts.run({ job: 'mappings', yaml: `${nodes(2_000)}a: [\n` })).rejects.toThrow(MergeError);
    await expect(texts.run({ job: 'mappings', yaml: `${nodes(2_000)}a: [\n` })).rejects.toThrow(/not valid YAML/);
  }, 120_000);

  it('a worker that dies refuses its job, and the next job starts another', async () => {
    const large = nodes(4_000);
    const job = texts.run({ job: 'mappings', yaml: large });
    await started.at(-1)!.terminate();
    await expect(job).rejects.toMatchObject({ status: 500, code: 'worker_failed' });
    expect((await texts.run({ job: 'mappings', yaml: large })).rows).toBe(4_000);
    expect(started.length).toBeGreaterThanOrEqual(2);
  }, 120_000);
});
