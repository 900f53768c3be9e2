import type { OwnerSchema } from '../store/migrations.js';

/**
 * The tables of operator annotations and machine conditions in the gateway's file
 * (src/store/README.md). Kept apart from the rest of the component so that the store can migrate
 * the file at every start, whether annotations are configured or not.
 */

/** The outbox and the open downtimes (store.ts). */
export const ANNOTATIONS_SCHEMA: OwnerSchema = {
  owner: 'annotations',
  tables: ['annotation_outbox', 'downtimes'],
  steps: [
    {
      version: 2,
      up: `
      -- One row per annotation, in creation order (seq), which is also the delivery order. The
      -- external_id is assigned at creation and sent with every attempt, so a retry after a crash
      -- or a timeout can only meet a 409 (= already delivered, interface §4.1).
      CREATE TABLE annotation_outbox (
        seq               INTEGER PRIMARY KEY,
        external_id       TEXT    NOT NULL UNIQUE,
        type              TEXT    NOT NULL,           -- instant | range
        occurred_at       INTEGER,                    -- epoch ms (instant)
        started_at        INTEGER,                    -- epoch ms (range)
        ended_at          INTEGER,                    -- epoch ms (range)
        text              TEXT    NOT NULL,
        machine_variables TEXT    NOT NULL,           -- JSON list of ids
        site              TEXT    NOT NULL,           -- JSON {"id"} or {"external_id"}
        machine           TEXT,                       -- configured machine key, or null
        origin            TEXT    NOT NULL,           -- api | hmi | mqtt | cli | detector
        state             TEXT    NOT NULL,           -- queued | delivered | refused
        attempts          INTEGER NOT NULL DEFAULT 0,
        last_error        TEXT,                       -- last transient failure
        refusal           TEXT,                       -- the service's message (400)
        service_id        TEXT,                       -- mda_... from the 201
        request_id        TEXT,
        created_at        INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        delivered_at      INTEGER
      );
      CREATE INDEX annotation_outbox_state ON annotation_outbox (state, seq);

      -- Downtimes started and not yet stopped (manual), and detector episodes in progress, so both
      -- survive a restart of the gateway.
      CREATE TABLE downtimes (
        key               TEXT    PRIMARY KEY,        -- manual:<machine> | rule:<fingerprint>
        kind              TEXT    NOT NULL,           -- manual | detector
        machine           TEXT    NOT NULL,
        external_id       TEXT    NOT NULL,
        started_at        INTEGER NOT NULL,           -- epoch ms
        reason            TEXT,
        text              TEXT,
        machine_variables TEXT,                       -- JSON list of ids (detector), or null
        origin            TEXT    NOT NULL,
        created_at        INTEGER NOT NULL
      ) WITHOUT ROWID;
    `,
    },
  ],
  // Reconciliation looks up a machine's annotations ending after a time (reconcile.ts); without it
  // every closed condition would scan the whole outbox.
  ensure: 'CREATE INDEX IF NOT EXISTS annotation_outbox_by_machine ON annotation_outbox (machine, ended_at);',
};

/**
 * Machine conditions (alarm-store.ts): activations, links and flags. Kept with idempotent
 * statements rather than a step of the file's schema: an older gateway opening the file ignores
 * these tables, so adding them does not keep it from opening the file.
 */
export const ALARMS_SCHEMA: OwnerSchema = {
  owner: 'alarms',
  tables: ['alarm_conditions', 'annotation_links', 'annotation_flags'],
  // Which stand-ins gave a row's times (JSON {start, end}, or null): added after the first release.
  addColumns: [{ table: 'alarm_conditions', column: 'time_sources', type: 'TEXT' }],
  ensure: `
  CREATE TABLE IF NOT EXISTS alarm_conditions (
    key               TEXT    PRIMARY KEY,        -- <server>|<condition id>|<active since ms>
    server            TEXT    NOT NULL,           -- opcua.servers[].name
    condition_id      TEXT    NOT NULL,           -- ConditionId (node id text), or EventId for plain events
    state             TEXT    NOT NULL,           -- open | closed | instant
    external_id       TEXT    NOT NULL UNIQUE,
    machine           TEXT,
    condition_name    TEXT,
    source_name       TEXT    NOT NULL,
    source_node       TEXT,
    event_type        TEXT    NOT NULL,
    event_type_name   TEXT,
    severity          INTEGER NOT NULL,
    message           TEXT    NOT NULL,
    reason_code       TEXT,
    category          TEXT,
    rule_text         TEXT,
    machine_variables TEXT    NOT NULL,           -- JSON list of ids
    started_at        INTEGER NOT NULL,           -- epoch ms: became active
    ended_at          INTEGER,                    -- epoch ms: became inactive (or inferred)
    end_inferred      TEXT,                       -- why the end is inferred, null when reported
    active            INTEGER,
    acked             INTEGER,
    confirmed         INTEGER,
    retain            INTEGER,
    first_event_id    TEXT    NOT NULL,
    last_event_id     TEXT    NOT NULL,
    last_event_at     INTEGER NOT NULL,
    seen_at           INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
  );
  CREATE INDEX IF NOT EXISTS alarm_conditions_by_condition ON alarm_conditions (server, condition_id, started_at);
  -- C1, enforced: one open activation per condition (and the lookup of every event).
  CREATE UNIQUE INDEX IF NOT EXISTS alarm_conditions_open ON alarm_conditions (server, condition_id) WHERE state = 'open';
  CREATE INDEX IF NOT EXISTS alarm_conditions_by_state ON alarm_conditions (state, server);
  CREATE INDEX IF NOT EXISTS alarm_conditions_by_machine ON alarm_conditions (machine, state, ended_at);
  CREATE TABLE IF NOT EXISTS annotation_links (
    operator   TEXT    NOT NULL,                  -- external_id of the operator's annotation
    alarm      TEXT    NOT NULL,                  -- external_id of the condition's annotation
    created_at INTEGER NOT NULL,
    PRIMARY KEY (operator, alarm)
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS annotation_links_by_alarm ON annotation_links (alarm);
  CREATE TABLE IF NOT EXISTS annotation_flags (
    external_id TEXT    NOT NULL,
    flag        TEXT    NOT NULL,                 -- contradicted_by_machine_state
    detail      TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (external_id, flag)
  ) WITHOUT ROWID;
`,
};
