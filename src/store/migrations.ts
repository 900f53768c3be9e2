import type { Database } from 'better-sqlite3';
import { GatewayError } from '../core/errors.js';

/**
 * The migration registry (README.md S1): each owner of the file registers its tables and the steps
 * of the file's schema it brought; the store runs them at open.
 *
 * The file has one schema version (`PRAGMA user_version`), so the steps of all owners form one
 * sequence 1..N, each step registered by exactly one owner. A step is never edited once released;
 * a change is a new step at the end, registered by the owner it is for. (Steps released before
 * owners existed may create a table another owner keeps: step 1 made `set_aside` with the samples'
 * tables. A table belongs to the owner that lists it in `tables`, whichever step made it.)
 *
 * An owner may also keep idempotent statements (`ensure`: CREATE ... IF NOT EXISTS) run after the
 * steps at every open, and columns added to a table after its release (`addColumns`, added when
 * missing): what an older gateway ignores needs no version of its own, so adding it does not keep
 * a downgrade from opening the file.
 */
export interface SchemaStep {
  version: number;
  up: string;
}

export interface OwnerSchema {
  /** The owner's name: its label in metrics and status (`gateway_store_bytes{owner}`). */
  owner: string;
  /** The tables it keeps; their indexes go with them. */
  tables: readonly string[];
  /** Released steps of the file's schema this owner brought. */
  steps?: readonly SchemaStep[];
  /** Idempotent statements run after the steps at every open. */
  ensure?: string;
  /** Columns added after a table was released, each added at open when the table lacks it (after `ensure`). */
  addColumns?: ReadonlyArray<{ table: string; column: string; type: string }>;
}

/** The steps of all schemas in order; throws when they are not exactly 1..N, each once. */
export function orderedSteps(schemas: readonly OwnerSchema[]): Array<SchemaStep & { owner: string }> {
  const steps = schemas.flatMap((s) => (s.steps ?? []).map((step) => ({ ...step, owner: s.owner }))).sort((a, b) => a.version - b.version);
  steps.forEach((s, i) => {
    if (s.version !== i + 1) {
      const twice = steps.filter((x) => x.version === s.version);
      throw new Error(
        twice.length > 1
          ? `schema step ${s.version} is registered twice (${twice.map((x) => x.owner).join(', ')}); every step has one owner`
          : `schema step ${i + 1} is not registered (the owner that brought it is missing from the store's schemas); the file cannot be migrated without it`,
      );
    }
  });
  return steps;
}

/** The highest schema version `schemas` know. */
export function schemaVersion(schemas: readonly OwnerSchema[]): number {
  return orderedSteps(schemas).length;
}

/**
 * Brings the file to the schemas' version, a transaction per step, then runs every `ensure`.
 * Refuses a file a newer gateway wrote (a downgrade cannot know what it stores). With `readOnly`
 * nothing is written: a file that needs a step is refused instead.
 */
export function migrate(db: Database, schemas: readonly OwnerSchema[], options: { readOnly?: boolean } = {}): void {
  const steps = orderedSteps(schemas);
  const current = db.pragma('user_version', { simple: true }) as number;
  const known = steps.length;
  if (current > known) {
    throw new GatewayError(
      'BUFFER_SCHEMA_NEWER',
      `the buffer file was written by a newer edge-gateway (buffer schema ${current}; this version knows up to ${known}). Run the newer version, which still delivers what the file holds; downgrading needs a fresh buffer.path`,
    );
  }
  if (options.readOnly) {
    if (current < known) throw new GatewayError('BUFFER_SCHEMA_OLDER', `the buffer file has schema ${current}, this version needs ${known}; start the gateway once to bring it up to date`);
    return;
  }
  for (const step of steps) {
    if (step.version <= current) continue;
    db.transaction(() => {
      db.exec(step.up);
      db.pragma(`user_version = ${step.version}`);
    })();
  }
  for (const s of schemas) {
    if (s.ensure) db.exec(s.ensure);
    for (const c of s.addColumns ?? []) {
      const have = db.prepare('SELECT name FROM pragma_table_info(?)').pluck(true).all(c.table) as string[];
      if (!have.includes(c.column)) db.exec(`ALTER TABLE ${c.table} ADD COLUMN ${c.column} ${c.type}`);
    }
  }
}
