import type { Database } from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { afterEach } from 'vitest';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBufferDatabase } from '../../src/store/file/database.js';
import { Store } from '../../src/store/store.js';
import { GATEWAY_SCHEMAS } from '../../src/runtime/store-schemas.js';
import { fromRowValue } from '../../src/buffer/row-value.js';
import { SampleBuffer, type BufferOptions } from '../../src/buffer/sample-buffer.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { createMetrics, type Metrics } from '../../src/core/metrics.js';

export interface TestBuffer {
  buffer: SampleBuffer;
  /** The store the buffer's owners write through (src/store), on `db`. */
  store: Store;
  /**
   * The connection the buffer runs on: the test opened the file and handed it to the buffer, as
   * the gateway does. Tests use it to inspect the file or to damage it (page limits, query_only);
   * the buffer itself offers no database handle (src/buffer/README.md).
   */
  db: Database;
  metrics: Metrics;
  path: string;
  dir: string;
  /** Every row in the samples table, oldest first. */
  rows(): Array<{ seq: number; variable: string; ts: number; value: number }>;
  close(): Promise<void>;
  /** Closes and deletes the directory. */
  destroy(): Promise<void>;
}

/** A store on `db` with every owner of the gateway's file (tests that build the buffer themselves). */
export function testStore(db: Database, options: { limits?: Record<string, number>; logger?: import('pino').Logger; metrics?: Metrics } = {}): Store {
  return new Store(db, { schemas: GATEWAY_SCHEMAS, logger: options.logger ?? silentLogger(), metrics: options.metrics ?? null, limits: options.limits });
}

/** A real SQLite buffer in a fresh temp directory. */
export function openTestBuffer(overrides: Partial<BufferOptions> & { path?: string; dir?: string; limits?: Record<string, number> } = {}): TestBuffer {
  const dir = overrides.dir ?? mkdtempSync(join(tmpdir(), 'gw-buffer-'));
  const path = overrides.path ?? join(dir, 'buffer.db');
  const metrics = overrides.metrics ?? createMetrics();
  const logger = overrides.logger ?? silentLogger();
  const { db } = openBufferDatabase(path, { synchronous: 'full', schemas: GATEWAY_SCHEMAS, logger });
  const store = testStore(db, { limits: overrides.limits, logger, metrics });
  const buffer = new SampleBuffer(store, {
    commitIntervalMs: 20,
    maxBytes: 1_000_000_000,
    whenFull: 'drop_oldest',
    logger,
    metrics,
    clock: systemClock,
    ...overrides,
  });
  let closed = false;
  return {
    buffer,
    store,
    db,
    metrics,
    path,
    dir,
    rows: () =>
      (db
        .prepare('SELECT s.seq, v.name AS variable, s.ts, s.value FROM samples s JOIN variables v ON v.id = s.var ORDER BY s.seq')
        .all() as Array<{ seq: number; variable: string; ts: number; value: number | Buffer }>).map((r) => ({ ...r, value: fromRowValue(r.value) })),
    close: async () => {
      if (closed) return;
      closed = true;
      await buffer.close();
      store.close();
    },
    destroy: async () => {
      if (!closed) {
        closed = true;
        await buffer.close();
        store.close();
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * For a test file: returns `openTestBuffer`, with every buffer it opened destroyed after each test.
 * Call once at the top of the file.
 */
export function buffersDestroyedAfterEach(): typeof openTestBuffer {
  const open: TestBuffer[] = [];
  afterEach(async () => {
    for (const b of open.splice(0)) await b.destroy();
  });
  return (overrides) => {
    const b = openTestBuffer(overrides);
    open.push(b);
    return b;
  };
}
