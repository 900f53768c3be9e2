import BetterSqlite3 from 'better-sqlite3';
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { countUnsent } from '../buffer/chunks/store.js';
import { SetAsideStore } from '../buffer/set-aside.js';
import { loadConfigFile } from '../config/load.js';
import { silentLogger } from '../core/logger.js';
import { GATEWAY_SCHEMAS } from '../runtime/store-schemas.js';
import { Store } from '../store/store.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway backup (--config FILE | --db PATH) --to PATH

Writes a consistent copy of the buffer file (unsent samples, set-aside samples, import-job ledger,
annotation outbox) while the gateway keeps running. The copy is checked with integrity_check.

To restore: stop the gateway, put the copy at buffer.path (delete buffer.db-wal and buffer.db-shm
next to it), start the gateway. Samples in the copy that were delivered after it was taken are
sent again; the service stores a value sent twice once (same variable and timestamp).

Options:
  -c, --config FILE   the gateway's configuration (finds buffer.path)
      --db PATH       the buffer file instead
      --to PATH       where to write the copy (must not exist)
  -h, --help          show this help`;

export async function backupCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { config: { type: 'string', short: 'c' }, db: { type: 'string' }, to: { type: 'string' } }, HELP);
  if (!parsed) return 0;
  const { config, db, to } = parsed.values;
  if (!to) throw new UsageError(`--to PATH is required\n\n${HELP}`);
  if (!config === !db) throw new UsageError(`give either --config FILE or --db PATH\n\n${HELP}`);
  const source = resolve(db ?? loadConfigFile(config!, { requireSecrets: false }).config.buffer.path);
  const target = resolve(to);
  if (!existsSync(source)) {
    process.stderr.write(`edge-gateway backup: ${db ? '--db' : 'buffer.path'}: ${source} does not exist\n`);
    return 1;
  }
  if (existsSync(target)) {
    process.stderr.write(`edge-gateway backup: --to: ${target} already exists; choose a new file\n`);
    return 1;
  }
  const started = performance.now();
  // VACUUM INTO copies one read snapshot: in WAL mode it never blocks the running gateway's writes,
  // and unlike the page-by-page backup API it does not restart each time the gateway commits.
  const src = new BetterSqlite3(source, { readonly: true, fileMustExist: true, timeout: 10_000 });
  try {
    src.prepare('VACUUM INTO ?').run(target);
  } finally {
    src.close();
  }
  const copy = new BetterSqlite3(target, { readonly: true });
  let check: unknown;
  let samples = 0;
  let setAside = 0;
  try {
    check = copy.pragma('integrity_check', { simple: true });
    samples = countUnsent(copy);
    setAside = new SetAsideStore(new Store(copy, { schemas: GATEWAY_SCHEMAS, logger: silentLogger(), readOnly: true })).total();
  } finally {
    copy.close();
  }
  if (check !== 'ok') {
    process.stderr.write(`edge-gateway backup: the copy at ${target} failed integrity_check: ${String(check)}\n`);
    return 1;
  }
  const mb = (statSync(target).size / 1_048_576).toFixed(1);
  process.stdout.write(
    `backup written: ${target} (${mb} MB, ${samples.toLocaleString('en-US')} unsent samples, ${setAside.toLocaleString('en-US')} set aside; integrity ok; ${Math.round(performance.now() - started)} ms)\n`,
  );
  return 0;
}
