import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { z } from 'zod';
import { validateConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { registerSecretsOf, withDeferredRegistration } from '../config/secrets.js';
import { ConfigError, describeError } from '../core/errors.js';
import { HttpError, type LocalHttpServer, type RouteContext } from '../http/server.js';
import { parseBody } from './build-tools.js';
import type { ConfigApplyRefusal, ConfigApplyResponse, ConfigCheckResponse, ConfigPreviewResponse, ConfigReadResponse, SecretChange } from './api/config.js';
import type { ConsoleCatalog } from './catalog.js';
import { ConfigHistory, digestOf } from './config-history.js';
import { writeConfigFile } from './config-edit.js';
import type { Prepared } from './text-jobs.js';
import type { ConsoleTextWorker } from './text-worker.js';

/** A configuration file the console wrote and applies (the gateway's watcher then has nothing to reload). */
export interface WrittenConfig {
  digest: string;
  by: string;
  version: number | null;
}

export type ConsoleReload = (next: GatewayConfig, written?: WrittenConfig) => Promise<{ changed: string[]; restartRequired: string[]; restartedSources: string[] }>;

export interface ConfigRouteDeps {
  config: () => GatewayConfig;
  configPath: string | null;
  /** Applies a validated configuration (the gateway's hot reload). */
  reload: ConsoleReload;
  texts: ConsoleTextWorker;
  /** Previous versions of the file (console/config-history.ts), in the gateway's data directory. */
  history: ConfigHistory;
  logger: Logger;
  /** The organisation's catalog (the preview flags unknown variables and other units); absent: not checked. */
  catalog?: ConsoleCatalog;
}

/**
 * The configuration editor of the console (Build the config → Configuration), issue 21 §3:
 *
 *   POST /console/api/config/check    dry-run check of a text (config-check.ts): never resolves a
 *                                     secret, never writes
 *   GET  /console/api/config          the file, every secret written in it hidden (confidential read)
 *   POST /console/api/config/preview  what Apply would do: problems, the diff, the secret changes
 *                                     and the confirmation that names this diff
 *   PUT  /console/api/config          Apply: `{yaml, confirm?}`
 *
 * The texts are read, checked and compared on the console's text worker (text-worker.ts), never on
 * the gateway's event loop. Apply keeps each text it writes in the configuration history and logs
 * what it changed (history-routes.ts shows the history and rolls back).
 *
 * Apply's rule for secrets (config-edit.ts `secretChanges`, README "Commissioning console"): an
 * edit that adds a `{env}`/`{file}` secret reference, or sends an existing secret to a new peer, is
 * refused when http.api_token is not set; with a token it is applied only when the request carries
 * `confirm`, the confirmation of the diff that the preview (or a 409 answer) showed.
 */
export function registerConfigRoutes(http: LocalHttpServer, deps: ConfigRouteDeps): ConfigWriter {
  const textSchema = z.strictObject({ yaml: z.string().max(5_000_000) });
  http.route('POST', '/console/api/config/check', async (ctx) => {
    const { yaml } = parseBody(textSchema, await ctx.json());
    const json: ConfigCheckResponse = await deps.texts.run({ job: 'check', yaml });
    return { json };
  }, { name: 'console config check' });

  const writer = new ConfigWriter(deps);

  http.route('GET', '/console/api/config', async () => {
    if (!deps.configPath) return { json: { path: null, yaml: null, note: 'this gateway was started without a configuration file' } satisfies ConfigReadResponse };
    const read = await deps.texts.run({ job: 'read', file: writer.currentText() ?? '' });
    const json: ConfigReadResponse = { path: deps.configPath, yaml: read.yaml, ...(read.too_large ? { note: 'this file is larger than the console edits (256 KiB): it is shown with every secret-like value hidden; edit it on the gateway' } : {}) };
    return { json };
  }, { name: 'console config read', access: 'confidential' });

  http.route('POST', '/console/api/config/preview', async (ctx) => {
    const { yaml } = parseBody(textSchema, await ctx.json());
    writer.requireFile();
    const p = await writer.prepare(yaml);
    if (!p.ok) return { json: { ok: false, problems: p.problems, more_problems: p.more } satisfies ConfigPreviewResponse };
    const refused = p.changes.length > 0 && writer.refusedWithoutToken();
    return { json: { ok: true, diff: p.diff, confirm: p.confirm, secret_changes: p.changes, refused, message: refused ? refusalText(p.changes) : null, warnings: p.warnings, catalog: { read_at: p.catalogReadAt, flags: p.catalogFlags } } satisfies ConfigPreviewResponse };
  }, { name: 'console config preview' });

  /** Apply: checked, validated as `run` validates, written over the file (atomically), kept in the history and reloaded. */
  const applySchema = textSchema.extend({ confirm: z.string().max(64).optional() });
  http.route('PUT', '/console/api/config', async (ctx) => {
    const { yaml, confirm } = parseBody(applySchema, await ctx.json());
    writer.requireFile();
    return writer.apply(await writer.prepare(yaml), { confirm, by: 'console apply', userAgent: userAgentOf(ctx), note: null, alwaysConfirm: false });
  }, { name: 'console config apply' });
  return writer;
}

export function userAgentOf(ctx: RouteContext): string | null {
  const ua = ctx.req.headers['user-agent'];
  return typeof ua === 'string' && ua ? ua.slice(0, 256) : null;
}

interface ApplyOptions {
  confirm: string | undefined;
  by: string;
  userAgent: string | null;
  note: string | null;
  /** A rollback is applied only with the confirmation of the diff it shows. */
  alwaysConfirm: boolean;
}

/** Writes the configuration file from the console (Apply, rollback), one write at a time. */
export class ConfigWriter {
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: ConfigRouteDeps) {}

  requireFile(): string {
    if (!this.deps.configPath) throw new HttpError(409, 'no_config_file', 'this gateway was started without a configuration file, so there is nothing to write; start it with --config FILE');
    return this.deps.configPath;
  }

  currentText(): string | null {
    if (!this.deps.configPath) return null;
    try {
      return readFileSync(this.deps.configPath, 'utf8');
    } catch (err) {
      throw new HttpError(500, 'config_unreadable', `${this.deps.configPath} cannot be read: ${describeError(err)}`);
    }
  }

  /** The posted text with its hidden secrets put back, checked, compared with the file (on the text worker). */
  prepare(posted: string): Promise<Prepared> {
    return this.deps.texts.run({ job: 'prepare', posted, current: this.currentText(), catalog: this.deps.catalog?.current() ?? null });
  }

  refusedWithoutToken(): boolean {
    return this.deps.config().http.api_token === undefined;
  }

  apply(p: Prepared, o: ApplyOptions) {
    const run = this.chain.then(() => this.applyNow(p, o));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async applyNow(p: Prepared, o: ApplyOptions) {
    const path = this.requireFile();
    if (!p.ok) return invalid(p.problems, p.more);
    // The file may have changed while the text was prepared: the diff shown must be the diff written.
    if (this.currentText() !== null && digestOf(this.currentText()!) !== p.currentDigest) return { status: 409, json: { error: { code: 'diff_changed', message: 'the configuration file changed while this was prepared; look at the new diff and apply again' } } satisfies ConfigApplyRefusal };
    if (p.changes.length > 0 && this.refusedWithoutToken()) {
      return { status: 403, json: { error: { code: 'secret_change_refused', message: refusalText(p.changes), field: 'yaml' }, secret_changes: p.changes } satisfies ConfigApplyRefusal };
    }
    if ((o.alwaysConfirm || p.changes.length > 0 || o.confirm !== undefined) && o.confirm !== p.confirm) {
      const message =
        o.confirm === undefined
          ? o.alwaysConfirm
            ? `look at the diff of this rollback and send it again with "confirm": "${p.confirm}"`
            : `this change sends secrets somewhere new (${p.changes.map(changeText).join('; ')}); look at the diff and apply again with "confirm": "${p.confirm}"`
          : 'the configuration file or the text changed since the diff was shown; look at the new diff and confirm again';
      return { status: 409, json: { error: { code: o.confirm === undefined ? 'confirm_required' : 'diff_changed', message }, diff: p.diff, confirm: p.confirm, secret_changes: p.changes } satisfies ConfigApplyRefusal };
    }
    // Validated exactly as `run` validates the file at start (issue 21 §3: Apply accepted
    // {env: UNSET_VAR}, reloaded with an empty password, and the next restart exited 2). The
    // secrets are registered for log redaction once applied, not before.
    let applied: GatewayConfig;
    try {
      applied = withDeferredRegistration(() => validateConfig(p.value)).config;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const r = await this.deps.texts.run({ job: 'locate', yaml: p.text, messages: err.problems.map((m) => `${m}`) });
      return invalid(r.problems, r.more);
    }
    const version = this.write(path, p.text, o);
    registerSecretsOf(applied);
    const log = this.deps.logger;
    try {
      const result = await this.deps.reload(applied, { digest: digestOf(p.text), by: o.by, version });
      if (version !== null) this.keep(() => this.deps.history.noteChanged(version, result.changed));
      log.info({ by: o.by, version, note: o.note, user_agent: o.userAgent, changed: result.changed, restart_required: result.restartRequired, restarted_sources: result.restartedSources, diff_lines: p.diff.split('\n').filter((l) => /^[-+][^-+]/.test(l)).length }, `configuration written and applied from the console (${o.by}${o.note ? `, ${o.note}` : ''}): ${result.changed.length ? `changed ${result.changed.join(', ')}` : 'no setting changed'}`);
      return { json: { written: path, version, changed: result.changed, restart_required: result.restartRequired, restarted_sources: result.restartedSources, secret_changes: p.changes } satisfies ConfigApplyResponse };
    } catch (err) {
      log.warn({ by: o.by, version, err: describeError(err) }, 'configuration written from the console, but the running gateway refused it');
      return { status: 409, json: { error: { code: 'reload_refused', message: `written to ${path}, but the running gateway refused it: ${describeError(err)}` } } satisfies ConfigApplyRefusal };
    }
  }

  /** The file written, the text it had kept first when the history does not hold it, then the new one. Returns the new version. */
  private write(path: string, text: string, o: ApplyOptions): number | null {
    const before = this.currentText();
    if (before !== null && this.deps.history.latest()?.digest !== digestOf(before)) this.keep(() => this.deps.history.record(before, { by: 'before console apply' }));
    try {
      writeConfigFile(path, text);
    } catch (err) {
      throw new HttpError(500, 'write_failed', `${path} was not written: ${describeError(err)}`);
    }
    return this.keep(() => this.deps.history.record(text, { by: o.by, userAgent: o.userAgent, note: o.note }).version) ?? null;
  }

  /** History is kept on a best-effort basis: a full disk there never refuses an Apply. */
  private keep<T>(fn: () => T): T | undefined {
    try {
      return fn();
    } catch (err) {
      this.deps.logger.warn({ err: describeError(err), dir: this.deps.history.dir }, 'the configuration history could not keep this version of the file');
      return undefined;
    }
  }
}

function invalid(problems: Array<{ path: string | null; line: number | null; message: string }>, more: number) {
  return { status: 400, json: { error: { code: 'config_invalid', message: `the configuration has ${problems.length + more} problem(s); nothing was written`, field: 'yaml' }, problems, more_problems: more } satisfies ConfigApplyRefusal };
}

function changeText(c: SecretChange): string {
  return `${c.setting}: ${c.secret} → ${c.destination} (${c.reason})`;
}

function refusalText(changes: SecretChange[]): string {
  return `refused: this change sends secrets somewhere new (${changes.map(changeText).join('; ')}), and http.api_token is not set, so the console cannot confirm who asks; edit the file on the gateway, or set http.api_token`;
}
