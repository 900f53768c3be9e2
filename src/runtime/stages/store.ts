import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Database } from 'better-sqlite3';
import type { BufferConfig } from '../../buffer/config.js';
import { openBufferDatabase } from '../../buffer/file/database.js';
import { GapLedger } from '../../buffer/gaps.js';
import type { GapsConfig } from '../../buffer/gaps-config.js';
import type { ImportLedger } from '../../buffer/imports/ledger.js';
import { acquireBufferOwner, recordBufferOwner } from '../../buffer/file/owner-lock.js';
import { SampleBuffer } from '../../buffer/sample-buffer.js';
import { errorCode, GatewayError } from '../../core/errors.js';
import type { StatusReadings } from '../../status/model.js';
import type { RuntimeServices, Stage } from './stage.js';

export interface StoreSettings {
  /** gateway.data_dir: the gateway's own files (import jobs, source certificates). */
  dataDir: string;
  buffer: BufferConfig;
  gaps: GapsConfig;
}

export interface StoreStage extends Stage {
  /** The data directory, absolute, created. */
  readonly dataDir: string;
  readonly buffer: SampleBuffer;
  /** The gap ledger (issue 14), in the buffer file. */
  readonly gaps: GapLedger;
  readonly importLedger: ImportLedger;
  /** The buffer file's database, for the annotations outbox that lives in the same file. */
  readonly db: Database;
  /** Where the buffer file is. */
  readonly path: string;
  status(): Pick<StatusReadings, 'buffer' | 'ingestRate' | 'recoveredFrom' | 'setAside' | 'gaps'>;
}

/**
 * Stage 1, the store: the data directory, the buffer file (taken for this process first), the
 * sample buffer and the ledgers that live in its file. Stopping closes the buffer, which commits
 * what is pending, and gives the file back.
 */
export function startStore(settings: StoreSettings, { logger, metrics, clock }: RuntimeServices): StoreStage {
  const dataDir = resolve(settings.dataDir);
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (err) {
    throw new GatewayError(errorCode(err, 'DATA_DIR_UNUSABLE'), `gateway.data_dir: ${dataDir} cannot be created (${errorCode(err, 'error')}); the gateway's user needs write access there`, { cause: err });
  }

  // Taken before the file is opened, so a second gateway neither migrates nor moves aside a
  // buffer another one is using.
  const owner = acquireBufferOwner(settings.buffer.path);
  const opened = (() => {
    try {
      const o = openBufferDatabase(settings.buffer.path, { synchronous: settings.buffer.synchronous, logger, onRecovered: () => metrics.bufferRecoveredDatabases.inc() });
      recordBufferOwner(o.db);
      return o;
    } catch (err) {
      owner.release();
      throw err;
    }
  })();
  const buffer = new SampleBuffer(opened.db, {
    commitIntervalMs: settings.buffer.commit_interval,
    maxBytes: settings.buffer.max_bytes,
    whenFull: settings.buffer.when_full,
    sealAfterMs: settings.buffer.seal_after,
    sealRows: settings.buffer.seal_rows,
    compactSamples: settings.buffer.compact_samples,
    keepFreeBytes: settings.buffer.keep_free,
    returnFreeAfterMs: settings.buffer.return_free_after,
    logger: logger.child({ component: 'buffer' }),
    metrics,
    clock,
  });
  // The gap ledger shares the buffer file but not its invariants (it holds no samples): it gets the
  // connection, like the annotations outbox below.
  const gaps = new GapLedger(opened.db, metrics);
  const importLedger = buffer.importLedger;
  const setAsideCount = () => buffer.setAsideStore.total();
  const unbind = [metrics.setAsideSamples.readFrom(setAsideCount), metrics.gapsOpen.readFrom(() => gaps.openCount())];

  return {
    dataDir,
    buffer,
    gaps,
    importLedger,
    db: opened.db,
    path: opened.path,
    status: () => ({
      buffer: buffer.stats(),
      ingestRate: buffer.ingestRate(),
      recoveredFrom: opened.recovered?.movedTo ?? null,
      setAside: setAsideCount(),
      gaps: { open: gaps.list({ state: 'open', limit: 50 }).length, recent: gaps.list({ state: 'all', limit: 10 }).map((g) => gaps.view(g)), annotate: settings.gaps.annotate },
    }),
    async stop() {
      for (const u of unbind) u();
      try {
        await buffer.close();
      } finally {
        owner.release();
      }
    },
  };
}
