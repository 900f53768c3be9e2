import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import type { BufferConfig } from '../../buffer/config.js';
import { GapLedger } from '../../buffer/gaps.js';
import type { GapsConfig } from '../../buffer/gaps-config.js';
import type { ImportLedger } from '../../buffer/imports/ledger.js';
import { SampleBuffer } from '../../buffer/sample-buffer.js';
import { errorCode, GatewayError } from '../../core/errors.js';
import type { StatusReadings } from '../../status/model.js';
import { storeLimits, type StoreConfig } from '../../store/config.js';
import { openStore } from '../../store/open.js';
import type { StoreOwner } from '../../store/store.js';
import { GATEWAY_SCHEMAS } from '../store-schemas.js';
import type { RuntimeServices, Stage } from './stage.js';

export interface StoreSettings {
  /** gateway.data_dir: the gateway's own files (import jobs, source certificates). */
  dataDir: string;
  buffer: BufferConfig;
  gaps: GapsConfig;
  /** The side tables' spaces and the disk reserve (src/store/config.ts). */
  store: StoreConfig;
}

export interface StoreStage extends Stage {
  /** The data directory, absolute, created. */
  readonly dataDir: string;
  readonly buffer: SampleBuffer;
  /** The gap ledger, an owner of the file of its own. */
  readonly gaps: GapLedger;
  readonly importLedger: ImportLedger;
  /** The annotations component's two owners of the file (outbox and downtimes, machine conditions). */
  readonly annotationOwners: { annotations: StoreOwner; alarms: StoreOwner };
  /** Where the buffer file is. */
  readonly path: string;
  status(): Pick<StatusReadings, 'buffer' | 'ingestRate' | 'recoveredFrom' | 'setAside' | 'gaps' | 'store'>;
}

/**
 * Stage 1, the store: the data directory, the gateway's file (src/store: taken for this process,
 * opened, migrated, one owner per table set), the sample buffer and the ledgers that live in it.
 * Nothing here hands out the database: each part gets its own owner's handle. Stopping closes
 * the buffer (which commits what is pending), then the file, and gives it back.
 */
export function startStore(settings: StoreSettings, { logger, metrics, clock }: RuntimeServices): StoreStage {
  const dataDir = resolve(settings.dataDir);
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (err) {
    throw new GatewayError(errorCode(err, 'DATA_DIR_UNUSABLE'), `gateway.data_dir: ${dataDir} cannot be created (${errorCode(err, 'error')}); the gateway's user needs write access there`, { cause: err });
  }
  const opened = openStore({
    path: resolve(settings.buffer.path),
    synchronous: settings.buffer.synchronous,
    schemas: GATEWAY_SCHEMAS,
    limits: storeLimits(settings.store),
    reserveBytes: settings.store.disk_reserve,
    logger: logger.child({ component: 'store' }),
    metrics,
  });
  const { store } = opened;
  let buffer: SampleBuffer;
  try {
    buffer = new SampleBuffer(store, {
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
  } catch (err) {
    opened.close();
    throw err;
  }
  const gaps = new GapLedger(store.owner('gaps'), metrics);
  const setAsideCount = () => buffer.setAsideStore.total();
  const unbind = [metrics.setAsideSamples.readFrom(setAsideCount), metrics.gapsOpen.readFrom(() => gaps.openCount())];

  return {
    dataDir,
    buffer,
    gaps,
    importLedger: buffer.importLedger,
    annotationOwners: { annotations: store.owner('annotations'), alarms: store.owner('alarms') },
    path: store.path,
    status: () => ({
      buffer: buffer.stats(),
      ingestRate: buffer.ingestRate(),
      recoveredFrom: opened.recovered?.movedTo ?? null,
      setAside: setAsideCount(),
      gaps: { open: gaps.list({ state: 'open', limit: 50 }).length, recent: gaps.list({ state: 'all', limit: 10 }).map((g) => gaps.view(g)), annotate: settings.gaps.annotate },
      store: store.status(),
    }),
    async stop() {
      for (const u of unbind) u();
      try {
        await buffer.close();
      } finally {
        opened.close();
      }
    },
  };
}
