import type { Database } from 'better-sqlite3';
import type { Logger } from 'pino';
import { ALARMS_SCHEMA, ANNOTATIONS_SCHEMA } from '../annotations/schema.js';
import { GAPS_SCHEMA } from '../buffer/gaps.js';
import { SAMPLES_SCHEMA } from '../buffer/schema.js';
import { SET_ASIDE_SCHEMA } from '../buffer/set-aside.js';
import { TREND_SCHEMA } from '../buffer/trend.js';
import { silentLogger } from '../core/logger.js';
import type { Metrics } from '../core/metrics.js';
import { schemaVersion, type OwnerSchema } from '../store/migrations.js';
import { Store } from '../store/store.js';

/**
 * Every owner of the gateway's file, for the store's migration registry (src/store/README.md).
 * The samples owner comes first: it is the store's remainder (its bytes are what the others leave).
 * Tools that open the file (set-aside, gaps, backup) register the same list, so they migrate and
 * read it as the gateway does.
 */
export const GATEWAY_SCHEMAS: readonly OwnerSchema[] = [SAMPLES_SCHEMA, ANNOTATIONS_SCHEMA, GAPS_SCHEMA, TREND_SCHEMA, SET_ASIDE_SCHEMA, ALARMS_SCHEMA];

/** The file's schema version this gateway writes (`PRAGMA user_version`). */
export const SCHEMA_VERSION = schemaVersion(GATEWAY_SCHEMAS);

const stores = new WeakMap<Database, Store>();

/**
 * The store on a connection a tool, a benchmark or a test opened itself (no lock, no disk reserve:
 * they own the file), with every owner; one per connection, so all its owners share the writes.
 */
export function gatewayStore(db: Database, options: { logger?: Logger; metrics?: Metrics | null; limits?: Record<string, number> } = {}): Store {
  let store = stores.get(db);
  if (!store) {
    store = new Store(db, { schemas: GATEWAY_SCHEMAS, logger: options.logger ?? silentLogger(), metrics: options.metrics ?? null, limits: options.limits });
    stores.set(db, store);
  }
  return store;
}
