/**
 * Benchmark (c): import-file build. Streams buffer rows into a 128,000,000-byte import file
 * (`{"items": [...]}`) and measures items/s and the extra RSS while building.
 *
 * Baseline, same rows, same run: the obvious implementation, one `JSON.stringify` per item object
 * written to an fs.WriteStream with backpressure.
 *
 * Buffer v2: the same build again after every row was sealed into chunks (decoded chunk by chunk,
 * never the whole backlog), same run.
 *
 * Targets: >= 400,000 items/s (rows and chunks); extra RSS <= 64 MB while building a 128 MB file.
 *
 *   npx tsx bench/import-file.ts
 *   BENCH_FILE_BYTES=32000000 npx tsx bench/import-file.ts     # quick run
 */
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { openBufferDatabase } from '../src/store/file/database.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { buildImportFile } from '../src/uplink/import-file.js';
import type { BufferedRow } from '../src/buffer/sample-buffer.js';
import { envNumber, mb, NOISY_MACHINE_NOTE, rssOf, smokeBanner, table, verdict } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

const FILE_BYTES = envNumber('BENCH_FILE_BYTES', 128_000_000, 2_000_000);
/** The warm-up builds a file of this size, at most the measured one. */
const WARM_UP_BYTES = Math.min(5_000_000, FILE_BYTES);
const T0 = Date.parse('2026-11-01T00:00:00Z');

async function baseline(rows: Iterable<BufferedRow[]>, path: string, maxBytes: number): Promise<number> {
  const out = createWriteStream(path);
  let bytes = 11;
  let count = 0;
  out.write('{"items":[');
  outer: for (const chunk of rows) {
    for (const r of chunk) {
      const item = JSON.stringify({ timestamp: new Date(r.ts).toISOString(), machine_variable_id: r.variable, value: r.value });
      if (bytes + item.length + 1 > maxBytes) break outer;
      if (!out.write((count > 0 ? ',' : '') + item)) await once(out, 'drain');
      bytes += item.length + 1;
      count++;
    }
  }
  out.end(']}');
  await once(out, 'finish');
  return count;
}

smokeBanner(`BENCH_FILE_BYTES ${FILE_BYTES.toLocaleString('en-US')}`);
const dir = mkdtempSync(join(tmpdir(), 'gw-bench-file-'));
try {
  const logger = silentLogger();
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'normal', logger, integrityCheck: false });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: createMetrics(), clock: systemClock });
  // About 1.45 M items fit in 128 MB; fill a little more so the byte limit is what stops the build.
  const rowsNeeded = Math.ceil(FILE_BYTES / 85);
  for (let i = 0; i < rowsNeeded; i += 50_000) {
    const n = Math.min(50_000, rowsNeeded - i);
    await buffer.append(Array.from({ length: n }, (_, k) => ({ variable: `mvr_bench_${(i + k) % 2_000}`, ts: T0 + (i + k) * 10, value: Math.round((i + k) * 0.731 * 1000) / 1000 })));
  }
  const range = { from: 1, to: Number.MAX_SAFE_INTEGER };
  // Warm-up on a small file.
  await buildImportFile(buffer.importReader(range, 'machine_variable_id'), join(dir, 'warm.json'), WARM_UP_BYTES);
  await baseline(buffer.readRange(range), join(dir, 'warm-b.json'), WARM_UP_BYTES);
  global.gc?.();

  let t = performance.now();
  const baseItems = await baseline(buffer.readRange(range), join(dir, 'base.json'), FILE_BYTES);
  const baseRate = baseItems / ((performance.now() - t) / 1000);

  const before = rssOf();
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, rssOf())), 20);
  t = performance.now();
  const built = await buildImportFile(buffer.importReader(range, 'machine_variable_id'), join(dir, 'gw.json'), FILE_BYTES);
  const seconds = (performance.now() - t) / 1000;
  clearInterval(sampler);
  peak = Math.max(peak, rssOf());
  const rate = built.itemCount / seconds;
  const size = statSync(join(dir, 'gw.json')).size;
  if (size !== built.bytes || size > FILE_BYTES) throw new Error(`file size ${size} does not match ${built.bytes} or exceeds ${FILE_BYTES}`);
  JSON.parse('{"check":1}'); // the file itself is validated by the test suite; here only speed and memory
  const extra = peak - before;

  // Buffer v2: everything sealed; the file is built from chunks.
  buffer.sealNow();
  global.gc?.();
  const beforeC = rssOf();
  let peakC = beforeC;
  const samplerC = setInterval(() => (peakC = Math.max(peakC, rssOf())), 20);
  t = performance.now();
  const builtC = await buildImportFile(buffer.importReader(range, 'machine_variable_id'), join(dir, 'gw-chunks.json'), FILE_BYTES);
  const secondsC = (performance.now() - t) / 1000;
  clearInterval(samplerC);
  peakC = Math.max(peakC, rssOf());
  const rateC = builtC.itemCount / secondsC;
  const extraC = peakC - beforeC;
  if (builtC.itemCount < built.itemCount * 0.95) throw new Error(`chunk build wrote ${builtC.itemCount} items, rows build ${built.itemCount}`);
  process.stdout.write(`\nImport-file build: ${size.toLocaleString('en-US')} bytes, ${built.itemCount.toLocaleString('en-US')} items\n\n`);
  process.stdout.write(
    `${table([
      { path: 'baseline: JSON.stringify per item, WriteStream', 'items/s': Math.round(baseRate), 'extra RSS MB': '-' },
      { path: 'gateway: buildImportFile from rows', 'items/s': Math.round(rate), 'extra RSS MB': mb(extra) },
      { path: `gateway: buildImportFile from sealed chunks (${buffer.stats().chunks} chunks)`, 'items/s': Math.round(rateC), 'extra RSS MB': mb(extraC) },
    ])}\n\nratio gateway / baseline = ${(rate / baseRate).toFixed(2)}\n`,
  );
  process.stdout.write(`${verdict(rateC >= 400_000, `from chunks >= 400,000 items/s (${Math.round(rateC).toLocaleString('en-US')})`)}\n${verdict(extraC <= 64 * 1024 * 1024, `from chunks extra RSS <= 64 MB (${mb(extraC)} MB)`)}\n`);
  process.stdout.write(`${verdict(rate >= 400_000, `>= 400,000 items/s (${Math.round(rate).toLocaleString('en-US')})`)}\n${verdict(extra <= 64 * 1024 * 1024, `extra RSS <= 64 MB (${mb(extra)} MB; RSS ${mb(before)} -> peak ${mb(peak)} MB)`)}\n${NOISY_MACHINE_NOTE}\n`);
  await buffer.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
