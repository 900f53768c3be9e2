import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { request } from 'undici';
import { GapLedger, type GapView } from '../buffer/gaps.js';
import { loadConfigFile } from '../config/load.js';
import { errorCode } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { GATEWAY_SCHEMAS } from '../runtime/store-schemas.js';
import { Store } from '../store/store.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway gaps list [options]

Intervals in which a source (or some of its variables) delivered no data: the gateway was stopped,
a source was disconnected, a device answered errors, or the full buffer dropped samples. For OPC UA
servers with history, the FILLED column says whether the gateway read the interval back from the
server's history (yes, partial, no, pending while it reads), and NOTE why not completely (no history
for some nodes, max_window, a server whose history answers broke the rules). With gaps.annotate:
true, unfilled gaps become annotations upstream (ANNOTATION column).

With --config, the command asks the running gateway's local API (GET /api/gaps); when no gateway
answers, it reads the buffer file.

Options:
  -c, --config FILE   the gateway's configuration (finds its HTTP port and buffer file)
      --url URL       a running gateway's base URL instead (http://127.0.0.1:8080)
      --db PATH       a buffer file instead
      --open          only gaps still open (default: all)
      --limit N       at most N gaps, newest first (default 50)
      --json          print JSON (the /api/gaps shape)
      --token TOKEN   bearer token for a gateway whose API listens beyond localhost
                      (default $GATEWAY_API_TOKEN)
  -h, --help          show this help`;

export async function gapsCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(
    argv,
    {
      config: { type: 'string', short: 'c' },
      url: { type: 'string' },
      db: { type: 'string' },
      open: { type: 'boolean' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
      token: { type: 'string' },
    },
    HELP,
  );
  if (!parsed) return 0;
  const [action] = parsed.positionals;
  if (action !== 'list') throw new UsageError(`say list (got ${action ? `"${action}"` : 'nothing'})\n\n${HELP}`);
  const v = parsed.values;
  const limit = v.limit === undefined ? 50 : Number(v.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError(`--limit: "${v.limit}" is not a whole number from 1 to 10000`);
  const state = v.open ? 'open' : 'all';
  if ([v.config, v.url, v.db].filter(Boolean).length !== 1) throw new UsageError('give exactly one of --config FILE, --url URL or --db PATH');
  const token = v.token ?? process.env.GATEWAY_API_TOKEN;

  let base: string | null = v.url ? v.url.replace(/\/+$/, '') : null;
  let file: string | null = v.db ?? null;
  if (v.config) {
    const { config: c } = loadConfigFile(v.config, { requireSecrets: false });
    file = c.buffer.path;
    if (c.http.enabled) {
      const host = c.http.host === '0.0.0.0' || c.http.host === '::' ? '127.0.0.1' : c.http.host;
      const candidate = `http://${host.includes(':') ? `[${host}]` : host}:${c.http.port}`;
      try {
        const res = await request(`${candidate}/healthz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
        await res.body.dump();
        if (res.statusCode === 200) base = candidate;
      } catch {
        // no gateway answers: read the file
      }
    }
  }

  let gaps: GapView[];
  if (base) {
    const res = await request(`${base}/api/gaps?state=${state}&limit=${limit}`, { headers: token ? { authorization: `Bearer ${token}` } : {}, headersTimeout: 30_000, bodyTimeout: 30_000 });
    const body = (await res.body.json().catch(() => ({}))) as { gaps?: GapView[]; error?: { message?: string } };
    if (res.statusCode >= 300 || !body.gaps) throw new Error(`the gateway answered HTTP ${res.statusCode}: ${body.error?.message ?? ''}`);
    gaps = body.gaps;
  } else {
    if (!file || !existsSync(file)) throw new UsageError(`buffer file ${file} does not exist`);
    const db = new Database(file, { readonly: true, fileMustExist: true, timeout: 5_000 });
    try {
      const ledger = new GapLedger(new Store(db, { schemas: GATEWAY_SCHEMAS, logger: silentLogger(), readOnly: true }).owner('gaps'));
      gaps = ledger.list({ state, limit }).map((g) => ledger.view(g));
    } catch (err) {
      // A file older than the gap ledger has none.
      if (/no such table/.test(String(err)) || errorCode(err, '') === 'BUFFER_SCHEMA_OLDER') gaps = [];
      else throw err;
    } finally {
      db.close();
    }
  }
  process.stdout.write(v.json ? `${JSON.stringify({ gaps }, null, 2)}\n` : formatGaps(gaps, state));
  return 0;
}

function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s}s`;
  if (s < 7_200) return `${Math.round(s / 60)}m`;
  return `${Math.floor(s / 3_600)}h${String(Math.round((s % 3_600) / 60)).padStart(2, '0')}m`;
}

/** The table `gaps list` prints. */
export function formatGaps(gaps: GapView[], state: 'open' | 'all', now = Date.now()): string {
  if (gaps.length === 0) return state === 'open' ? 'no open gaps: every source is delivering\n' : 'no gaps recorded\n';
  const rows = gaps.map((g) => [
    String(g.id),
    g.source,
    g.variables === null ? 'all' : g.variables.length <= 2 ? g.variables.join(',') : `${g.variables.length} variables`,
    new Date(g.from).toISOString(),
    g.to === null ? 'open' : new Date(g.to).toISOString(),
    duration((g.to ?? now) - g.from),
    g.reason,
    g.filled,
    g.annotation ? `${g.annotation.state} ${g.annotation.external_id}` : '-',
    g.note ?? '-',
  ]);
  const head = ['ID', 'SOURCE', 'VARIABLES', 'FROM', 'TO', 'LENGTH', 'REASON', 'FILLED', 'ANNOTATION', 'NOTE'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return `${[line(head), ...rows.map(line)].join('\n')}\n`;
}
