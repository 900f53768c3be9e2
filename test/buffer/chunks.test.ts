import BetterSqlite3 from 'better-sqlite3';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { chunkSamples, MAX_CHUNK_SAMPLES, readAllSamples, type ChunkRow } from '../../src/buffer/chunks/store.js';
import { openBufferDatabase } from '../../src/store/file/database.js';
import { SCHEMA_VERSION } from '../../src/runtime/store-schemas.js';
import { SampleBuffer } from '../../src/buffer/sample-buffer.js';
import { systemClock } from '../../src/core/clock.js';
import { createLogger, silentLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { buildImportFile } from '../../src/uplink/import-file.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../../src/runtime/store-schemas.js';
import { migrate } from '../../src/store/migrations.js';

const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
});
function track(b: TestBuffer): TestBuffer {
  open.push(b);
  return b;
}

const T0 = Date.UTC(2026, 10, 1);
const SPECIAL = [-0, 0, 5e-324, 1e308, -1e308, 2 ** 60, 21.37, 1 / 3, -273.15];

/** `n` samples of `vars` variables, round-robin, 1 s apart per variable, some special values. */
function plant(n: number, vars = 5) {
  return Array.from({ length: n }, (_, i) => ({
    variable: `mvr_${i % vars}`,
    ts: T0 + Math.floor(i / vars) * 1000 + (i % 7 === 0 ? -3 : 0),
    value: i % 11 === 0 ? SPECIAL[(i / 11) % SPECIAL.length] : Math.round(Math.sin(i / 50) * 1e4) / 100,
  }));
}

const key = (s: { variable: string; ts: number; value: number }) => `${s.variable}|${s.ts}|${Object.is(s.value, -0) ? '-0' : s.value}`;

async function filled(n: number, extra: Parameters<typeof openTestBuffer>[0] = {}) {
  const b = track(openTestBuffer({ sealRows: 1_000, ...extra }));
  const data = plant(n);
  for (let i = 0; i < data.length; i += 2_000) await b.buffer.append(data.slice(i, i + 2_000));
  return { b, data };
}

describe('sealed chunks (buffer v2)', () => {
  it('seals rows into chunks losing nothing, bit-exact, across a reopen, and never reuses a seq', async () => {
    const { b, data } = await filled(10_000);
    const seqsBefore = new Set(b.rows().map((r) => r.seq));
    b.buffer.sealNow();
    const s = b.buffer.stats();
    expect(s.rows).toBe(10_000);
    expect(s.sealedSamples).toBe(10_000);
    expect(s.liveRows).toBe(0);
    expect(s.chunks).toBeGreaterThanOrEqual(5);
    expect(s.compressionRatio!).toBeGreaterThan(1.5); // small chunks of awkward values; bench/buffer-footprint.ts measures real ratios
    await b.close();
    const again = track(openTestBuffer({ path: b.path, dir: b.dir }));
    const db = again.db;
    const all = readAllSamples(db);
    expect(all.map(key).sort()).toEqual(data.map(key).sort());
    // Sealing renumbered inside the same seq range (L2): every seq was a seq before.
    for (const r of all) expect(seqsBefore.has(r.seq)).toBe(true);
    await again.buffer.append([{ variable: 'mvr_new', ts: T0, value: 1 }]);
    const newest = again.rows().at(-1)!;
    expect(newest.seq).toBeGreaterThan(Math.max(...seqsBefore));
    expect(again.buffer.stats().rows).toBe(10_001);
  });

  it('the sync path reaches sealed samples newest-first once the rows are gone, and an ack removes them', async () => {
    const { b, data } = await filled(3_000);
    b.buffer.sealNow();
    await b.buffer.append([{ variable: 'mvr_live', ts: T0 + 10_000_000, value: 7 }]);
    const first = b.buffer.claimNewest(200);
    expect(first[0].variable).toBe('mvr_live'); // the live row first
    expect(first).toHaveLength(200);
    const seen = new Set<number>(first.map((r) => r.seq));
    b.buffer.ack(first);
    let claimed = first.length;
    for (;;) {
      const batch = b.buffer.claimNewest(200);
      if (batch.length === 0) break;
      for (const r of batch) {
        expect(seen.has(r.seq)).toBe(false); // never handed out twice
        seen.add(r.seq);
      }
      claimed += batch.length;
      b.buffer.ack(batch);
    }
    expect(claimed).toBe(3_001);
    await b.buffer.flush();
    expect(b.buffer.stats().rows).toBe(0);
    expect(readAllSamples(b.db)).toEqual([]);
    expect(data.length).toBe(3_000);
  });

  it('a claim unseals the small chunks it needs in one transaction, newest or oldest first, each sample once (issue 25)', async () => {
    // 100 variables × 20 samples: sealing makes chunks of 20, so a claim of 200 needs 10 of them.
    const events: Array<Record<string, unknown>> = [];
    const logger = createLogger({ level: 'debug', format: 'json', destination: new Writable({ write: (c, _e, cb) => (String(c).split('\n').filter(Boolean).forEach((l) => events.push(JSON.parse(l) as Record<string, unknown>)), cb()) }) });
    const b = track(openTestBuffer({ sealRows: 1_000, logger }));
    const data = Array.from({ length: 2_000 }, (_, i) => ({ variable: `mvr_u${i % 100}`, ts: T0 + i, value: i }));
    await b.buffer.append(data);
    b.buffer.sealNow();
    expect(b.buffer.stats().sealedSamples).toBe(2_000);
    const unseals = () => events.filter((e) => e.event === 'chunk_unsealed');
    const newest = b.buffer.claimNewest(200);
    expect(newest).toHaveLength(200);
    expect(unseals()).toHaveLength(1); // one transaction (one fsync) for the 10 chunks, not 10
    expect(unseals()[0].chunks).toBeGreaterThanOrEqual(10);
    const oldest = b.buffer.claimOldest(200);
    expect(oldest).toHaveLength(200);
    expect(unseals()).toHaveLength(2);
    expect(Math.min(...oldest.map((r) => r.seq))).toBeLessThan(Math.min(...newest.map((r) => r.seq)));
    // Every sample exactly once across claims until the buffer is empty.
    const seen = new Set<string>();
    for (const r of [...newest, ...oldest]) seen.add(`${r.variable}|${r.ts}`);
    b.buffer.ack([...newest, ...oldest]);
    for (let batch = b.buffer.claimNewest(200); batch.length > 0; batch = b.buffer.claimNewest(200)) {
      for (const r of batch) {
        expect(seen.has(`${r.variable}|${r.ts}`)).toBe(false);
        seen.add(`${r.variable}|${r.ts}`);
      }
      b.buffer.ack(batch);
    }
    expect(seen.size).toBe(2_000);
    expect(unseals().length).toBeLessThanOrEqual(12);
  });

  it('plans import-job ranges over a backlog sealed into many small chunks: whole chunks, at most the items asked, counted exactly, each sample once (issue 25)', async () => {
    // 500 variables × 40 samples, sealed: 500-odd chunks of a few dozen samples (a plant's backlog after a restart).
    const b = track(openTestBuffer({ sealRows: 5_000 }));
    const data = Array.from({ length: 20_000 }, (_, i) => ({ variable: `mvr_p${i % 500}`, ts: T0 + i, value: i }));
    for (let i = 0; i < data.length; i += 5_000) await b.buffer.append(data.slice(i, i + 5_000));
    b.buffer.sealNow();
    expect(b.buffer.stats().sealedSamples).toBe(20_000);
    const chunkEnds = new Set((b.db.prepare('SELECT seq_from + n - 1 AS e FROM chunks').all() as Array<{ e: number }>).map((r) => r.e));
    const seen = new Set<string>();
    let jobs = 0;
    for (;;) {
      const before = b.buffer.available;
      const range = b.buffer.planJobRange(3_000, 0);
      if (!range) break;
      jobs += 1;
      b.buffer.reserveRange(range);
      const items = [...b.buffer.readRange(range)].flat();
      // At most the 3,000 asked, plus the rest of the chunk the end fell in (whole chunks).
      expect(items.length).toBeLessThanOrEqual(3_000 + MAX_CHUNK_SAMPLES);
      expect(chunkEnds.has(range.to)).toBe(true);
      // The hold counts exactly what the range holds.
      expect(before - b.buffer.available).toBe(items.length);
      for (const r of items) {
        expect(seen.has(`${r.variable}|${r.ts}`)).toBe(false);
        seen.add(`${r.variable}|${r.ts}`);
      }
    }
    expect(seen.size).toBe(20_000);
    expect(jobs).toBeGreaterThanOrEqual(7);
  });

  it('claimOldest takes the oldest samples first, sealed ones included, and release returns them', async () => {
    const { b, data } = await filled(2_000);
    b.buffer.sealNow();
    await b.buffer.append([{ variable: 'mvr_live', ts: T0 + 10_000_000, value: 7 }]);
    expect(b.buffer.oldestAvailableTs()).toBe(Math.min(...data.slice(0, 5).map((d) => d.ts)));
    const oldest = b.buffer.claimOldest(50);
    expect(oldest).toHaveLength(50);
    expect(oldest.every((r) => r.variable !== 'mvr_live')).toBe(true);
    expect(Math.min(...oldest.map((r) => r.ts))).toBe(Math.min(...data.map((d) => d.ts)));
    expect(b.buffer.available).toBe(2_001 - 50);
    b.buffer.release(oldest);
    expect(b.buffer.available).toBe(2_001);
  });

  it('builds an import file from chunks and rows, maps item indices back, and deletes exactly its range (partial chunks kept)', async () => {
    const { b, data } = await filled(6_000);
    b.buffer.sealNow();
    const live = plant(500).map((s) => ({ ...s, variable: `live_${s.variable}` }));
    await b.buffer.append(live);
    const all = readAllSamples(b.db);
    // A range that starts and ends inside chunks, spanning sealed samples and rows.
    const from = all[1_234].seq;
    const to = all[all.length - 100].seq;
    const range = { from, to };
    b.buffer.reserveRange(range);
    const inRange = all.filter((r) => r.seq >= from && r.seq <= to);
    expect(b.buffer.stats().reserved).toBe(inRange.length);
    const dir = mkdtempSync(join(tmpdir(), 'gw-chunk-import-'));
    try {
      const file = join(dir, 'import.json');
      const built = await buildImportFile(b.buffer.importReader(range, 'machine_variable_id'), file, 128_000_000);
      expect(built.itemCount).toBe(inRange.length);
      expect(built.lastSeq).toBe(inRange.at(-1)!.seq);
      const items = (JSON.parse(readFileSync(file, 'utf8')) as { items: Array<{ timestamp: string; machine_variable_id: string; value: number }> }).items;
      // The file's order is readRange's order (a job's error index names a sample).
      const read = [...b.buffer.readRange(range, 777)].flat();
      expect(read.map((r) => r.seq)).toEqual(inRange.map((r) => r.seq));
      items.forEach((it, i) => {
        expect(it.machine_variable_id).toBe(read[i].variable);
        expect(Date.parse(it.timestamp)).toBe(read[i].ts);
        expect(Object.is(it.value, read[i].value)).toBe(true);
      });
      const deleted = b.buffer.deleteRange(range);
      expect(deleted).toBe(inRange.length);
      const left = readAllSamples(b.db);
      expect(left.map(key).sort()).toEqual(all.filter((r) => r.seq < from || r.seq > to).map(key).sort());
      expect(b.buffer.stats().rows).toBe(left.length);
      expect(b.buffer.stats().reserved).toBe(0);
      expect(data.length + live.length).toBe(all.length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a sealing step cuts a variable of more than MAX_CHUNK_SAMPLES rows into chunks in its order, and a later smaller step reuses the scratch', async () => {
    const b = track(openTestBuffer({ sealRows: 20_000 }));
    // 10,000 rows of mvr_big between rows of two small variables: one step of 12,000 seqs.
    const data = Array.from({ length: 12_000 }, (_, i) => ({
      variable: i % 6 === 0 ? 'mvr_a' : i % 6 === 3 ? 'mvr_b' : 'mvr_big',
      ts: T0 + i * 10 - (i % 13 === 0 ? 25 : 0),
      value: i % 11 === 0 ? SPECIAL[(i / 11) % SPECIAL.length] : Math.round(Math.sin(i / 40) * 1e5) / 1e3,
    }));
    await b.buffer.append(data);
    b.buffer.sealNow();
    const more = plant(700).map((s) => ({ ...s, variable: `later_${s.variable}` }));
    await b.buffer.append(more);
    b.buffer.sealNow();
    expect(b.buffer.stats().liveRows).toBe(0);
    const sizes = b.db.prepare('SELECT var, n FROM chunks ORDER BY seq_from').all() as Array<{ var: number; n: number }>;
    expect(Math.max(...sizes.map((c) => c.n))).toBe(MAX_CHUNK_SAMPLES);
    expect(sizes.reduce((a, c) => a + c.n, 0)).toBe(12_700);
    // Each variable's samples come back bit-exact, each chunk a run of them in the order they were
    // appended, the runs together all of them. (Which of a variable's chunks comes first inside a
    // sealing range is the page packing's choice, sealer B3: by size, and so by page size too.)
    const names = new Map((b.db.prepare('SELECT id, name FROM variables').all() as Array<{ id: number; name: string }>).map((v) => [v.id, v.name]));
    const chunks = b.db.prepare('SELECT seq_from, var, n, ts_min, ts_max, data FROM chunks ORDER BY seq_from').all() as ChunkRow[];
    for (const name of ['mvr_a', 'mvr_b', 'mvr_big', ...new Set(more.map((m) => m.variable))]) {
      const want = [...data, ...more].filter((d) => d.variable === name).map(key);
      const runs = chunks.filter((c) => names.get(c.var) === name).map((c) => [...chunkSamples(c)].map((x) => key({ variable: name, ts: x.ts, value: x.value })));
      runs.sort((x, y) => want.indexOf(x[0]) - want.indexOf(y[0]));
      expect(runs.flat()).toEqual(want);
    }
    expect(readAllSamples(b.db).map(key).sort()).toEqual([...data, ...more].map(key).sort());
  });

  it('serves a chunk longer than a block in several blocks, for a range that starts and ends inside chunks and a limit that falls inside one', async () => {
    const { b } = await filled(4_000); // chunks of 200 samples (steps of 1,000 seqs, 5 variables)
    b.buffer.sealNow();
    const all = readAllSamples(b.db);
    const range = { from: all[150].seq, to: all[3_950].seq };
    b.buffer.reserveRange(range);
    const dir = mkdtempSync(join(tmpdir(), 'gw-chunk-import-'));
    try {
      const reader = b.buffer.importReader(range, 'machine_variable_id', 64);
      const counts: number[] = [];
      const watched = {
        nextBlock: () => {
          const block = reader.nextBlock();
          if (block) counts.push(block.count);
          return block;
        },
        itemsAfter: reader.itemsAfter,
      };
      const built = await buildImportFile(watched, join(dir, 'f.json'), 200_000);
      expect(Math.max(...counts)).toBe(64);
      const read = [...b.buffer.readRange(range, 500)].flat();
      expect(built.itemCount).toBeGreaterThan(1_000);
      expect(built.itemCount).toBeLessThan(read.length);
      expect(built.lastSeq).toBe(read[built.itemCount - 1].seq);
      const items = (JSON.parse(readFileSync(join(dir, 'f.json'), 'utf8')) as { items: Array<{ timestamp: string; machine_variable_id: string; value: number }> }).items;
      expect(items).toHaveLength(built.itemCount);
      items.forEach((it, i) => {
        expect(it.machine_variable_id).toBe(read[i].variable);
        expect(Date.parse(it.timestamp)).toBe(read[i].ts);
        expect(Object.is(it.value, read[i].value)).toBe(true);
      });
      // The whole range in blocks of 64 gives every sample once, in readRange's order.
      const whole = b.buffer.importReader(range, 'machine_variable_id', 64);
      const seen: string[] = [];
      for (let block = whole.nextBlock(); block; block = whole.nextBlock()) seen.push(block.text);
      const parsed = JSON.parse(`[${seen.join(',')}]`) as Array<{ timestamp: string; machine_variable_id: string; value: number }>;
      expect(parsed.map((it) => `${it.machine_variable_id}|${Date.parse(it.timestamp)}`)).toEqual(read.map((r) => `${r.variable}|${r.ts}`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an import file cut by its size limit ends inside a chunk, and the rest stays claimable', async () => {
    const { b } = await filled(4_000);
    b.buffer.sealNow();
    const all = readAllSamples(b.db);
    const range = { from: all[0].seq, to: all.at(-1)!.seq };
    b.buffer.reserveRange(range);
    const dir = mkdtempSync(join(tmpdir(), 'gw-chunk-import-'));
    try {
      const built = await buildImportFile(b.buffer.importReader(range, 'machine_variable_id'), join(dir, 'f.json'), 50_000);
      expect(built.itemCount).toBeGreaterThan(100);
      expect(built.itemCount).toBeLessThan(4_000);
      b.buffer.shrinkRange(range, built.lastSeq!);
      expect(b.buffer.stats().reserved).toBe(built.itemCount);
      expect(b.buffer.available).toBe(4_000 - built.itemCount);
      expect(b.buffer.deleteRange({ from: range.from, to: built.lastSeq! })).toBe(built.itemCount);
      expect(readAllSamples(b.db)).toHaveLength(4_000 - built.itemCount);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sets aside sealed items exactly (import path), in one transaction with their removal', async () => {
    const { b } = await filled(3_000);
    b.buffer.sealNow();
    const all = readAllSamples(b.db);
    const victims = [all[10], all[1_500], all[2_999]].map((r) => ({ ...r }));
    b.buffer.setAside(victims, { path: 'import', reason: 'unknown machine variable', jobId: 'job_x' });
    const left = readAllSamples(b.db);
    expect(left).toHaveLength(2_997);
    expect(b.buffer.stats().rows).toBe(2_997);
    const aside = b.db.prepare('SELECT variable, ts, value FROM set_aside ORDER BY id').all();
    expect(aside).toEqual(victims.map((v) => ({ variable: v.variable, ts: v.ts, value: v.value })));
    expect(left.map(key)).not.toContain(key(victims[1]));
  });

  it('sealing leaves held samples alone: sync claims and import-job ranges keep their seqs and content', async () => {
    const { b } = await filled(5_000);
    const claimed = b.buffer.claimNewest(100);
    const before = b.rows();
    const range = { from: before[100].seq, to: before[900].seq };
    b.buffer.reserveRange(range);
    const reservedBefore = before.filter((r) => r.seq >= range.from && r.seq <= range.to);
    b.buffer.sealNow();
    const rowsAfter = b.rows();
    // The job's rows and the claimed rows are untouched rows.
    expect(rowsAfter.filter((r) => r.seq >= range.from && r.seq <= range.to)).toEqual(reservedBefore);
    for (const c of claimed) expect(rowsAfter.find((r) => r.seq === c.seq)).toEqual({ seq: c.seq, variable: c.variable, ts: c.ts, value: c.value });
    expect(b.buffer.stats().sealedSamples).toBe(5_000 - reservedBefore.length - claimed.length);
    b.buffer.ack(claimed);
    await b.buffer.flush();
    expect(b.buffer.deleteRange(range)).toBe(reservedBefore.length);
    expect(b.buffer.stats().rows).toBe(5_000 - 100 - reservedBefore.length);
  });

  it('compaction merges a variable\'s small chunks across sealing steps, bit-exact and in order, leaving held seqs alone (sealer.ts B3)', async () => {
    const { b, data } = await filled(20_000, { compactSamples: 8_000 });
    b.buffer.sealNow();
    const chunksBefore = b.buffer.stats().chunks;
    expect(chunksBefore).toBeGreaterThanOrEqual(100); // 20 steps × 5 variables
    // Holds: a sync claim (unseals the newest chunk into rows) and an import-job range over chunks.
    const claimed = b.buffer.claimNewest(50);
    const all0 = readAllSamples(b.db);
    const range = { from: all0[4_000].seq, to: all0[6_500].seq };
    b.buffer.reserveRange(range);
    const inRange = (r: { seq: number }) => r.seq >= range.from && r.seq <= range.to;
    const held0 = all0.filter(inRange);
    const seqs0 = new Set(all0.map((r) => r.seq));
    const perVar = (rows: typeof all0) => {
      const m = new Map<string, string[]>();
      for (const r of rows) m.set(r.variable, [...(m.get(r.variable) ?? []), key(r)]);
      return m;
    };
    b.buffer.compactNow();
    const all1 = readAllSamples(b.db);
    const s = b.buffer.stats();
    expect(s.chunks).toBeLessThan(chunksBefore / 2);
    expect(s.rows).toBe(20_000);
    expect(all1.map(key).sort()).toEqual(data.map(key).sort());
    // Renumbered only inside the old seq space, never a seq twice, each variable's order kept.
    expect(new Set(all1.map((r) => r.seq)).size).toBe(all1.length);
    for (const r of all1) expect(seqs0.has(r.seq)).toBe(true);
    const outside = (rows: typeof all0) => rows.filter((r) => !inRange(r) && !claimed.some((c) => c.seq === r.seq));
    expect(perVar(outside(all1))).toEqual(perVar(outside(all0)));
    // Held samples keep their seqs and content.
    expect(all1.filter(inRange)).toEqual(held0);
    for (const c of claimed) expect(all1.find((r) => r.seq === c.seq)).toEqual({ seq: c.seq, variable: c.variable, ts: c.ts, value: c.value });
    // The job's range still deletes exactly its samples, and the rest survives a reopen.
    expect(b.buffer.deleteRange(range)).toBe(held0.length);
    b.buffer.ack(claimed);
    await b.buffer.flush();
    await b.close();
    const again = track(openTestBuffer({ path: b.path, dir: b.dir }));
    const left = readAllSamples(again.db);
    expect(left.length).toBe(20_000 - held0.length - claimed.length);
    expect(again.buffer.stats().rows).toBe(left.length);
  });

  it('drop_oldest drops the oldest samples first (here whole sealed chunks, older than every new row) and counts exactly the samples dropped', async () => {
    const metrics = createMetrics();
    const { b: first } = await filled(40_000, { maxBytes: 1_000_000_000 });
    first.buffer.sealNow();
    const sealedBefore = readAllSamples(first.db);
    // Reopened with a limit below what the file uses: the next commit applies the policy.
    const limit = Math.floor(first.buffer.usedBytes() * 0.5);
    await first.close();
    const b = track(openTestBuffer({ path: first.path, dir: first.dir, metrics, maxBytes: limit }));
    const more = Array.from({ length: 20_000 }, (_, i) => ({ variable: 'mvr_more', ts: T0 + 1e9 + i, value: i }));
    await b.buffer.append(more);
    // drop_oldest runs in the turn after the commit's acknowledgement (B7).
    await new Promise((resolve) => setImmediate(resolve));
    const dropped = b.buffer.stats().droppedTotal;
    expect(dropped).toBeGreaterThan(0);
    const left = readAllSamples(b.db);
    expect(left.length).toBe(40_000 + 20_000 - dropped);
    expect(b.buffer.stats().rows).toBe(left.length);
    const counted = (await metrics.registry.getSingleMetric('gateway_buffer_dropped_samples_total')!.get()).values.reduce((n, v) => n + v.value, 0);
    expect(counted).toBe(dropped);
    // Sealed (older) data goes before any new row.
    const moreLeft = left.filter((r) => r.variable === 'mvr_more').length;
    const sealedLeft = left.length - moreLeft;
    expect(sealedLeft === 0 || moreLeft === 20_000).toBe(true);
    expect(sealedBefore.length - sealedLeft + (20_000 - moreLeft)).toBe(dropped);
  });

  it('opens a v1 file with a backlog (schema 2) and seals it in place, losing nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-v1-'));
    const path = join(dir, 'buffer.db');
    try {
      // A v1 file: the schema as released before chunks, written with plain SQL.
      const { db: tmp } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
      tmp.exec('DROP TABLE chunks; DROP TABLE gaps; DROP TABLE last_committed;');
      tmp.prepare("DELETE FROM meta WHERE key = 'sealed_upto'").run();
      tmp.pragma('user_version = 2');
      const ins = tmp.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)');
      tmp.prepare("INSERT INTO variables (id, name) VALUES (1, 'mvr_a'), (2, 'mvr_b')").run();
      const rows = Array.from({ length: 20_000 }, (_, i) => [i + 1, 1 + (i % 2), T0 + i * 500, i % 3 === 0 ? 1e308 : i / 8] as const);
      tmp.transaction(() => rows.forEach((r) => ins.run(...r)))();
      tmp.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', '20001')").run();
      tmp.close();

      const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
      expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 10, maxBytes: 1e9, whenFull: 'drop_oldest', logger: silentLogger(), metrics: createMetrics(), clock: systemClock, sealRows: 5_000 });
      // The first commit after start seals the old backlog, a step at a time.
      await buffer.append([{ variable: 'mvr_a', ts: T0 - 1, value: 1 }]);
      for (let i = 0; i < 10 && buffer.stats().sealedSamples < 20_000; i++) buffer.sealNow();
      expect(buffer.stats().sealedSamples).toBeGreaterThanOrEqual(20_000);
      const all = readAllSamples(db);
      expect(all).toHaveLength(20_001);
      const want = rows.map(([, v, ts, value]) => key({ variable: v === 1 ? 'mvr_a' : 'mvr_b', ts, value })).concat(key({ variable: 'mvr_a', ts: T0 - 1, value: 1 }));
      expect(all.map(key).sort()).toEqual(want.sort());
      await buffer.close();
      // A v1 gateway refuses the converted file with the clear message (downgrade).
      const check = new BetterSqlite3(path);
      expect(check.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      check.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('opens a schema-4 file whose chunks are format 1, reads them, and seals new data in format 3 (migrations 5 and 7)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-v4-'));
    const path = join(dir, 'buffer.db');
    try {
      // A file as the release before the grid layout left it: schema 4, one format-1 chunk (written
      // by the codec of 7c44c1c: a 15-digit ADC series of 40 samples) and no rows.
      const { db: tmp } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
      tmp.pragma('user_version = 4');
      tmp.prepare("DELETE FROM meta WHERE key = 'chunk_formats'").run();
      const ts = Array.from({ length: 40 }, (_, i) => Date.UTC(2026, 10, 23, 12) + i * 1000 + (i % 3));
      const old = Array.from({ length: 40 }, (_, i) => Number(((30000 + ((i * 7) % 13)) * (10 / 65535) - 2.5).toPrecision(15)));
      tmp.prepare("INSERT INTO variables (id, name) VALUES (1, 'mvr_adc')").run();
      tmp.prepare('INSERT INTO chunks (seq_from, var, n, ts_min, ts_max, data) VALUES (1, 1, 40, ?, ?, ?)').run(ts[0], ts[39], Buffer.from('AQEoa/ixveVgxiV+BlY2IhDfrjkzmt/sjfvx/9eL2WzPt72csIr1F172S7xqIORgNg0A', 'base64'));
      tmp.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', '41') ON CONFLICT(key) DO UPDATE SET value = excluded.value").run();
      tmp.prepare("INSERT INTO meta (key, value) VALUES ('sealed_upto', '40') ON CONFLICT(key) DO UPDATE SET value = excluded.value").run();
      tmp.close();

      const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
      // Migrated through 5 (and the later steps).
      expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(5);
      expect(db.prepare("SELECT value FROM meta WHERE key = 'chunk_formats'").pluck().get()).toBe('1,2,3');
      const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 10, maxBytes: 1e9, whenFull: 'drop_oldest', logger: silentLogger(), metrics: createMetrics(), clock: systemClock, sealRows: 1_000 });
      expect(buffer.stats().sealedSamples).toBe(40);
      // New data of the same transmitter (more counts) is sealed in the current format: 3.
      const fresh = Array.from({ length: 1_000 }, (_, i) => ({ variable: 'mvr_adc', ts: T0 + 60_000 + i * 1000, value: Number(((30000 + Math.round(40 * Math.sin(i / 9))) * (10 / 65535) - 2.5).toPrecision(15)) }));
      await buffer.append(fresh);
      buffer.sealNow();
      const formats = (db.prepare('SELECT seq_from, substr(data, 1, 1) AS v FROM chunks ORDER BY seq_from').all() as Array<{ seq_from: number; v: Buffer }>).map((r) => r.v[0]);
      expect(formats[0]).toBe(1);
      expect(formats).toContain(3);
      const all = readAllSamples(db);
      const want = [...ts.map((t, i) => key({ variable: 'mvr_adc', ts: t, value: old[i] })), ...fresh.map(key)];
      expect(all.map(key).sort()).toEqual(want.sort());
      await buffer.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('a file holding format-3 chunks is refused at open by a version that cannot read them (schema step 7)', async () => {
    const b = openTestBuffer();
    open.push(b);
    const data = Array.from({ length: 600 }, (_, i) => ({ variable: 'mvr_f3', ts: T0 + i * 1000, value: Math.round(Math.sin(i / 30) * 1e4) / 100 }));
    await b.buffer.append(data);
    b.buffer.sealNow();
    const formats = (b.db.prepare('SELECT substr(data, 1, 1) AS v FROM chunks').all() as Array<{ v: Buffer }>).map((r) => r.v[0]);
    expect(formats).toContain(3);
    expect(b.db.prepare("SELECT value FROM meta WHERE key = 'chunk_formats'").pluck().get()).toBe('1,2,3');
    // The schemas of the release before format 3 (every step up to 6): the file is newer than it knows.
    const before = GATEWAY_SCHEMAS.map((s) => ({ ...s, steps: (s.steps ?? []).filter((step) => step.version <= 6) }));
    expect(() => migrate(b.db, before)).toThrow(/written by a newer edge-gateway \(buffer schema 7; this version knows up to 6\)/);
  });
});
