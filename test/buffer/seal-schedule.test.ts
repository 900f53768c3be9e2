import { afterEach, describe, expect, it } from 'vitest';
import { CommitCost } from '../../src/buffer/chunks/commit-cost.js';
import { mergedChunkCount, type ChunkJob } from '../../src/buffer/chunks/sealer.js';
import { readAllSamples } from '../../src/buffer/chunks/store.js';
import type { Clock } from '../../src/core/clock.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';

/**
 * The seal schedule's choices that set the footprint of a small buffer (chunks/seal-schedule.ts,
 * issue 22 §3): commits sized by a cost model with a fixed term, the newest compaction window left
 * open on a quiet gateway, and the merge count that decides whether a window is worth it.
 */
const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
});

const T0 = Date.UTC(2026, 10, 1);
/** `n` samples of `vars` variables, one a second each, values of a sensor's 0.01 resolution. */
const plant = (n: number, vars = 20) =>
  Array.from({ length: n }, (_, i) => ({ variable: `mvr_${i % vars}`, ts: T0 + Math.floor(i / vars) * 1000, value: Math.round(Math.sin(Math.floor(i / vars) / 300 + (i % vars)) * 1e3 + (Math.imul(i, 2654435761) >>> 0) % 7) / 10 }));
const key = (s: { variable: string; ts: number; value: number }) => `${s.variable}|${s.ts}|${s.value}`;

function manualClock() {
  let mono = 1_000_000;
  const clock: Clock = { now: () => Date.now(), monotonic: () => mono };
  return { clock, advance: (ms: number) => (mono += ms) };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Lets the buffer's own schedule run until `done()` or the deadline: maintenanceIdle() returns while
 * a job rests (a second of real time after a look that found nothing), so a busy machine needs more
 * than one look.
 */
async function until(b: TestBuffer, done: () => boolean, deadlineMs = 90_000): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    await b.buffer.maintenanceIdle();
    if (done()) return;
    await sleep(250);
  }
}

/** The schedule's commit hooks (what the sealer calls after each job's commit), to replay measured commits. */
function commitHooks(b: TestBuffer): { after(job: Pick<ChunkJob, 'kind' | 'commitWork'>, ms: number): void } {
  return (b.buffer as unknown as { sealer: { hooks: { after(job: Pick<ChunkJob, 'kind' | 'commitWork'>, ms: number): void } } }).sealer.hooks;
}

describe('the commit cost model (chunks/commit-cost.ts)', () => {
  it('separates the fixed term from the cost per byte: small commits that take long do not make bytes dear', () => {
    const cost = new CommitCost({ fixedMs: 5, msPerByte: 4e-5 });
    // Measured on the shared 2-core machine (bench/buffer-footprint.ts, burst + trickle): sealing
    // commits of 0.7-1.1 MB, then the trickle's seals of 1.6 kB, each paying a sync.
    for (const [bytes, ms] of [[739_000, 22], [1_308_000, 30], [1_151_000, 35], [1_044_000, 31], [1_021_000, 24]]) cost.record(bytes, ms);
    const before = cost.budget(35);
    for (let i = 0; i < 3; i++) cost.record(1_600, 8);
    // The former model (ms / bytes, weighted 0.3 per commit) went to 2.9e-3 ms per byte here, and
    // the next windows to a few kilobytes; the fitted line keeps the budget near where it was.
    expect(cost.msPerByte).toBeLessThan(5e-5);
    expect(cost.fixedMs).toBeGreaterThan(2);
    expect(cost.budget(35)).toBeGreaterThan(before * 0.5);
    expect(cost.budget(35)).toBeGreaterThan(400_000);
    expect(cost.expectedMs(1_000_000)).toBeGreaterThan(20);
    expect(cost.expectedMs(1_000_000)).toBeLessThan(45);
  });

  it('commits all of one size scale both terms; a sync slower than the slice still leaves half of it to the bytes', () => {
    const cost = new CommitCost({ fixedMs: 5, msPerByte: 2e-5 });
    for (let i = 0; i < 5; i++) cost.record(2_000, 10);
    expect(cost.expectedMs(2_000)).toBeCloseTo(10, 5);
    expect(cost.fixedMs / cost.msPerByte).toBeCloseTo(5 / 2e-5, 0);
    // A disk whose sync alone takes 60 ms: commits overrun by at most half the slice, and still
    // write something worth a commit.
    const busy = new CommitCost({ fixedMs: 5, msPerByte: 2e-5 });
    for (const [bytes, ms] of [[100_000, 62], [400_000, 68], [800_000, 76], [200_000, 64]]) busy.record(bytes, ms);
    expect(busy.fixedMs).toBeGreaterThan(50);
    expect(busy.budget(35)).toBeCloseTo(17.5 / busy.msPerByte, 0);
    expect(busy.budget(35)).toBeGreaterThan(500_000);
  });
});

describe('compaction windows of a small buffer', () => {
  it('the small commits of a trickle do not shrink the next compaction windows: one window merges the whole burst', async () => {
    const { clock, advance } = manualClock();
    const b = openTestBuffer({ clock, sealAfterMs: 60_000, sealRows: 5_000, maintenanceIdleMs: 20 });
    open.push(b);
    const data = plant(60_000);
    for (let i = 0; i < data.length; i += 10_000) await b.buffer.append(data.slice(i, i + 10_000));
    // Twelve sealing ranges of 5,000 rows, measured as they commit; nothing merged yet.
    b.buffer.sealNow();
    expect(b.buffer.stats().chunks).toBe(240);
    // Then three seals of a trickle as the burst + trickle benchmark measured them: 1.6 kB, 8 ms.
    for (let i = 0; i < 3; i++) commitHooks(b).after({ kind: 'seal', commitWork: 1_600 }, 8);
    // The schedule merges on its own (slices sized by the model): 120 kB of chunks fit one window,
    // so every variable ends in one chunk (3,000 samples each). The former model cut windows of
    // ~6 kB after those three commits: 12 and more chunks per variable stayed.
    advance(121_000);
    await b.buffer.maintenanceIdle();
    expect(b.buffer.stats().chunks).toBe(20);
    expect(readAllSamples(b.db).map(key).sort()).toEqual(data.map(key).sort());
  });

  it("a burst's last sealing ranges join the merged window instead of staying one more chunk per variable", async () => {
    const { clock, advance } = manualClock();
    const b = openTestBuffer({ clock, sealAfterMs: 60_000, sealRows: 10_000, maintenanceIdleMs: 20 });
    open.push(b);
    const data = plant(60_000);
    for (let i = 0; i < data.length; i += 10_000) await b.buffer.append(data.slice(i, i + 10_000));
    // Nothing more arrives: the schedule seals six ranges one after another and merges between
    // them. Before, the window merged once few rows were left (after the fifth range) was passed
    // for good, and the sixth range stayed a window of its own: 40 chunks.
    advance(121_000);
    await until(b, () => b.buffer.stats().liveRows === 0 && b.buffer.stats().chunks === 20);
    expect(b.buffer.stats().liveRows).toBe(0);
    expect(b.buffer.stats().chunks).toBe(20);
    expect(readAllSamples(b.db).map(key).sort()).toEqual(data.map(key).sort());
  });

  it('counts the chunks a merge makes as the merge does, so a window whose chunks are carried over is not merged again and again', async () => {
    expect(mergedChunkCount([100, 200, 300])).toBe(1);
    expect(mergedChunkCount([4_096, 4_096])).toBe(2);
    expect(mergedChunkCount([3_000, 3_000])).toBe(2);
    // Chunks at least half full are carried over as they are: three stay three, not the two that
    // 6,300 samples would need.
    expect(mergedChunkCount([2_100, 2_100, 2_100])).toBe(3);
    expect(mergedChunkCount([1_000, 2_100, 2_100])).toBe(2);
    expect(mergedChunkCount([5_000].map(() => 4_096).concat([10]))).toBe(2);
    // ...unless it and what follows fit one chunk: a burst's merged chunk and the short one its
    // last sealing range left become one (before, two for good).
    expect(mergedChunkCount([2_411, 589])).toBe(1);
    expect(mergedChunkCount([2_100, 1_000, 900])).toBe(1);

    const { clock, advance } = manualClock();
    const b = openTestBuffer({ clock, sealAfterMs: 60_000, sealRows: 2_100, maintenanceIdleMs: 20 });
    open.push(b);
    // One variable sealed in three ranges of 2,100 samples: three chunks that a merge carries over.
    const data = plant(6_300, 1);
    await b.buffer.append(data);
    b.buffer.sealNow();
    expect(b.buffer.stats().chunks).toBe(3);
    const sealer = (b.buffer as unknown as { sealer: { hooks: { before(job: ChunkJob): void } } }).sealer;
    let compactions = 0;
    const before = sealer.hooks.before;
    sealer.hooks.before = (job) => {
      if (job.kind === 'compact') compactions++;
      before(job);
    };
    advance(121_000);
    await b.buffer.maintenanceIdle();
    b.buffer.compactNow();
    expect(compactions).toBe(0);
    expect(b.buffer.stats().chunks).toBe(3);
  });
});

describe('the schedule packs again what slow arrivals and deliveries leave behind', () => {
  it('rows a claim unsealed and let go are sealed again once no claim unsealed for seal_after (not before)', async () => {
    const { clock, advance } = manualClock();
    const b = openTestBuffer({ clock, sealAfterMs: 60_000, sealRows: 10_000, maintenanceIdleMs: 20 });
    open.push(b);
    const data = plant(20_000);
    for (let i = 0; i < data.length; i += 10_000) await b.buffer.append(data.slice(i, i + 10_000));
    advance(121_000);
    await until(b, () => b.buffer.stats().liveRows === 0);
    // The sync path claims the newest 200 (unsealing the chunks that hold them) and its call fails.
    const claimed = b.buffer.claimNewest(200);
    expect(claimed.length).toBe(200);
    b.buffer.release(claimed);
    await b.buffer.maintenanceIdle();
    const unsealed = b.buffer.stats().liveRows;
    expect(unsealed).toBeGreaterThan(200);
    // Within seal_after of that unseal they stay rows (the sync path may come back for them)...
    advance(30_000);
    for (let i = 0; i < 3; i++) {
      await b.buffer.maintenanceIdle();
      await sleep(1_100);
    }
    expect(b.buffer.stats().liveRows).toBe(unsealed);
    // ...after it, sealed again: before, they stayed rows (26 B a sample) for good.
    advance(31_000);
    await until(b, () => b.buffer.stats().liveRows === 0);
    expect(b.buffer.stats().liveRows).toBe(0);
    expect(readAllSamples(b.db).map(key).sort()).toEqual(data.map(key).sort());
  }, 240_000);

  it('chunks an import range cut behind the compaction cursor are merged with their neighbours on the schedule, without a restart', async () => {
    const { clock, advance } = manualClock();
    const b = openTestBuffer({ clock, sealAfterMs: 60_000, sealRows: 10_000, maintenanceIdleMs: 20 });
    open.push(b);
    const data = plant(40_000);
    for (let i = 0; i < data.length; i += 10_000) await b.buffer.append(data.slice(i, i + 10_000));
    advance(121_000);
    await until(b, () => b.buffer.stats().liveRows === 0);
    await until(b, () => false, 3_000); // the merges that follow the last seal
    const merged = b.buffer.stats().chunks;
    // Import jobs over the middle of every chunk, finished: each chunk is cut in two.
    const chunks = b.db.prepare('SELECT seq_from, n FROM chunks ORDER BY seq_from').all() as Array<{ seq_from: number; n: number }>;
    for (const c of chunks) {
      const range = { from: c.seq_from + Math.floor(c.n / 3), to: c.seq_from + Math.floor((2 * c.n) / 3) };
      b.buffer.reserveRange(range);
      b.buffer.deleteRange(range);
    }
    expect(b.buffer.stats().chunks).toBe(2 * merged);
    const left = readAllSamples(b.db).map(key).sort();
    // A minute later the schedule goes over the windows again and merges the pieces.
    advance(61_000);
    await until(b, () => b.buffer.stats().chunks === merged);
    expect(b.buffer.stats().chunks).toBe(merged);
    expect(readAllSamples(b.db).map(key).sort()).toEqual(left);
  }, 240_000);
});
