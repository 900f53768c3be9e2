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
export type ConfigReadResponse = { path: null; yaml: null; note: string } | { path: string; yaml: string };

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
