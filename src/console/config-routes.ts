import { readFileSync } from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { z } from 'zod';
import { parseConfigText } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { registerSecretsOf, withDeferredRegistration } from '../config/secrets.js';
import { ConfigError, describeError } from '../core/errors.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import { parseBody } from './build-tools.js';
import type { CheckProblem, ConfigApplyRefusal, ConfigApplyResponse, ConfigCheckResponse, ConfigPreviewResponse, ConfigReadResponse, SecretChange } from './api/config.js';
import type { ConsoleCatalog } from './catalog.js';
import { catalogFlags } from './catalog-flags.js';
import { checkConfigText, problemsFor } from './config-check.js';
import { configDiff, confirmationOf, maskSecrets, secretChanges, unmaskSecrets, writeConfigFile } from './config-edit.js';

export interface ConfigRouteDeps {
  config: () => GatewayConfig;
  configPath: string | null;
  /** Applies a validated configuration (the gateway's hot reload). */
  reload: (next: GatewayConfig) => Promise<{ changed: string[]; restartRequired: string[]; restartedSources: string[] }>;
  /** The organisation's catalog (the preview flags unknown variables and other units); absent: not checked. */
  catalog?: ConsoleCatalog;
}

/** Checks waiting or running at once; more get 429 (each is sliced, but their number is not). */
const MAX_QUEUED = 3;

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
 * Apply's rule for secrets (config-edit.ts `secretChanges`, README "Commissioning console"): an
 * edit that adds a `{env}`/`{file}` secret reference, or sends an existing secret to a new peer, is
 * refused when http.api_token is not set; with a token it is applied only when the request carries
 * `confirm`, the confirmation of the diff that the preview (or a 409 answer) showed.
 */
export function registerConfigRoutes(http: LocalHttpServer, deps: ConfigRouteDeps): void {
  let queued = 0;
  let chain: Promise<unknown> = Promise.resolve();
  const oneAtATime = <T>(fn: () => Promise<T>): Promise<T> => {
    if (queued >= MAX_QUEUED) throw new HttpError(429, 'busy', 'the gateway is checking other configurations; try again in a moment');
    queued += 1;
    const run = chain.then(fn);
    chain = run.catch(() => undefined);
    return run.finally(() => (queued -= 1));
  };

  const textSchema = z.strictObject({ yaml: z.string().max(5_000_000) });
  http.route('POST', '/console/api/config/check', async (ctx) => {
    const { yaml } = parseBody(textSchema, await ctx.json());
    const r = await oneAtATime(() => checkConfigText(yaml));
    const json: ConfigCheckResponse = { ok: r.ok, problems: r.problems, more_problems: r.more_problems, warnings: r.warnings, sources: r.sources };
    return { json };
  }, { name: 'console config check' });

  const currentText = (): string | null => {
    if (!deps.configPath) return null;
    try {
      return readFileSync(deps.configPath, 'utf8');
    } catch (err) {
      throw new HttpError(500, 'config_unreadable', `${deps.configPath} cannot be read: ${describeError(err)}`);
    }
  };

  http.route('GET', '/console/api/config', () => {
    const json: ConfigReadResponse = !deps.configPath
      ? { path: null, yaml: null, note: 'this gateway was started without a configuration file' }
      : { path: deps.configPath, yaml: maskSecrets(currentText() ?? '') };
    return { json };
  }, { name: 'console config read', access: 'confidential' });

  type Prepared =
    | { ok: false; problems: CheckProblem[]; more: number }
    | { ok: true; text: string; parsed: Awaited<ReturnType<typeof checkConfigText>>['parsed']; diff: string; confirm: string; changes: SecretChange[]; warnings: string[]; config: GatewayConfig };

  /** The posted text with its hidden secrets put back, checked, compared with the file. */
  const prepare = async (posted: string): Promise<Prepared> => {
    const current = currentText();
    const unmasked = unmaskSecrets(posted, current);
    if (unmasked.problems.length > 0) return { ok: false, problems: unmasked.problems, more: 0 };
    const next = await checkConfigText(unmasked.text);
    if (!next.ok || !next.config) return { ok: false, problems: next.problems, more: next.more_problems };
    const before = current === null ? null : ((await checkConfigText(current)).config ?? null);
    const changes = secretChanges(before, next.config);
    await nextTurn();
    const diff = configDiff(current, unmasked.text);
    return { ok: true, text: unmasked.text, parsed: next.parsed, diff, confirm: confirmationOf(diff), changes, warnings: next.warnings, config: next.config };
  };
  const refusedWithoutToken = () => deps.config().http.api_token === undefined;

  http.route('POST', '/console/api/config/preview', async (ctx) => {
    const { yaml } = parseBody(textSchema, await ctx.json());
    if (!deps.configPath) throw new HttpError(409, 'no_config_file', 'this gateway was started without a configuration file, so there is nothing to write; start it with --config FILE');
    const p = await oneAtATime(() => prepare(yaml));
    if (!p.ok) return { json: { ok: false, problems: p.problems, more_problems: p.more } satisfies ConfigPreviewResponse };
    const refused = p.changes.length > 0 && refusedWithoutToken();
    const catalog = deps.catalog?.current() ?? null;
    return { json: { ok: true, diff: p.diff, confirm: p.confirm, secret_changes: p.changes, refused, message: refused ? refusalText(p.changes) : null, warnings: p.warnings, catalog: { read_at: catalog?.read_at ?? null, flags: catalogFlags(p.config, catalog) } } satisfies ConfigPreviewResponse };
  }, { name: 'console config preview' });

  /** Apply: checked, validated as `run` validates, written over the file (atomically) and reloaded. */
  const applySchema = textSchema.extend({ confirm: z.string().max(64).optional() });
  http.route('PUT', '/console/api/config', async (ctx) => {
    const { yaml, confirm } = parseBody(applySchema, await ctx.json());
    const path = deps.configPath;
    if (!path) throw new HttpError(409, 'no_config_file', 'this gateway was started without a configuration file, so there is nothing to write; start it with --config FILE');
    return oneAtATime(async () => {
      const p = await prepare(yaml);
      if (!p.ok) return invalid(p.problems, p.more);
      if (p.changes.length > 0 && refusedWithoutToken()) {
        return { status: 403, json: { error: { code: 'secret_change_refused', message: refusalText(p.changes), field: 'yaml' }, secret_changes: p.changes } satisfies ConfigApplyRefusal };
      }
      if ((p.changes.length > 0 || confirm !== undefined) && confirm !== p.confirm) {
        const message = confirm === undefined
          ? `this change sends secrets somewhere new (${p.changes.map(changeText).join('; ')}); look at the diff and apply again with "confirm": "${p.confirm}"`
          : 'the configuration file or the text changed since the diff was shown; look at the new diff and confirm again';
        return { status: 409, json: { error: { code: confirm === undefined ? 'confirm_required' : 'diff_changed', message }, diff: p.diff, confirm: p.confirm, secret_changes: p.changes } satisfies ConfigApplyRefusal };
      }
      // Validated exactly as `run` validates the file at start (issue 21 §3: Apply accepted
      // {env: UNSET_VAR}, reloaded with an empty password, and the next restart exited 2). The
      // secrets are registered for log redaction once applied, not before.
      let applied: GatewayConfig;
      try {
        applied = withDeferredRegistration(() => parseConfigText(p.text, path)).config;
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        const r = problemsFor(err.problems, p.parsed);
        return invalid(r.problems, r.more);
      }
      try {
        writeConfigFile(path, p.text);
      } catch (err) {
        throw new HttpError(500, 'write_failed', `${path} was not written: ${describeError(err)}`);
      }
      registerSecretsOf(applied);
      try {
        const result = await deps.reload(applied);
        return { json: { written: path, changed: result.changed, restart_required: result.restartRequired, restarted_sources: result.restartedSources, secret_changes: p.changes } satisfies ConfigApplyResponse };
      } catch (err) {
        return { status: 409, json: { error: { code: 'reload_refused', message: `written to ${path}, but the running gateway refused it: ${describeError(err)}` } } satisfies ConfigApplyRefusal };
      }
    });
  }, { name: 'console config apply' });
}

function invalid(problems: CheckProblem[], more: number) {
  return { status: 400, json: { error: { code: 'config_invalid', message: `the configuration has ${problems.length + more} problem(s); nothing was written`, field: 'yaml' }, problems, more_problems: more } satisfies ConfigApplyRefusal };
}

function changeText(c: SecretChange): string {
  return `${c.setting}: ${c.secret} → ${c.destination} (${c.reason})`;
}

function refusalText(changes: SecretChange[]): string {
  return `refused: this change sends secrets somewhere new (${changes.map(changeText).join('; ')}), and http.api_token is not set, so the console cannot confirm who asks; edit the file on the gateway, or set http.api_token`;
}
