import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.js';
import { buildImportFile } from '../../src/uplink/import-file.js';
import { ImportFileBuilder } from '../../src/uplink/import-file-builder.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Import files built on a worker thread with its own read-only connection to the buffer
 * (src/uplink/import-file-builder.ts): the same bytes as on the main thread, rows and sealed chunks
 * alike, while the main thread commits; built while the main thread is busy; failures and aborts
 * reported, and the next build works. (The buffer is always a file: openBufferDatabase has no
 * in-memory mode; ImportFileBuilder builds on the main thread only if the worker cannot start.)
 */
const open: Array<TestBuffer | ImportFileBuilder> = [];
afterEach(async () => {
  for (const x of open.splice(0).reverse()) x instanceof ImportFileBuilder ? await x.close() : await x.destroy();
});

const T0 = Date.parse('2026-11-26T08:00:00.000Z');
const names = ['mvr_press', 'mvr_ünïcode', 'mvr_"q"\\b'];
const tmpFile = () => join(mkdtempSync(join(tmpdir(), 'gw-wfile-')), 'f.json');

async function bufferWith(n: number, seal: boolean) {
  const b = openTestBuffer({ sealRows: 1_000 });
  open.push(b);
  const samples = Array.from({ length: n }, (_, i) => ({ variable: names[i % 3], ts: T0 + i * 10, value: i % 7 === 0 ? -0 : i * 0.1 + (i % 5 === 0 ? 1e-9 : 0) }));
  for (let i = 0; i < n; i += 20_000) await b.buffer.append(samples.slice(i, i + 20_000));
  if (seal) b.buffer.sealNow();
  const seqs = b.db.prepare('SELECT min(lo) AS lo, max(hi) AS hi FROM (SELECT min(seq) AS lo, max(seq) AS hi FROM samples UNION ALL SELECT min(seq_from), max(seq_from + n - 1) FROM chunks)').get() as { lo: number; hi: number };
  const range = { from: seqs.lo, to: seqs.hi };
  // Held, as an import job's range is (B3): sealing and compaction leave its samples alone.
  b.buffer.reserveRange(range);
  const builder = new ImportFileBuilder({ buffer: b.buffer, logger: silentLogger() });
  open.push(builder);
  return { b, builder, range };
}

describe('import files built on a worker thread', () => {
  it('writes the same bytes as the main thread, from rows and from sealed chunks, while the main thread commits', async () => {
    const { b, builder, range } = await bufferWith(30_000, true);
    expect(builder.onWorker).toBe(true);
    expect(b.buffer.stats().sealedSamples).toBeGreaterThan(0);
    // Newer rows after the range: the main thread goes on committing while the worker reads.
    const more = (async () => {
      for (let k = 0; k < 20; k++) await b.buffer.append(Array.from({ length: 500 }, (_, i) => ({ variable: 'mvr_live', ts: T0 + 1e7 + k * 1000 + i, value: i })));
    })();
    const onWorker = tmpFile();
    const r = await builder.build(range, 'machine_variable_id', onWorker, 100_000_000);
    await more;
    const inline = tmpFile();
    const r0 = await buildImportFile(b.buffer.importReader(range, 'machine_variable_id'), inline, 100_000_000);
    expect(r).toEqual(r0);
    expect(r.itemCount).toBe(30_000);
    expect(readFileSync(onWorker).equals(readFileSync(inline))).toBe(true);
    // Every sample once (sealing orders a range's samples by variable, so compare as a set).
    const items = (JSON.parse(readFileSync(onWorker, 'utf8')) as { items: Array<{ timestamp: string; machine_variable_id: string; value: number }> }).items;
    const want = new Set(Array.from({ length: 30_000 }, (_, i) => `${names[i % 3]}|${new Date(T0 + i * 10).toISOString()}`));
    for (const it of items) expect(want.delete(`${it.machine_variable_id}|${it.timestamp}`)).toBe(true);
    expect(want.size).toBe(0);
  });

  it('stops at the byte limit exactly as the main thread does', async () => {
    const { b, builder, range } = await bufferWith(5_000, false);
    const a = tmpFile();
    const c = tmpFile();
    const r = await builder.build(range, 'machine_variable_id', a, 150_000);
    const r0 = await buildImportFile(b.buffer.importReader(range, 'machine_variable_id'), c, 150_000);
    expect(r).toEqual(r0);
    expect(r.itemCount).toBeLessThan(5_000);
    expect(statSync(a).size).toBe(r.bytes);
    expect(readFileSync(a).equals(readFileSync(c))).toBe(true);
  });

  it('builds while the main thread is busy (the work is off the main thread)', async () => {
    const { builder, range } = await bufferWith(200_000, true);
    // Warm up: the worker starts (and loads its modules) with the first build.
    await builder.build({ from: range.from, to: range.from + 10 }, 'machine_variable_id', tmpFile(), 1_000_000);
    const path = tmpFile();
    const done = builder.build(range, 'machine_variable_id', path, 100_000_000);
    // The main thread blocks for up to 20 s; the file is written meanwhile, by the worker alone.
    const until = performance.now() + 20_000;
    let size = 0;
    while (performance.now() < until) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
      try {
        size = statSync(path).size;
      } catch {
        size = 0;
      }
      if (size > 1_000_000) break;
    }
    expect(size).toBeGreaterThan(1_000_000);
    expect((await done).itemCount).toBe(200_000);
  });

  it('reports a build that fails with its reason, and the next build works', async () => {
    const { builder, range } = await bufferWith(1_000, false);
    await expect(builder.build(range, 'machine_variable_id', join(tmpdir(), 'no-such-dir-gw', 'f.json'), 1_000_000)).rejects.toThrow(/ENOENT/);
    const r = await builder.build(range, 'machine_variable_id', tmpFile(), 1_000_000);
    expect(r.itemCount).toBe(1_000);
  });

  it('an aborted build rejects and leaves the worker usable', async () => {
    const { builder, range } = await bufferWith(200_000, false);
    const ctrl = new AbortController();
    const p = builder.build(range, 'machine_variable_id', tmpFile(), 100_000_000, ctrl.signal);
    ctrl.abort(new Error('gateway stopping'));
    await expect(p).rejects.toThrow(/abort|stopping/);
    expect((await builder.build({ from: range.from, to: range.from + 99 }, 'machine_variable_id', tmpFile(), 1_000_000)).itemCount).toBe(100);
  });

  it('a worker that dies fails its build, and a new worker takes the next', async () => {
    const { builder, range } = await bufferWith(200_000, false);
    const p = builder.build(range, 'machine_variable_id', tmpFile(), 100_000_000);
    await waitFor(() => (builder as unknown as { worker: { terminate(): Promise<number> } | null }).worker !== null, { timeoutMs: 10_000, what: 'worker started' });
    await (builder as unknown as { worker: { terminate(): Promise<number> } }).worker.terminate();
    await expect(p).rejects.toThrow(/ended/);
    expect((await builder.build({ from: range.from, to: range.from + 9 }, 'machine_variable_id', tmpFile(), 1_000_000)).itemCount).toBe(10);
  });
});
