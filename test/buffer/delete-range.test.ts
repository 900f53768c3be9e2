import { afterEach, describe, expect, it } from 'vitest';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';

/**
 * A finished import job's range leaves the buffer a transaction per event-loop turn
 * (ImportRanges.deleteRangeInSlices, issue 25): appends keep being committed meanwhile, the range
 * stays reserved until its last row is gone, and nothing outside it is touched.
 */
const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
});

describe('deleting a finished import job range in slices', () => {
  it('deletes the whole range over several turns while new appends commit, and keeps what is outside it', async () => {
    const b = openTestBuffer({ sliceMs: 5 });
    open.push(b);
    const n = 200_000;
    const batch = Array.from({ length: n }, (_, i) => ({ variable: `mvr_v${i % 500}`, ts: 1_000 + i, value: i }));
    await b.buffer.append(batch);
    const seqs = b.db.prepare('SELECT seq FROM samples ORDER BY seq').pluck(true).all() as number[];
    const range = { from: seqs[0], to: seqs[n - 1_001] };
    b.buffer.reserveRange(range);
    expect(b.buffer.stats().reserved).toBe(n - 1_000);

    // Count the event-loop turns the deletion spans, and commit an append during it.
    let turns = 0;
    let counting = true;
    const tick = () => {
      turns += 1;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    const during = b.buffer.append([{ variable: 'mvr_live', ts: 9_000_000, value: 1 }]);
    const deleted = await b.buffer.deleteRangeInSlices(range);
    counting = false;
    await during;

    expect(deleted).toBe(n - 1_000);
    expect(turns).toBeGreaterThan(3);
    const left = b.db.prepare('SELECT value FROM samples ORDER BY seq').pluck(true).all() as number[];
    expect(left).toEqual([...Array.from({ length: 1_000 }, (_, i) => n - 1_000 + i), 1]);
    expect(b.buffer.stats().rows).toBe(1_001);
    expect(b.buffer.stats().reserved).toBe(0);
  });

  it('stops when the buffer closes half-way, having deleted only whole slices of the range', async () => {
    const b = openTestBuffer({ sliceMs: 2 });
    open.push(b);
    const n = 100_000;
    await b.buffer.append(Array.from({ length: n }, (_, i) => ({ variable: `mvr_v${i % 100}`, ts: 1_000 + i, value: i })));
    const seqs = b.db.prepare('SELECT seq FROM samples ORDER BY seq').pluck(true).all() as number[];
    const range = { from: seqs[0], to: seqs[n - 1] };
    b.buffer.reserveRange(range);
    const deleting = b.buffer.deleteRangeInSlices(range);
    setImmediate(() => void b.buffer.close());
    await expect(deleting).rejects.toThrow(/next start deletes the rest/);
  });
});
