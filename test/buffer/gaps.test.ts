import { afterEach, describe, expect, it } from 'vitest';
import BetterSqlite3 from 'better-sqlite3';
import { openBufferDatabase } from '../../src/store/file/database.js';
import { GapLedger } from '../../src/buffer/gaps.js';
import { silentLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { clampNewest, mergeRanges } from '../../src/sources/opcua/history.js';
import { gapExternalId } from '../../src/annotations/gap-annotator.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { waitFor } from '../helpers/wait.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../../src/runtime/store-schemas.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

function testBuffer(): TestBuffer {
  const b = openTestBuffer();
  cleanup.push(() => b.destroy());
  return b;
}

describe('last committed timestamp per variable (issue 14, last-committed.ts)', () => {
  it('follows the newest committed sample, never moves back, and survives delivery and reopening', async () => {
    const b = testBuffer();
    const lc = b.buffer.lastCommitted;
    expect(lc.get('mvr_a')).toBeNull();
    await b.buffer.append([
      { variable: 'mvr_a', ts: 1_000, value: 1 },
      { variable: 'mvr_a', ts: 3_000, value: 3 },
      { variable: 'mvr_a', ts: 2_000, value: 2 },
      { variable: 'mvr_b', ts: 500, value: 1 },
    ]);
    expect(lc.get('mvr_a')).toBe(3_000);
    expect(lc.get('mvr_b')).toBe(500);
    // An older value (a backfill) does not move it back (L2).
    await b.buffer.append([{ variable: 'mvr_a', ts: 1_500, value: 9 }]);
    expect(lc.get('mvr_a')).toBe(3_000);
    // Delivered rows leave `samples`; the timestamp stays (last-committed.ts L3).
    const rows = b.buffer.claimNewest(100);
    b.buffer.ack(rows);
    await b.buffer.flush();
    expect(b.rows()).toHaveLength(0);
    expect(lc.get('mvr_a')).toBe(3_000);
    await b.close();
    const { db } = openBufferDatabase(b.path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
    expect(db.prepare('SELECT ts FROM last_committed WHERE variable = ?').pluck(true).get('mvr_a')).toBe(3_000);
    db.close();
  });

  it('records a timestamp only once its commit succeeded: a failed commit leaves no trace (L1)', async () => {
    const b = testBuffer();
    await b.buffer.append([{ variable: 'mvr_a', ts: 1_000, value: 1 }]);
    // Make the next commit fail inside its transaction, at the insert of the sample.
    b.db.exec('CREATE TRIGGER fail_next AFTER INSERT ON samples WHEN NEW.value = 424242 BEGIN SELECT RAISE(ABORT, \'injected\'); END;');
    const p = b.buffer.append([{ variable: 'mvr_fail', ts: 9_000, value: 424242 }]);
    await waitFor(() => !b.buffer.stats().writable, { what: 'the injected commit failure' });
    expect(b.rows().some((r) => r.variable === 'mvr_fail')).toBe(false);
    expect(b.buffer.lastCommitted.get('mvr_fail')).toBeNull();
    b.db.exec('DROP TRIGGER fail_next');
    await p; // the retry commits it
    expect(b.buffer.lastCommitted.get('mvr_fail')).toBe(9_000);
    expect(b.rows().some((r) => r.variable === 'mvr_fail')).toBe(true);
  });

  it('is written to the file on the maintenance schedule, not in the commit; a failed write keeps it for the next (L1)', async () => {
    const b = openTestBuffer({ lastCommittedFlushMs: 2_000 });
    cleanup.push(() => b.destroy());
    const stored = (v: string) => (b.db.prepare('SELECT ts FROM last_committed WHERE variable = ?').pluck(true).get(v) as number | undefined) ?? null;
    await b.buffer.append([{ variable: 'mvr_a', ts: 1_000, value: 1 }, { variable: 'mvr_b', ts: 7_000, value: 1 }]);
    // Committed: known at once, in the file only later (never ahead of the samples).
    expect(b.buffer.lastCommitted.get('mvr_a')).toBe(1_000);
    expect(stored('mvr_a')).toBeNull();
    expect(b.buffer.lastCommitted.snapshot()).toEqual(new Map([['mvr_a', 1_000], ['mvr_b', 7_000]]));
    await waitFor(() => stored('mvr_a') === 1_000 && stored('mvr_b') === 7_000, { timeoutMs: 30_000, what: 'the maintenance schedule to write last_committed' });
    expect(b.buffer.lastCommitted.unwritten).toBe(0);

    // A write that fails (here a trigger; a full disk in the field) loses nothing from memory.
    b.db.exec('CREATE TRIGGER fail_lc BEFORE UPDATE ON last_committed BEGIN SELECT RAISE(ABORT, \'injected\'); END;');
    await b.buffer.append([{ variable: 'mvr_a', ts: 2_000, value: 2 }]);
    expect(() => b.buffer.lastCommitted.flush()).toThrow(/injected/);
    expect(b.buffer.lastCommitted.get('mvr_a')).toBe(2_000);
    expect(stored('mvr_a')).toBe(1_000);
    b.db.exec('DROP TRIGGER fail_lc');
    b.buffer.lastCommitted.flush();
    expect(stored('mvr_a')).toBe(2_000);
    expect(b.buffer.lastCommitted.unwritten).toBe(0);
  }, 60_000);
  it('keeps thousands of variables in memory and writes them in parts that fit a slice, none lost or doubled', async () => {
    const b = openTestBuffer({ lastCommittedFlushMs: 3_600_000 });
    cleanup.push(() => b.destroy());
    const n = 5_000;
    const batch = Array.from({ length: n }, (_, i) => ({ variable: `mvr_v${i}`, ts: 1_000 + i, value: i }));
    await b.buffer.append(batch);
    await b.buffer.append(batch.map((s) => ({ ...s, ts: s.ts + 10 })));
    const lc = b.buffer.lastCommitted;
    expect(lc.unwritten).toBe(n);
    const count = () => b.db.prepare('SELECT count(*) FROM last_committed').pluck(true).get() as number;
    // A slice of a few milliseconds writes a part; the rest stays pending and due.
    lc.slice(performance.now() + 2);
    const first = count();
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(n);
    expect(lc.unwritten).toBe(n - first);
    await b.buffer.append([{ variable: 'mvr_v0', ts: 99_000, value: 1 }]);
    lc.flush();
    expect(count()).toBe(n);
    expect(lc.unwritten).toBe(0);
    const rows = new Map(b.db.prepare('SELECT variable, ts FROM last_committed').raw(true).all() as Array<[string, number]>);
    for (let i = 1; i < n; i++) expect(rows.get(`mvr_v${i}`)).toBe(1_010 + i);
    expect(rows.get('mvr_v0')).toBe(99_000);
  });
});

describe('gap ledger (gaps.ts)', () => {
  it('keeps one open gap per source and scope, closes it, counts its seconds, and serves the API shape', async () => {
    const b = testBuffer();
    const metrics = createMetrics();
    const ledger = new GapLedger(gatewayStore(b.db).owner('gaps'), metrics);
    const g = ledger.open({ source: 'press1', variables: null, from: 10_000, reason: 'source_disconnected', filled: 'pending' }, 10_000);
    const again = ledger.open({ source: 'press1', variables: null, from: 12_000, reason: 'gateway_stopped', filled: 'no' }, 12_000);
    expect(again.id).toBe(g.id); // G1
    const dev = ledger.open({ source: 'modbus', scope: 'device:mixer1', variables: ['mvr_x'], from: 11_000, reason: 'device_error', filled: 'no' }, 11_000);
    expect(dev.id).not.toBe(g.id);
    expect(ledger.openCount()).toBe(2);
    expect(ledger.closeOpen('press1', 'source', 25_000, 25_000)?.to).toBe(25_000);
    expect(ledger.closeOpen('press1', 'source', 26_000, 26_000)).toBeUndefined();
    expect(ledger.pending('press1').map((x) => x.id)).toEqual([g.id]);
    ledger.setFilled(g.id, 'yes', 42, null, 27_000);
    expect(ledger.pending('press1')).toEqual([]);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/gateway_gap_seconds_total\{reason="source_disconnected"\} 15/);
    expect(text).toMatch(/gateway_gap_filled_total\{result="yes"\} 1/);
    expect(text).toMatch(/gateway_gaps_open 1/);
    expect(ledger.list({ state: 'open' }).map((x) => ledger.view(x))).toEqual([{ id: dev.id, source: 'modbus', variables: ['mvr_x'], from: 11_000, to: null, reason: 'device_error', filled: 'no', note: null, annotation: null }]);
    expect(ledger.view(ledger.get(g.id)!)).toEqual({ id: g.id, source: 'press1', variables: null, from: 10_000, to: 25_000, reason: 'source_disconnected', filled: 'yes', note: null, annotation: null });
  });

  it('offers a closed unfilled gap for annotation once (G3), long enough ones only', () => {
    const b = testBuffer();
    const ledger = new GapLedger(gatewayStore(b.db).owner('gaps'));
    const short = ledger.open({ source: 's', variables: null, from: 0, to: 500, reason: 'gateway_stopped', filled: 'no' }, 1);
    const long = ledger.open({ source: 't', variables: null, from: 0, to: 5_000, reason: 'gateway_stopped', filled: 'no' }, 1);
    const filled = ledger.open({ source: 'u', variables: null, from: 0, to: 5_000, reason: 'gateway_stopped', filled: 'pending' }, 1);
    ledger.setFilled(filled.id, 'yes', 1, null, 2);
    expect(ledger.annotatable(1_000).map((g) => g.id)).toEqual([long.id]);
    expect(ledger.setAnnotations(long.id, ['x-1'], 3)).toBe(true);
    expect(ledger.setAnnotations(long.id, ['x-2'], 4)).toBe(false);
    expect(ledger.annotatable(0).map((g) => g.id)).toEqual([short.id]);
    expect(ledger.view(ledger.get(long.id)!).annotation).toEqual({ state: 'unknown', external_id: 'x-1' });
  });

  it('migrates a buffer file written before the ledger existed (schema 3 → 4) without touching its samples', () => {
    const b = testBuffer();
    const path = b.path;
    return b.close().then(() => {
      const raw = new BetterSqlite3(path);
      raw.exec('DROP TABLE gaps; DROP TABLE last_committed;');
      raw.pragma('user_version = 3');
      raw.exec("INSERT INTO variables (id, name) VALUES (1, 'mvr_a'); INSERT INTO samples (seq, var, ts, value) VALUES (1, 1, 5, 1.5)");
      raw.close();
      const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
      expect(db.pragma('user_version', { simple: true })).toBeGreaterThanOrEqual(4);
      expect(db.prepare('SELECT count(*) FROM samples').pluck(true).get()).toBe(1);
      expect(new GapLedger(gatewayStore(db).owner('gaps')).list()).toEqual([]);
      db.close();
    });
  });
});

describe('backfill windows (history.ts)', () => {
  it('merges overlapping and touching ranges', () => {
    expect(mergeRanges([[10, 20], [5, 9], [30, 40], [15, 25], [41, 41], [50, 49]])).toEqual([[5, 25], [30, 41]]);
  });
  it('keeps the newest max_window and says when it cut', () => {
    expect(clampNewest([[0, 100], [200, 300]], 1_000)).toEqual({ kept: [[0, 100], [200, 300]], clamped: false });
    expect(clampNewest([[0, 100], [200, 300]], 150)).toEqual({ kept: [[200, 300]], clamped: true });
    expect(clampNewest([[0, 100], [200, 300]], 80)).toEqual({ kept: [[220, 300]], clamped: true });
    expect(clampNewest([[0, 100], [200, 300]], 250)).toEqual({ kept: [[50, 100], [200, 300]], clamped: true });
  });
});

describe('gap annotation external ids', () => {
  it('are stable, follow §2.1 and differ per source, reason, start and part', () => {
    const g = { source: 'press1', scope: 'source' as const, reason: 'gateway_stopped' as const, from: 1_795_000_000_000 };
    const id = gapExternalId('plant-a-line-3', g, 0);
    expect(id).toBe(gapExternalId('plant-a-line-3', { ...g }, 0));
    expect(id).toMatch(/^[A-Za-z0-9_-]{1,100}$/);
    expect(new Set([id, gapExternalId('plant-a-line-3', g, 1), gapExternalId('plant-a-line-3', { ...g, from: g.from + 1 }, 0), gapExternalId('plant-a-line-3', { ...g, source: 'x' }, 0), gapExternalId('plant-a-line-3', { ...g, reason: 'device_error' }, 0)]).size).toBe(5);
    expect(gapExternalId('a'.repeat(40), g, 99).length).toBeLessThanOrEqual(100);
  });
});
