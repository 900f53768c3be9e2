import { z } from 'zod';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import type { ConfigHistoryResponse, ConfigVersionResponse } from './api/config.js';
import { parseBody } from './build-tools.js';
import { digestOf, type ConfigHistory } from './config-history.js';
import { userAgentOf, type ConfigWriter } from './config-routes.js';
import type { ConsoleTextWorker } from './text-worker.js';

export interface HistoryRouteDeps {
  history: ConfigHistory;
  writer: ConfigWriter;
  texts: ConsoleTextWorker;
}

/**
 * The configuration file's history (console/config-history.ts) beside the editor:
 *
 *   GET  /console/api/config/history           the versions kept: when, by what, from which user
 *                                               agent, what the reload changed
 *   GET  /console/api/config/history/:version  one version with its diff from the one before, and
 *                                               the diff a rollback to it would write (secrets hidden)
 *   POST /console/api/config/rollback          `{version, confirm?}`: the file written back to that
 *                                               version, as Apply writes (checked, the secrets rule,
 *                                               kept in the history, reloaded); always confirmed:
 *                                               the first request answers 409 with the diff and the
 *                                               confirmation that names it
 */
export function registerHistoryRoutes(http: LocalHttpServer, deps: HistoryRouteDeps): void {
  const { history, writer, texts } = deps;
  http.route('GET', '/console/api/config/history', () => {
    writer.requireFile();
    const current = writer.currentText();
    const digest = current === null ? null : digestOf(current);
    const versions = history.list().reverse();
    const json: ConfigHistoryResponse = { versions, current: versions.find((v) => v.digest === digest)?.version ?? null };
    return { json };
  }, { name: 'console config history', access: 'confidential' });

  http.route('GET', '/console/api/config/history/:version', async ({ params }) => {
    writer.requireFile();
    const version = Number(params.version);
    const entry = Number.isInteger(version) ? history.get(version) : null;
    const text = entry ? history.text(version) : null;
    if (!entry || text === null) throw new HttpError(404, 'no_such_version', `version ${params.version} is not in the configuration history (it keeps the last ${history.list().length} versions)`, 'version');
    const before = history.previous(version);
    const [diff, rollback] = await Promise.all([
      texts.run({ job: 'diff', before: before ? history.text(before.version) : '', after: text }),
      texts.run({ job: 'diff', before: writer.currentText(), after: text }),
    ]);
    const json: ConfigVersionResponse = { version: entry, diff: diff.diff, rollback_diff: rollback.diff };
    return { json };
  }, { name: 'console config version', access: 'confidential' });

  const rollbackSchema = z.strictObject({ version: z.number().int().min(1), confirm: z.string().max(64).optional() });
  http.route('POST', '/console/api/config/rollback', async (ctx) => {
    const { version, confirm } = parseBody(rollbackSchema, await ctx.json());
    writer.requireFile();
    const text = history.text(version);
    if (text === null) throw new HttpError(404, 'no_such_version', `version ${version} is not in the configuration history`, 'version');
    const p = await writer.prepare(text);
    return writer.apply(p, { confirm, by: 'console rollback', userAgent: userAgentOf(ctx), note: `rollback to version ${version}`, alwaysConfirm: true });
  }, { name: 'console config rollback' });
}
