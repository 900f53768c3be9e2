import BetterSqlite3 from 'better-sqlite3';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SamplesRefusedError } from '../../src/core/sample.js';
import { startEmulator } from '../../src/emulator/index.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { startTestGateway } from '../helpers/gateway.js';
import { delay, waitFor } from '../helpers/wait.js';
import { captureLines } from '../helpers/log.js';

const open: TestBuffer[] = [];
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

const T0 = 1_700_000_000_000;
const batch = (n: number, from: number) => Array.from({ length: n }, (_, i) => ({ variable: `mvr_v${i % 10}`, ts: T0 + from + i, value: from + i }));

describe('bounded buffer', () => {
  it('disk full (SQLITE_FULL) with drop_oldest: no crash, oldest dropped and counted, recovers by itself', async () => {
    const { logger, lines } = captureLines();
    const b = openTestBuffer({ whenFull: 'drop_oldest', logger, episodeQuietMs: 300 });
    open.push(b);
    await b.buffer.append(batch(1_000, 0));
    // The file may not grow beyond its current pages plus a little: a full disk, as SQLite sees it.
    const pages = b.db.pragma('page_count', { simple: true }) as number;
    b.db.pragma(`max_page_count = ${pages + 20}`);
    let next = 1_000;
    for (let i = 0; i < 40; i++) {
      await b.buffer.append(batch(2_000, next)); // resolves: written after dropping old rows
      next += 2_000;
    }
    const stats = b.buffer.stats();
    expect(stats.droppedTotal).toBeGreaterThan(0);
    expect(stats.rows + stats.droppedTotal).toBe(next);
    expect(stats.writable).toBe(true);
    const rows = b.rows();
    expect(rows[rows.length - 1].value).toBe(next - 1); // the newest made it
    const fullErrors = (await b.metrics.bufferWriteErrors.get()).values.find((v) => v.labels.code === 'SQLITE_FULL');
    expect(fullErrors?.value).toBeGreaterThan(0);
    expect(lines.some((l) => l.msg === 'buffer write failed; samples are held in memory and the write is retried' && l.code === 'SQLITE_FULL')).toBe(true);
    // Space returns: no restart needed, nothing dropped any more.
    b.db.pragma('max_page_count = 1000000000');
    const droppedBefore = b.buffer.stats().droppedTotal;
    await b.buffer.append(batch(20_000, next));
    expect(b.buffer.stats().droppedTotal).toBe(droppedBefore);
    expect(b.rows().at(-1)!.value).toBe(next + 19_999);
  });

  it('disk full with refuse_new: the append is refused (rejects with BUFFER_FULL), nothing accepted is lost, ingest resumes when space returns', async () => {
    const b = openTestBuffer({ whenFull: 'refuse_new', episodeQuietMs: 300 });
    open.push(b);
    await b.buffer.append(batch(1_000, 0));
    const pages = b.db.pragma('page_count', { simple: true }) as number;
    b.db.pragma(`max_page_count = ${pages}`);
    // Issue 21 §1: not kept, so not reported as committed: the caller hears why.
    const refused = await b.buffer.append(batch(5_000, 1_000)).then(() => null, (e: unknown) => e);
    expect(refused).toMatchObject({ code: 'BUFFER_FULL', samples: 5_000 });
    expect(refused).toBeInstanceOf(SamplesRefusedError);
    expect((refused as Error).message).toMatch(/^refused: buffer full: the disk is full \(SQLITE_FULL\) and buffer\.when_full = refuse_new/);
    const s = b.buffer.stats();
    // The caller cannot offer them again (no keepsRefused): lost, and counted as such.
    expect(s.droppedTotal).toBe(5_000);
    expect(b.rows().length).toBe(1_000); // nothing already accepted was lost
    const dropped = (await b.metrics.bufferDroppedSamples.get()).values.find((v) => v.labels.policy === 'refuse_new');
    expect(dropped?.value).toBe(5_000);
    b.db.pragma('max_page_count = 1000000000');
    await waitFor(async () => {
      await b.buffer.append(batch(10, 100_000 + Math.floor(Math.random() * 1e6))).catch(() => undefined);
      return b.buffer.stats().writable && b.rows().length > 1_000;
    }, { what: 'writable again' });
  });

  it('refuse_new over max_bytes keeps what is there and refuses new appends: each one rejects, none resolves without its commit', async () => {
    const b = openTestBuffer({ whenFull: 'refuse_new', maxBytes: 1_000_000 });
    open.push(b);
    const outcomes: string[] = [];
    for (let i = 0; i < 10; i++) {
      outcomes.push(await b.buffer.append(batch(10_000, i * 10_000)).then(() => 'committed', (e: SamplesRefusedError) => e.code));
    }
    const s = b.buffer.stats();
    expect(outcomes[0]).toBe('committed');
    expect(outcomes.at(-1)).toBe('BUFFER_FULL');
    // What resolved is exactly what is in the file; what was refused is counted as lost.
    expect(s.rows).toBe(outcomes.filter((o) => o === 'committed').length * 10_000);
    expect(s.droppedTotal).toBe(outcomes.filter((o) => o === 'BUFFER_FULL').length * 10_000);
    expect(b.rows()[0].value).toBe(0); // the oldest were kept
  });

  it('refused samples a caller keeps (keepsRefused) are refused, not lost: no drop counted, no full episode', async () => {
    const { logger, lines } = captureLines();
    const b = openTestBuffer({ whenFull: 'refuse_new', maxBytes: 1_000_000, logger });
    open.push(b);
    // Fill past max_bytes with appends that are all committed (the check comes before a commit).
    for (let i = 0; b.buffer.usedBytes() <= 1_000_000; i++) await b.buffer.append(batch(10_000, i * 10_000));
    const err = await b.buffer.append(batch(10_000, 900_000), { keepsRefused: true }).then(() => null, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUFFER_FULL', samples: 10_000 });
    expect((err as Error).message).toMatch(/^refused: buffer full \(buffer\.when_full = refuse_new\)/);
    expect(b.buffer.stats().droppedTotal).toBe(0);
    expect(b.buffer.stats().fullEpisode).toBeNull();
    expect((await b.metrics.bufferRefusedSamples.get()).values.find((v) => v.labels.reason === 'buffer_full')?.value).toBeGreaterThanOrEqual(10_000);
    expect(lines.some((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('buffer refused') && l.kept_by_caller === 10_000)).toBe(true);
  });

  it('more samples than may wait in memory: the append is refused with BUFFER_PENDING_LIMIT and the limit named, not dropped in silence', async () => {
    const b = openTestBuffer({ maxPendingSamples: 1_000 });
    open.push(b);
    const err = await b.buffer.append(batch(1_500, 0)).then(() => null, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUFFER_PENDING_LIMIT', samples: 1_500 });
    expect(err).toBeInstanceOf(SamplesRefusedError);
    expect((err as Error).message).toMatch(/1500 samples would wait for one commit, more than the 1000/);
    expect(b.rows()).toHaveLength(0);
    // Smaller appends go through.
    await b.buffer.append(batch(1_000, 0));
    expect(b.rows()).toHaveLength(1_000);
  });

  it('while the disk refuses writes, appends beyond the memory limit are refused with the write error named', async () => {
    const b = openTestBuffer({ maxPendingSamples: 1_000 });
    open.push(b);
    b.db.pragma('query_only = ON');
    const held = b.buffer.append(batch(800, 0));
    held.catch(() => undefined);
    await waitFor(() => !b.buffer.stats().writable, { what: 'buffer unwritable' });
    const err = await b.buffer.append(batch(300, 800)).then(() => null, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'BUFFER_PENDING_LIMIT', samples: 300 });
    expect((err as Error).message).toMatch(/cannot write \(SQLITE_READONLY\).*800 samples already wait in memory; at most 1000/);
    b.db.pragma('query_only = OFF');
    await held; // the first append is committed once the disk takes writes again
    expect(b.rows()).toHaveLength(800);
  });

  it('logs each full episode once, with the time range and the count lost', async () => {
    const { logger, lines } = captureLines();
    // The quiet period runs on the monotonic clock: moved past it rather than slept through.
    let skipped = 0;
    const clock = { now: () => Date.now(), monotonic: () => performance.now() + skipped };
    const b = openTestBuffer({ whenFull: 'drop_oldest', maxBytes: 1_000_000, logger, episodeQuietMs: 300, clock });
    open.push(b);
    for (let i = 0; i < 8; i++) await b.buffer.append(batch(10_000, i * 10_000));
    await b.buffer.append(batch(1, 999_998)); // within the quiet period: the episode goes on
    expect(lines.filter((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('buffer full episode ended'))).toHaveLength(0);
    skipped += 400;
    await b.buffer.append(batch(1, 999_999)); // a commit after the quiet period ends the episode
    const ended = lines.filter((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('buffer full episode ended'));
    expect(ended).toHaveLength(1);
    const e = ended[0];
    expect(e.samples_lost).toBe(b.buffer.stats().droppedTotal);
    expect(e.policy).toBe('drop_oldest');
    expect(new Date(e.from as string).getTime()).toBe(T0); // the very first sample was lost first
    expect(new Date(e.to as string).getTime()).toBeGreaterThan(T0);
    expect(lines.filter((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('buffer is full')).length).toBe(1);
  });

  it('keeps the WAL bounded: it grows while a reader holds a snapshot and shrinks once the reader ends', async () => {
    const { logger, lines } = captureLines();
    const b = openTestBuffer({ logger, walLimitBytes: 2_000_000 });
    open.push(b);
    await b.buffer.append(batch(1_000, 0));
    const reader = new BetterSqlite3(b.path, { readonly: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT count(*) FROM samples').get(); // holds a snapshot
    for (let i = 0; i < 30; i++) {
      await b.buffer.append(batch(10_000, 1_000 + i * 10_000));
      await delay(40);
    }
    const grown = b.buffer.walBytes();
    expect(grown).toBeGreaterThan(2_000_000);
    // The operator is told once the reader has blocked the truncation for 5 s (not for a moment).
    const told = () => lines.some((l) => typeof l.msg === 'string' && (l.msg as string).includes('holds a read snapshot'));
    await waitFor(async () => {
      await b.buffer.append(batch(10, 800_000 + Math.floor(Math.random() * 1e5)));
      return told();
    }, { timeoutMs: 30_000, intervalMs: 200, what: 'the blocked-WAL warning' });
    expect(b.buffer.walBytes()).toBeGreaterThan(2_000_000);
    reader.exec('COMMIT');
    reader.close();
    await waitFor(async () => {
      await b.buffer.append(batch(10, 900_000 + Math.floor(Math.random() * 1e6)));
      return b.buffer.walBytes() <= 2_000_000;
    }, { timeoutMs: 10_000, what: 'WAL truncated' });
  });

  it('a damaged database is moved aside (never deleted), a fresh one created, the operator alerted, and ingest resumes', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const dir = mkdtempSync(join(tmpdir(), 'gw-corrupt-'));
    const prep = openTestBuffer({ path: join(dir, 'buffer.db'), dir });
    await prep.buffer.append(batch(20_000, 0));
    await prep.close();
    // Overwrite the middle of the file with garbage (a torn write on a failing disk).
    const path = join(dir, 'buffer.db');
    const bytes = readFileSync(path);
    bytes.fill(0x5a, 8192, 8192 + 16384);
    writeFileSync(path, bytes);
    const { logger, lines } = captureLines();
    const gw = await startTestGateway(emu, { generator: [{ name: 'g', variables: ['mvr_gen_1'], interval: 50 }] }, { dir, logger });
    cleanup.push(() => gw.close());
    const status = gw.handle.status();
    expect(status.buffer.recovered_from).toMatch(/buffer\.db\.damaged-/);
    expect(existsSync(status.buffer.recovered_from!)).toBe(true);
    expect(readdirSync(dir).some((f) => f.startsWith('buffer.db.damaged-'))).toBe(true);
    expect(lines.some((l) => l.level === 'error' && typeof l.msg === 'string' && (l.msg as string).includes('moved aside'))).toBe(true);
    expect((await gw.handle.metrics.bufferRecoveredDatabases.get()).values[0].value).toBe(1);
    await waitFor(() => (emu.valueCounts()['mvr_gen_1'] ?? 0) > 5, { what: 'ingest resumed and delivered' });
  });

  it('a file that is not a database at all is moved aside too', async () => {
    const emu = await startEmulator({ port: 0 });
    cleanup.push(() => emu.close());
    const dir = mkdtempSync(join(tmpdir(), 'gw-corrupt-'));
    writeFileSync(join(dir, 'buffer.db'), 'this is not an SQLite file '.repeat(500));
    const gw = await startTestGateway(emu, {}, { dir });
    cleanup.push(() => gw.close());
    expect(gw.handle.status().buffer.recovered_from).toMatch(/damaged/);
    await gw.handle.buffer.append(batch(10, 0));
    expect(gw.handle.buffer.stats().committedTotal).toBe(10);
  });
});
