import { afterEach, describe, expect, it } from 'vitest';
import { SampleColumns, SamplesRefusedError } from '../../src/core/sample.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';

const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
});
function track(b: TestBuffer): TestBuffer {
  open.push(b);
  return b;
}

const samples = (n: number, variable = 'mvr_a', t0 = 1_700_000_000_000) => Array.from({ length: n }, (_, i) => ({ variable, ts: t0 + i, value: i }));

describe('SampleBuffer', () => {
  it('resolves append only after the samples are in the database', async () => {
    const b = track(openTestBuffer({ commitIntervalMs: 50 }));
    const p = b.buffer.append(samples(3));
    expect(b.rows()).toHaveLength(0); // group commit has not run yet
    await p;
    expect(b.rows().map((r) => r.value)).toEqual([0, 1, 2]);
  });

  it('commits a burst in slices of whole appends, serving the event loop between them, each append acknowledged after its own slice (issue 25)', async () => {
    // A slice time no commit fits: every slice is the smallest, 1,000 samples (MIN_SLICE_SAMPLES).
    const b = track(openTestBuffer({ commitIntervalMs: 20, sliceMs: 0.001 }));
    const commits = async () => (await b.metrics.bufferCommits.get()).values[0]?.value ?? 0;
    const before = await commits();
    // A check phase of the event loop counted: the slices must leave room for it (sockets, timers).
    let turns = 0;
    let done = false;
    const tick = () => {
      turns += 1;
      if (!done) setImmediate(tick);
    };
    setImmediate(tick);
    // 5 slices' worth of appends of 500 in one turn, as an OPC UA server's burst arrives.
    const per = 2;
    const resolved: Array<{ turn: number; rows: number }> = [];
    await Promise.all(
      Array.from({ length: 5 * per }, (_, i) =>
        b.buffer.append(samples(500, `mvr_${i}`)).then(() => {
          resolved[i] = { turn: turns, rows: b.rows().length };
        }),
      ),
    );
    done = true;
    expect((await commits()) - before).toBe(5);
    // Acknowledged only once committed (B1): each append finds at least itself and those before it.
    resolved.forEach((r, i) => expect(r.rows, `rows when append ${i} resolved`).toBeGreaterThanOrEqual((i + 1) * 500));
    expect(new Set(resolved.slice(0, per).map((r) => r.turn)).size).toBe(1);
    for (let k = 1; k < 5; k++) expect(resolved[k * per].turn, `slice ${k + 1} after a turn of the loop`).toBeGreaterThan(resolved[k * per - 1].turn);
    expect(b.rows()).toHaveLength(5_000);
  });

  it('inserts and acknowledgements share a slice: acks take what the inserts leave, at least a quarter (issue 25)', async () => {
    // The smallest slice (1,000 samples of work): 2,000 acks and 2,000 new samples due at once.
    const b = track(openTestBuffer({ commitIntervalMs: 20, sliceMs: 0.001 }));
    await b.buffer.append(samples(2_000, 'mvr_old'));
    const claimed = b.buffer.claimOldest(2_000);
    expect(claimed).toHaveLength(2_000);
    const commits = async () => (await b.metrics.bufferCommits.get()).values[0]?.value ?? 0;
    const before = await commits();
    b.buffer.ack(claimed);
    await Promise.all([0, 1, 2, 3].map((i) => b.buffer.append(samples(500, `mvr_new${i}`))));
    await b.buffer.flush();
    // Each slice did at most 1,250 (1,000 inserts + 250 acks): 4,000 pieces of work need 4 slices
    // (2 when acks took a whole slice's worth beside the inserts, 2,000 of work in a slice meant for 1,000).
    expect((await commits()) - before).toBeGreaterThanOrEqual(4);
    expect(b.rows().filter((r) => r.variable === 'mvr_old')).toHaveLength(0);
    expect(b.rows()).toHaveLength(2_000);
  });

  it('commits an append larger than a slice whole, and flush() and close() commit every slice at once', async () => {
    const b = track(openTestBuffer({ commitIntervalMs: 60_000, sliceMs: 0.001 }));
    const big = b.buffer.append(samples(15_000, 'mvr_big'));
    const small = b.buffer.append(samples(10, 'mvr_small'));
    await b.buffer.flush();
    expect(b.rows()).toHaveLength(15_010);
    await Promise.all([big, small]);
    const last = b.buffer.append(samples(12_000, 'mvr_last', 1_800_000_000_000));
    const lastToo = b.buffer.append(samples(12_000, 'mvr_last2', 1_800_000_000_000));
    await b.close();
    await Promise.all([last, lastToo]);
    const again = track(openTestBuffer({ path: b.path, dir: b.dir }));
    expect(again.rows()).toHaveLength(39_010);
  });

  it('keeps everything across close and reopen', async () => {
    const b = track(openTestBuffer());
    await b.buffer.append(samples(1000, 'mvr_x'));
    await b.buffer.append(samples(10, 'mvr_y'));
    await b.close();
    const again = track(openTestBuffer({ path: b.path, dir: b.dir }));
    const rows = again.rows();
    expect(rows).toHaveLength(1010);
    expect(rows.filter((r) => r.variable === 'mvr_y')).toHaveLength(10);
    expect(again.buffer.stats().rows).toBe(1010);
  });

  it('claims newest first, never hands a row out twice, and deletes only on ack', async () => {
    const b = track(openTestBuffer());
    await b.buffer.append(samples(10));
    const first = b.buffer.claimNewest(4);
    expect(first.map((r) => r.value)).toEqual([9, 8, 7, 6]);
    const second = b.buffer.claimNewest(4);
    expect(second.map((r) => r.value)).toEqual([5, 4, 3, 2]);
    expect(b.buffer.available).toBe(2);
    b.buffer.release(first);
    expect(b.buffer.available).toBe(6);
    b.buffer.ack(second);
    expect(b.buffer.claimNewest(10).map((r) => r.value)).toEqual([9, 8, 7, 6, 1, 0]);
    await b.buffer.flush();
    expect(b.rows().map((r) => r.value)).toEqual([0, 1, 6, 7, 8, 9]);
  });

  it('never reuses a sequence number, even after the newest rows were deleted and the file reopened', async () => {
    const b = track(openTestBuffer());
    await b.buffer.append(samples(5));
    const rows = b.buffer.claimNewest(5);
    const maxSeq = Math.max(...rows.map((r) => r.seq));
    b.buffer.ack(rows);
    await b.buffer.flush();
    await b.close();
    const again = track(openTestBuffer({ path: b.path, dir: b.dir }));
    await again.buffer.append(samples(1));
    expect(again.rows()[0].seq).toBeGreaterThan(maxSeq);
  });

  it('moves rows to set_aside with the reason, in one step', async () => {
    const b = track(openTestBuffer());
    await b.buffer.append(samples(3));
    const rows = b.buffer.claimNewest(1);
    b.buffer.setAside(rows, { path: 'sync', reason: 'items[0].machine_variable_id: unknown', requestId: 'req_1' });
    expect(b.rows()).toHaveLength(2);
    const aside = b.db.prepare('SELECT variable, ts, value, reason, request_id FROM set_aside').all();
    expect(aside).toEqual([{ variable: 'mvr_a', ts: rows[0].ts, value: 2, reason: 'items[0].machine_variable_id: unknown', request_id: 'req_1' }]);
  });

  it('excludes reserved import-job ranges from sync claims', async () => {
    const b = track(openTestBuffer());
    await b.buffer.append(samples(10));
    const all = b.rows();
    b.buffer.reserveRange({ from: all[0].seq, to: all[3].seq });
    expect(b.buffer.available).toBe(6);
    expect(b.buffer.claimNewest(100).map((r) => r.value)).toEqual([9, 8, 7, 6, 5, 4]);
  });

  it('drops the oldest unsent samples when over max_bytes and counts them', async () => {
    const b = track(openTestBuffer({ maxBytes: 1_000_000, whenFull: 'drop_oldest' }));
    for (let i = 0; i < 10; i++) await b.buffer.append(samples(10_000, 'mvr_a', 1_700_000_000_000 + i * 10_000));
    // drop_oldest runs in the turn after the commit's acknowledgement (B7).
    await new Promise((resolve) => setImmediate(resolve));
    const stats = b.buffer.stats();
    expect(stats.usedBytes).toBeLessThanOrEqual(1_000_000);
    expect(stats.droppedTotal).toBeGreaterThan(0);
    expect(stats.rows + stats.droppedTotal).toBe(100_000);
    // The newest sample survived, the oldest did not.
    const rows = b.rows();
    expect(rows[rows.length - 1].ts).toBe(1_700_000_000_000 + 99_999);
    expect(rows[0].ts).toBeGreaterThan(1_700_000_000_000);
    const dropped = await b.metrics.bufferDroppedSamples.get();
    expect(dropped.values.find((v) => v.labels.policy === 'drop_oldest')?.value).toBe(stats.droppedTotal);
  });
  it('refuses an append held as columns whole when one value or timestamp is not finite (B1), naming it; the other columns commit', async () => {
    const b = track(openTestBuffer());
    const t0 = 1_700_000_000_000;
    const bad = new SampleColumns(4);
    bad.push('mvr_a', t0, 1);
    bad.push('mvr_b', t0, Number.NaN);
    bad.push('mvr_c', t0, 3);
    const err = await b.buffer.appendColumns(bad).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SamplesRefusedError);
    expect((err as SamplesRefusedError).code).toBe('INVALID_SAMPLE');
    expect((err as Error).message).toContain('sample 2 of 3 (variable "mvr_b") has the value NaN');
    const good = new SampleColumns(4);
    good.push('mvr_a', t0 + 1_000, 1);
    good.push('mvr_b', t0 + 1_000, 2);
    await b.buffer.appendColumns(good);
    expect(b.buffer.stats().committedTotal).toBe(2);
  });
});
