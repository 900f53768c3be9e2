import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { request } from 'undici';
import { loadConfigFile } from '../config/load.js';
import { bufferOwnedByRunningGateway } from '../store/file/owner-lock.js';
import { SetAsideStore, type SetAsideFilter, type SetAsideRow, type SetAsideSummary } from '../buffer/set-aside.js';
import { GatewayError } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { GATEWAY_SCHEMAS } from '../runtime/store-schemas.js';
import { Store } from '../store/store.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway set-aside list|requeue|drop [options]

Samples the tracking service refused (400 on a lone item, or rejected by an import job) are set
aside with the service's message instead of blocking the queue. Inspect them, put them back in the
queue (for example after the missing machine variable was created upstream), or drop them.

With --config, the command talks to the running gateway's local API; when no gateway answers, it
works on the buffer file directly.

Options:
  -c, --config FILE   the gateway's configuration (finds its HTTP port and buffer file)
      --url URL       a running gateway's base URL instead (http://127.0.0.1:8080)
      --db PATH       a buffer file instead (requeue and drop are refused while a gateway runs on it)
      --variable ID   only samples of this machine variable
      --id N          only this set-aside entry (repeatable)
      --all           every set-aside sample (requeue and drop need --all, --variable or --id)
      --limit N       list at most N entries (default 50)
      --json          print JSON
      --token TOKEN   bearer token for a gateway whose API listens beyond localhost
                      (default $GATEWAY_API_TOKEN)
  -h, --help          show this help`;

type Target = { kind: 'api'; base: string; token?: string } | { kind: 'file'; path: string };

export async function setAsideCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(
    argv,
    {
      config: { type: 'string', short: 'c' },
      url: { type: 'string' },
      db: { type: 'string' },
      variable: { type: 'string' },
      id: { type: 'string', multiple: true },
      all: { type: 'boolean' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
      token: { type: 'string' },
    },
    HELP,
  );
  if (!parsed) return 0;
  const [action] = parsed.positionals;
  if (!['list', 'requeue', 'drop'].includes(action ?? '')) throw new UsageError(`say list, requeue or drop (got ${action ? `"${action}"` : 'nothing'})\n\n${HELP}`);
  const v = parsed.values;
  const ids = (v.id ?? []).map((x) => {
    const n = Number(x);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--id: "${x}" is not an entry number`);
    return n;
  });
  const filter: SetAsideFilter = { ...(ids.length ? { ids } : {}), ...(v.variable ? { variable: v.variable } : {}), ...(v.all ? { all: true } : {}) };
  if (action !== 'list' && !filter.ids && !filter.variable && !filter.all) throw new UsageError(`${action} needs --all, --variable ID or --id N`);
  const limit = v.limit === undefined ? 50 : Number(v.limit);
  if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`--limit: "${v.limit}" is not a positive whole number`);
  const token = v.token ?? process.env.GATEWAY_API_TOKEN;

  const target = await chooseTarget(v.config, v.url, v.db, token);
  if (target.kind === 'api') {
    if (action === 'list') {
      const qs = new URLSearchParams({ limit: String(limit), ...(v.variable ? { variable: v.variable } : {}) });
      const body = (await api(target, 'GET', `/api/set-aside?${qs}`)) as SetAsideSummary & { rows: SetAsideRow[] };
      print(body, body.rows, v.json);
    } else {
      // A requeue runs in bounded steps on the gateway (2 M samples: tens of seconds on a busy machine).
      const body = (await api(target, 'POST', `/api/set-aside/${action}`, filter, action === 'requeue' ? 600_000 : 30_000)) as Record<string, number>;
      const what = action === 'requeue' ? `requeued ${body.requeued} sample(s)${body.remaining > 0 ? `, ${body.remaining} stay set aside` : ''}` : `dropped ${body.dropped} sample(s)`;
      process.stdout.write(v.json ? `${JSON.stringify(body)}\n` : `${what} (through the running gateway)\n`);
    }
    return 0;
  }
  if (!existsSync(target.path)) throw new UsageError(`buffer file ${target.path} does not exist`);
  // Requeue and drop change rows the running gateway tracks in memory; listing only reads.
  if (action !== 'list' && bufferOwnedByRunningGateway(target.path)) {
    throw new GatewayError(
      'BUFFER_IN_USE',
      `a gateway is running on ${target.path}; ${action} through it instead (--url http://HOST:PORT, or --config with http.enabled), or stop it first`,
    );
  }
  const db = new Database(target.path, { timeout: 5_000 });
  try {
    // Listing only reads (a gateway may be running on the file); requeue and drop write through the store.
    const store = new SetAsideStore(new Store(db, { schemas: GATEWAY_SCHEMAS, logger: silentLogger(), readOnly: action === 'list' }));
    if (action === 'list') print(store.summary(), store.list({ limit, variable: v.variable }), v.json);
    else if (action === 'requeue') {
      const n = store.requeueInFile(filter);
      process.stdout.write(v.json ? `${JSON.stringify({ requeued: n })}\n` : `requeued ${n} sample(s) into ${target.path}\n`);
    } else {
      const n = store.drop(filter);
      process.stdout.write(v.json ? `${JSON.stringify({ dropped: n })}\n` : `dropped ${n} sample(s) from ${target.path}\n`);
    }
  } finally {
    db.close();
  }
  return 0;
}

async function chooseTarget(config: string | undefined, url: string | undefined, db: string | undefined, token: string | undefined): Promise<Target> {
  if ([config, url, db].filter(Boolean).length !== 1) throw new UsageError('give exactly one of --config FILE, --url URL or --db PATH');
  if (url) return { kind: 'api', base: url.replace(/\/+$/, ''), token };
  if (db) return { kind: 'file', path: db };
  // Only the local API's address and buffer.path are needed: the gateway's secrets need not be set here.
  const { config: c } = loadConfigFile(config!, { requireSecrets: false });
  if (c.http.enabled) {
    const host = c.http.host === '0.0.0.0' || c.http.host === '::' ? '127.0.0.1' : c.http.host;
    const base = `http://${host.includes(':') ? `[${host}]` : host}:${c.http.port}`;
    try {
      const res = await request(`${base}/healthz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
      await res.body.dump();
      if (res.statusCode === 200) return { kind: 'api', base, token: token ?? (c.http.api_token?.reveal() || undefined) };
    } catch {
      // no gateway answers: work on the file
    }
  }
  return { kind: 'file', path: c.buffer.path };
}

async function api(target: Extract<Target, { kind: 'api' }>, method: 'GET' | 'POST', path: string, body?: unknown, timeoutMs = 30_000): Promise<unknown> {
  const res = await request(`${target.base}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(target.token ? { authorization: `Bearer ${target.token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const json = (await res.body.json().catch(() => ({}))) as { error?: { message?: string } };
  if (res.statusCode >= 300) throw new Error(`the gateway answered HTTP ${res.statusCode}: ${json.error?.message ?? ''}`);
  return json;
}

function print(summary: SetAsideSummary, rows: SetAsideRow[], json: boolean | undefined): void {
  if (json) {
    process.stdout.write(`${JSON.stringify({ ...summary, rows }, null, 2)}\n`);
    return;
  }
  if (summary.total === 0) {
    process.stdout.write('no samples are set aside\n');
    return;
  }
  const out = [`${summary.total} sample(s) set aside`, '', 'BY VARIABLE'];
  for (const b of summary.by_variable) out.push(`  ${String(b.variable ?? '(job note)').padEnd(28)} ${String(b.count).padStart(8)}  ${b.reason}`);
  out.push('', 'ENTRIES', `  ${'id'.padStart(6)}  ${'variable'.padEnd(28)} ${'timestamp'.padEnd(24)} ${'value'.padStart(12)}  path    reason`);
  for (const r of rows) {
    out.push(`  ${String(r.id).padStart(6)}  ${String(r.variable ?? '').padEnd(28)} ${(r.ts === null ? '' : new Date(r.ts).toISOString()).padEnd(24)} ${String(r.value ?? '').padStart(12)}  ${r.path.padEnd(6)}  ${r.reason}${r.job_id ? ` (${r.job_id})` : ''}`);
  }
  if (rows.length < summary.total) out.push(`  ... ${summary.total - rows.length} more (--limit)`);
  process.stdout.write(`${out.join('\n')}\n`);
}
