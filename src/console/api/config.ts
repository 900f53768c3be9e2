/**
 * The configuration editor's model (Build the config → Configuration, issue 21 §3): check,
 * read, preview and Apply. Built by console/config-routes.ts, read by console/web/page-build.tsx.
 */

export interface CheckProblem {
  /** The setting at fault (`opcua.servers[0].endpoint`), when the message names one. */
  path: string | null;
  /** 1-based line of that setting in the text, when found. */
  line: number | null;
  message: string;
}

export interface SecretChange {
  /** The setting: `mqtt.connections[1].password`. */
  setting: string;
  /** `env NAME`, `file PATH`, or `a secret written in the file`. */
  secret: string;
  /** Where it would be sent: `mqtt://broker.example:1883`, or `this gateway`. */
  destination: string;
  reason: 'new secret reference' | 'existing secret sent to a new destination';
}

/** POST /console/api/config/check (body {yaml}). */
export interface ConfigCheckResponse {
  ok: boolean;
  problems: CheckProblem[];
  /** Problems found beyond the ones listed. */
  more_problems: number;
  warnings: string[];
  sources: string[];
}

/** GET /console/api/config: the file with every secret written in it hidden. */
export type ConfigReadResponse = { path: null; yaml: null; note: string } | { path: string; yaml: string; note?: string };

/** POST /console/api/config/preview (body {yaml}): what Apply would do. */
export type ConfigPreviewResponse =
  | { ok: false; problems: CheckProblem[]; more_problems: number }
  | {
      ok: true;
      diff: string;
      /** The confirmation that names this diff, sent back with Apply. */
      confirm: string;
      secret_changes: SecretChange[];
      /** True when the change sends secrets somewhere new and http.api_token is not set. */
      refused: boolean;
      message: string | null;
      warnings: string[];
      /**
       * Against the organisation's catalog as the console last read it (console/catalog-flags.ts):
       * mapped variables it does not have, mapping units other than its own. `read_at` null: not
       * read yet (nothing checked).
       */
      catalog: { read_at: number | null; flags: string[] };
    };

/** PUT /console/api/config (body {yaml, confirm?}), applied. */
export interface ConfigApplyResponse {
  written: string;
  /** The version the configuration history keeps of this text (null: the history could not keep it). */
  version: number | null;
  changed: string[];
  restart_required: string[];
  restarted_sources: string[];
  secret_changes: SecretChange[];
}

/**
 * What a refused Apply carries besides `error` (400 config_invalid, 403 secret_change_refused,
 * 409 confirm_required / diff_changed / reload_refused): the problems, or the diff to confirm.
 */
export interface ConfigApplyRefusal {
  error: { code: string; message: string; field?: string };
  problems?: CheckProblem[];
  more_problems?: number;
  diff?: string;
  confirm?: string;
  secret_changes?: SecretChange[];
}

/** A version of the configuration file the history keeps (console/config-history.ts). */
export interface ConfigVersion {
  /** 1, 2, 3 …: never reused. */
  version: number;
  /** When it was written (ISO 8601 UTC). */
  at: string;
  /** What wrote it: `console apply`, `console rollback`, `cli rollback`, `file changed` or `SIGHUP` (an edit elsewhere, reloaded), `gateway started`, `before console apply` (the file as it was when the console first wrote it). */
  by: string;
  /** The User-Agent of the console request (or the CLI's name), when one wrote it. */
  user_agent: string | null;
  /** SHA-256 of the text. */
  digest: string;
  bytes: number;
  /** Settings the reload changed, when the gateway applied it. */
  changed: string[] | null;
  /** `rollback to version 3`. */
  note: string | null;
}

/** GET /console/api/config/history: the versions kept, the newest first, and which one the file is now. */
export interface ConfigHistoryResponse {
  versions: ConfigVersion[];
  /** The version the file's text is now (null: edited since the last version kept, or no history). */
  current: number | null;
}

/** GET /console/api/config/history/:version: the version and its diff from the version before it (secrets hidden). */
export interface ConfigVersionResponse {
  version: ConfigVersion;
  /** From the version before it (or an empty file for the oldest kept). */
  diff: string;
  /** The diff a rollback to it would write now, from the file as it is. */
  rollback_diff: string;
}
