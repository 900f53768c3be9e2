import BetterSqlite3, { type Database } from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { Checkpointer, type CheckpointWorkerData } from '../../src/buffer/capacity/checkpointer.js';
import { DiskReturn } from '../../src/buffer/capacity/disk.js';
import { DiskUsage } from '../../src/store/usage.js';
import { WalBound } from '../../src/buffer/capacity/wal.js';
import { openBufferDatabase } from '../../src/store/file/database.js';
import { systemClock } from '../../src/core/clock.js';
import { createMetrics } from '../../src/core/metrics.js';
import { startModuleWorker } from '../../src/core/module-worker.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { waitFor } from '../helpers/wait.js';
import { captureLines } from '../helpers/log.js';
import { GATEWAY_SCHEMAS } from '../../src/runtime/store-schemas.js';

/**
 * The regular PASSIVE checkpoint runs on a worker thread with a connection of its own
 * (src/buffer/capacity/checkpointer.ts, README.md B9): the main connection runs none while the
 * worker copies the WAL back into the file; close ends the worker before the last TRUNCATE, which
 * leaves an empty WAL; a worker that cannot start or dies hands the checkpoint back to the main
 * thread, said once in the log.
 */
const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** Records every `wal_checkpoint` the main connection runs (the buffer's rooms call db.pragma). */
function spyCheckpoints(db: Database): string[] {
  const calls: string[] = [];
  const original = db.pragma.bind(db);
  db.pragma = ((source: string, options?: Parameters<Database['pragma']>[1]) => {
    if (/wal_checkpoint/i.test(source)) calls.push(source);
    return original(source, options);
  }) as Database['pragma'];
  return calls;
}

const warnings = (lines: Array<Record<string, unknown>>) => lines.filter((l) => l.level === 'warn' || l.level === 'error').map((l) => String(l.msg));
const walSize = (path: string) => (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);
const T0 = Date.UTC(2026, 10, 1);

describe('the PASSIVE checkpoint on a worker thread (B9)', () => {
  it('under steady appends the worker copies the WAL into the file while the main connection runs no checkpoint; close leaves no WAL', async () => {
    const { logger, lines } = captureLines();
    // The worker from the first checkpoint (a small plant's buffer starts it only once one is slow: below).
    const b: TestBuffer = openTestBuffer({ logger, sealAfterMs: 3_600_000, checkpointInlineBelowMs: null });
    cleanup.push(() => b.destroy());
    const onMain = spyCheckpoints(b.db);
    let appended = 0;
    // Each observation: the database file's size and how many checkpoints the main connection had run.
    const seen: Array<{ size: number; main: number }> = [];
    const grewWithoutMain = () => {
      const last = seen[seen.length - 1];
      // In WAL mode only a checkpoint writes the database file: growth between two observations
      // with no checkpoint of the main connection in between is the worker's.
      return seen.some((o) => o.main === last.main && last.size - o.size >= 512 * 1024);
    };
    await waitFor(
      async () => {
        const batch = Array.from({ length: 5_000 }, (_, i) => ({ variable: `mqtt/v${(appended + i) % 2_000}`, ts: T0 + Math.floor((appended + i) / 2_000) * 1_000, value: (appended + i) % 997 }));
        await b.buffer.append(batch);
        appended += batch.length;
        seen.push({ size: statSync(b.path).size, main: onMain.length });
        return grewWithoutMain();
      },
      { timeoutMs: 60_000, intervalMs: 20, what: 'the database file growing with no checkpoint on the main connection' },
    );
    // The main connection ran only TRUNCATE checkpoints (the WAL over 32 kB, every 10 s), never a PASSIVE one.
    expect(onMain.filter((s) => !/TRUNCATE/i.test(s))).toEqual([]);
    // Its answer (logged at debug) may still be on its way.
    await waitFor(() => lines.some((l) => l.event === 'buffer_checkpoint' && (l.checkpointed as number) > 0), { timeoutMs: 30_000, what: 'the worker answering a checkpoint' });
    expect(warnings(lines)).toEqual([]);

    await b.close();
    expect(walSize(b.path)).toBe(0);
    const check = new BetterSqlite3(b.path, { readonly: true });
    try {
      expect(check.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(check.prepare('SELECT count(*) FROM samples').pluck().get()).toBe(appended);
    } finally {
      check.close();
    }
  }, 90_000);
});

describe('Checkpointer', () => {
  /** A buffer file with `rows` rows waiting in the WAL (no checkpoint yet). */
  function fileWithWal(rows: number) {
    const dir = mkdtempSync(join(tmpdir(), 'gw-ckpt-'));
    const path = join(dir, 'buffer.db');
    const { logger, lines } = captureLines();
    const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger, integrityCheck: false });
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE filler (x BLOB)');
    const insert = db.prepare('INSERT INTO filler VALUES (randomblob(1000))');
    const write = (n: number) => db.transaction(() => {
      for (let i = 0; i < n; i++) insert.run();
    })();
    write(rows);
    const onMain = spyCheckpoints(db);
    cleanup.push(() => {
      if (db.open) db.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { db, path, logger, lines, onMain, write, fileSize: () => statSync(path).size };
  }
  const workerModule = new URL('../../src/buffer/capacity/checkpoint-worker.ts', import.meta.url);

  it('a killed worker hands the checkpoint back to the main thread, said once, losing nothing', async () => {
    const f = fileWithWal(4_000);
    const started: Worker[] = [];
    const c = new Checkpointer(f.db, {
      logger: f.logger,
      startWorker: (data: CheckpointWorkerData) => {
        const w = startModuleWorker(workerModule, { workerData: data });
        started.push(w);
        return w;
      },
    });
    cleanup.push(() => c.close());
    const before = f.fileSize();
    expect(c.request()).toBe(true);
    expect(c.running).toBe(true);
    // One in flight at a time: the next is skipped.
    expect(c.request()).toBe(false);
    await waitFor(() => !c.running, { timeoutMs: 30_000, what: 'the worker answering' });
    expect(f.fileSize()).toBeGreaterThan(before + 2_000_000);
    expect(f.onMain).toEqual([]);
    expect(c.onWorker).toBe(true);

    expect(started).toHaveLength(1);
    await started[0].terminate();
    await waitFor(() => !c.onWorker, { timeoutMs: 10_000, what: 'the fallback to the main thread' });
    f.write(4_000);
    const mid = f.fileSize();
    expect(c.request()).toBe(true);
    expect(c.running).toBe(false); // ran in this turn
    expect(f.onMain).toEqual(['wal_checkpoint(PASSIVE)']);
    expect(f.fileSize()).toBeGreaterThan(mid + 2_000_000);
    f.write(10);
    c.request();
    expect(warnings(f.lines)).toEqual(['the WAL checkpoint worker failed; checkpoints run on the main thread from now on']);
    expect(f.db.prepare('SELECT count(*) FROM filler').pluck().get()).toBe(8_010);
  }, 60_000);

  it('a worker that cannot start (failing module, or a throwing constructor): checkpoints run on the main thread', async () => {
    const f = fileWithWal(500);
    const c = new Checkpointer(f.db, { logger: f.logger, startWorker: () => new Worker('throw new Error("no checkpoint here")', { eval: true }) });
    cleanup.push(() => c.close());
    c.request();
    await waitFor(() => !c.onWorker && !c.running, { timeoutMs: 10_000, what: 'the fallback' });
    expect(f.onMain).toEqual([]);
    c.request();
    expect(f.onMain).toEqual(['wal_checkpoint(PASSIVE)']);
    expect(warnings(f.lines)).toEqual(['the WAL checkpoint worker failed; checkpoints run on the main thread from now on']);

    const g = fileWithWal(500);
    const d = new Checkpointer(g.db, {
      logger: g.logger,
      startWorker: () => {
        throw new Error('no threads');
      },
    });
    expect(d.request()).toBe(true);
    expect(g.onMain).toEqual(['wal_checkpoint(PASSIVE)']);
    expect(d.onWorker).toBe(false);
    expect(warnings(g.lines)).toHaveLength(1);
  }, 30_000);

  it('close lets a checkpoint in flight finish and ends the worker: a TRUNCATE after it is never busy', async () => {
    const f = fileWithWal(4_000);
    const c = new Checkpointer(f.db, { logger: f.logger });
    // Asked and closed at once (the worker still starting): the close waits for both.
    expect(c.request()).toBe(true);
    await c.close();
    expect(c.running).toBe(false);
    expect(c.request()).toBe(false);
    f.db.pragma('busy_timeout = 0');
    expect((f.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>)[0].busy).toBe(0);
    expect(walSize(f.path)).toBe(0);
    expect(warnings(f.lines)).toEqual([]);
    expect(f.lines.filter((l) => l.event === 'buffer_checkpoint')).toHaveLength(1);
  }, 30_000);

  it("the main connection's TRUNCATEs wait while the worker's checkpoint runs (it would answer busy), and run once it answered", () => {
    const f = fileWithWal(200);
    const c = { running: true, request: () => true };
    const wal = new WalBound(f.db, { logger: f.logger, clock: systemClock, limitBytes: 1, checkpointing: () => c.running });
    const disk = new DiskReturn(f.db, { keepFreeBytes: 0, returnAfterMs: 60_000, logger: f.logger, metrics: createMetrics(), usage: new DiskUsage(f.db), wal, lastCommitAt: () => -Infinity, changed: () => {}, checkpointer: c });
    // The WAL is idle and not empty: a TRUNCATE is wanted, but not while the worker holds the checkpoint lock.
    expect(walSize(f.path)).toBeGreaterThan(0);
    expect(disk.due()).toBe(false);
    wal.check();
    expect(f.onMain).toEqual([]);
    c.running = false;
    expect(disk.due()).toBe(true);
    disk.slice(performance.now() + 50);
    expect(f.onMain).toEqual(['wal_checkpoint(TRUNCATE)']);
    expect(walSize(f.path)).toBe(0);
    f.write(10);
    wal.check();
    expect(f.onMain).toEqual(['wal_checkpoint(TRUNCATE)', 'wal_checkpoint(TRUNCATE)']);
    expect(walSize(f.path)).toBe(0);

  });

  it('with inlineBelowMs, checkpoints run on the main thread while they are quick and start the worker at the first slow one', async () => {
    // Never slow enough: a small plant's checkpoints stay on the main thread, no worker thread exists.
    const quick = fileWithWal(50);
    let started = 0;
    const startWorker = (data: CheckpointWorkerData) => {
      started += 1;
      return startModuleWorker(workerModule, { workerData: data });
    };
    const q = new Checkpointer(quick.db, { logger: quick.logger, inlineBelowMs: 60_000, startWorker });
    cleanup.push(() => q.close());
    for (let i = 0; i < 3; i++) {
      expect(q.request()).toBe(true);
      quick.write(20);
    }
    expect(quick.onMain).toEqual(['wal_checkpoint(PASSIVE)', 'wal_checkpoint(PASSIVE)', 'wal_checkpoint(PASSIVE)']);
    expect(started).toBe(0);
    expect(q.onWorker).toBe(false);

    // A checkpoint that took at least the bound (0 ms: any) moves the next ones to the worker.
    const busy = fileWithWal(200);
    const b = new Checkpointer(busy.db, { logger: busy.logger, inlineBelowMs: 0, startWorker });
    cleanup.push(() => b.close());
    expect(b.request()).toBe(true);
    expect(busy.onMain).toEqual(['wal_checkpoint(PASSIVE)']);
    expect(b.onWorker).toBe(true);
    busy.write(200);
    expect(b.request()).toBe(true);
    expect(started).toBe(1);
    await waitFor(() => !b.running, { timeoutMs: 30_000, what: 'the worker answering' });
    expect(busy.onMain).toEqual(['wal_checkpoint(PASSIVE)']);
    expect(busy.lines.filter((l) => l.level === 'warn')).toEqual([]);
  });

  it('a buffer without a file checkpoints on the main thread', () => {
    const { logger } = captureLines();
    const db = new BetterSqlite3(':memory:');
    cleanup.push(() => db.close());
    expect(new Checkpointer(db, { logger }).onWorker).toBe(false);
  });
});
