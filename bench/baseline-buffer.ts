/**
 * The buffer as it was before issue 22, for benchmarks that measure their baseline in the same run:
 * `git archive <ref> src` into a temporary directory (beside a link to this checkout's
 * node_modules), imported through tsx like the current sources. Nothing is added to the
 * repository's worktree list; `dispose()` deletes the directory.
 *
 *   BASELINE_REF=<commit>   another baseline (default: the last commit before buffer v3)
 */
import { execSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Database } from 'better-sqlite3';
import type { Logger } from 'pino';
import { ROOT } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

/** The merge of issue 21 into main: sealing and compaction inside commit(), no incremental vacuum. */
export const DEFAULT_BASELINE_REF = 'ed3440f';

/** What the benchmarks use of a buffer; both versions have it. */
export interface BenchBuffer {
  append(samples: ReadonlyArray<{ variable: string; ts: number; value: number }>): Promise<void>;
  flush(): Promise<void>;
  usedBytes(): number;
  stats(): { rows: number; liveRows: number; sealedSamples: number; chunks: number; chunkBytes: number };
  close(): Promise<void>;
}

export interface BufferModule {
  label: string;
  openDatabase(path: string, logger: Logger): Database;
  SampleBuffer: new (db: Database, options: Record<string, unknown>) => BenchBuffer;
  createMetrics: () => unknown;
  dispose(): void;
}

export async function loadBaseline(ref = process.env.BASELINE_REF ?? DEFAULT_BASELINE_REF): Promise<BufferModule> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-baseline-'));
  try {
    execSync(`git -C ${JSON.stringify(ROOT)} archive ${ref} src | tar -x -C ${JSON.stringify(dir)}`, { stdio: ['ignore', 'ignore', 'inherit'] });
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
    const databasePath = existsSync(join(dir, 'src/buffer/file/database.ts')) ? 'src/buffer/file/database.ts' : 'src/buffer/database.ts';
    const [db, sb, metrics] = await Promise.all([
      import(pathToFileURL(join(dir, databasePath)).href),
      import(pathToFileURL(join(dir, 'src/buffer/sample-buffer.ts')).href),
      import(pathToFileURL(join(dir, 'src/core/metrics.ts')).href),
    ]);
    const short = execSync(`git -C ${JSON.stringify(ROOT)} rev-parse --short ${ref}`).toString().trim();
    return {
      label: `baseline ${short}`,
      openDatabase: (path, logger) => db.openBufferDatabase(path, { synchronous: 'full', logger, integrityCheck: false }).db,
      SampleBuffer: sb.SampleBuffer,
      createMetrics: metrics.createMetrics,
      dispose: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

export async function loadCurrent(): Promise<BufferModule> {
  const [db, sb, metrics] = await Promise.all([import('../src/store/file/database.js'), import('../src/buffer/sample-buffer.js'), import('../src/core/metrics.js')]);
  return {
    label: 'buffer v3 (this checkout)',
    openDatabase: (path, logger) => db.openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger, integrityCheck: false }).db,
    // This checkout's buffer runs on the store's owners of the file (src/store), the baseline's on the connection.
    SampleBuffer: class extends sb.SampleBuffer {
      constructor(db: Database, options: Record<string, unknown>) {
        super(gatewayStore(db), options as unknown as ConstructorParameters<typeof sb.SampleBuffer>[1]);
      }
    } as unknown as BufferModule['SampleBuffer'],
    createMetrics: metrics.createMetrics,
    dispose: () => undefined,
  };
}

/** Longest time the event loop was held, sampled by a 5 ms interval timer (what a commit due then waits). */
export function stallMeter() {
  let last = performance.now();
  let max = 0;
  let over100 = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    const stall = now - last - 5;
    if (stall > max) max = stall;
    if (stall > 100) over100++;
    last = now;
  }, 5);
  return {
    stop: () => {
      clearInterval(timer);
      return { maxMs: Math.max(0, max), over100 };
    },
  };
}
