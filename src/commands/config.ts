import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { loadConfigFile, parseConfigText } from '../config/load.js';
import { withoutRequiredSecrets } from '../config/secrets.js';
import { ConfigHistory, digestOf, MAX_HISTORY_BYTES, MAX_VERSIONS, type HistoryEntry } from '../console/config-history.js';
import { configDiff, writeConfigFile } from '../console/config-edit.js';
import { ConfigError, describeError } from '../core/errors.js';
import { VERSION } from '../version.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway config history|show|rollback [VERSION] --config FILE [options]

The configuration file's history: every text the console's Apply or a rollback wrote, and every
edit of the file the running gateway reloaded, with when, what wrote it, the user agent and what
the reload changed. Kept in <gateway.data_dir>/config-history (the last ${MAX_VERSIONS} versions, ${MAX_HISTORY_BYTES / 1024 / 1024} MB of
text at most).

  history            list the versions, the newest first; * marks the one the file is now
  show VERSION       the diff of that version from the one before it (secrets hidden)
  rollback VERSION   write the file back to that version: prints the diff it would make; with
                     --yes writes it (checked first, kept in the history). A running gateway that
                     watches its file reloads it; otherwise send it SIGHUP

Options:
  -c, --config FILE   the gateway's configuration file (default $GATEWAY_CONFIG)
      --yes           rollback: write the file
      --json          history: print JSON
  -h, --help          show this help

Exit codes: 0 done, 1 the file could not be written, 2 a wrong option, an unknown version, or a
version that is not a valid configuration any more`;

export async function configCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: { type: 'string', short: 'c' }, yes: { type: 'boolean' }, json: { type: 'boolean' } }, HELP);
  if (!parsed) return 0;
  const [action, versionText] = parsed.positionals;
  if (!['history', 'show', 'rollback'].includes(action ?? '')) throw new UsageError(`say history, show or rollback (got ${action ? `"${action}"` : 'nothing'})\n\n${HELP}`);
  const file = parsed.values.config ?? process.env.GATEWAY_CONFIG;
  if (!file) throw new UsageError(`--config FILE is required (or set GATEWAY_CONFIG)\n\n${HELP}`);
  const loaded = loadConfigFile(file, { requireSecrets: false });
  const path = loaded.path!;
  const history = new ConfigHistory(loaded.config.gateway.data_dir);
  if (action === 'history') return list(history, readFileSync(path, 'utf8'), parsed.values.json === true);
  const version = Number(versionText);
  if (!versionText || !Number.isInteger(version) || version < 1) throw new UsageError(`${action} needs a version number (edge-gateway config history lists them)`);
  const text = history.text(version);
  if (text === null) throw new UsageError(`version ${version} is not in the configuration history of ${path} (${history.dir}); edge-gateway config history lists what is kept`);
  if (action === 'show') {
    const before = history.previous(version);
    process.stdout.write(`${describe(history.get(version)!)}\n\n${configDiff(before ? history.text(before.version) : '', text) || '(no change from the version before)\n'}`);
    return 0;
  }
  return rollback(history, path, version, text, parsed.values.yes === true);
}

function list(history: ConfigHistory, current: string, json: boolean): number {
  const versions = history.list().reverse();
  const digest = digestOf(current);
  if (json) {
    process.stdout.write(`${JSON.stringify({ dir: history.dir, current: versions.find((v) => v.digest === digest)?.version ?? null, versions }, null, 2)}\n`);
    return 0;
  }
  if (versions.length === 0) {
    process.stdout.write(`no versions kept yet in ${history.dir}: the console's Apply and the running gateway's reloads keep them\n`);
    return 0;
  }
  for (const v of versions) process.stdout.write(`${v.digest === digest ? '*' : ' '} ${describe(v)}\n`);
  if (!versions.some((v) => v.digest === digest)) process.stdout.write('  (the file has been edited since the newest version kept)\n');
  return 0;
}

function describe(v: HistoryEntry): string {
  const what = v.changed === null ? '' : v.changed.length ? `; changed ${v.changed.join(', ')}` : '; no setting changed';
  return `version ${v.version}  ${v.at}  ${v.by}${v.note ? ` (${v.note})` : ''}${v.user_agent ? `  [${v.user_agent}]` : ''}  ${v.bytes.toLocaleString('en-US')} bytes${what}`;
}

function rollback(history: ConfigHistory, path: string, version: number, text: string, yes: boolean): number {
  const current = readFileSync(path, 'utf8');
  if (current === text) {
    process.stdout.write(`${path} is version ${version} already; nothing to do\n`);
    return 0;
  }
  try {
    withoutRequiredSecrets(() => parseConfigText(text, `version ${version}`));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`edge-gateway config: version ${version} is not a valid configuration for this gateway any more, so it is not written:\n  ${err.problems.join('\n  ')}\n`);
    return 2;
  }
  process.stdout.write(configDiff(current, text));
  if (!yes) {
    process.stdout.write(`\nthis is what a rollback to version ${version} changes in ${path}; run again with --yes to write it\n`);
    return 0;
  }
  try {
    if (history.latest()?.digest !== digestOf(current)) history.record(current, { by: 'before cli rollback' });
    writeConfigFile(path, text);
    const entry = history.record(text, { by: 'cli rollback', userAgent: `edge-gateway ${VERSION} (${userName()})`, note: `rollback to version ${version}` });
    process.stdout.write(`\nwritten: ${path} is version ${version} again (kept as version ${entry.version}); a gateway watching the file reloads it, otherwise send it SIGHUP\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`edge-gateway config: ${path} was not written: ${describeError(err)}\n`);
    return 1;
  }
}

function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown user';
  }
}
