import { request } from 'undici';
import { loadConfigFile } from '../config/load.js';
import { formatDuration, statusLine, type GatewayStatus } from '../runtime/status.js';
import { parseFlags, UsageError } from './flags.js';

const HELP = `Usage: edge-gateway status [--url URL | --config FILE] [--json] [--watch SECONDS]

Shows the status of a running gateway (from its /status endpoint).

Options:
  -u, --url URL        base URL of the gateway's HTTP server (default http://127.0.0.1:8080)
  -c, --config FILE    read http.host and http.port from this configuration instead
      --json           print the raw JSON
  -w, --watch SECONDS  refresh every SECONDS until Ctrl-C
  -h, --help           show this help`;

export async function statusCommand(argv: string[]): Promise<number> {
  const parsed = parseFlags(argv, { url: { type: 'string', short: 'u' }, config: { type: 'string', short: 'c' }, json: { type: 'boolean' }, watch: { type: 'string', short: 'w' } }, HELP);
  if (!parsed) return 0;
  let base = parsed.values.url ?? 'http://127.0.0.1:8080';
  if (parsed.values.config) {
    const { config } = loadConfigFile(parsed.values.config);
    const host = config.http.host === '0.0.0.0' || config.http.host === '::' ? '127.0.0.1' : config.http.host;
    base = `http://${host.includes(':') ? `[${host}]` : host}:${config.http.port}`;
  }
  const watch = parsed.values.watch === undefined ? 0 : Number(parsed.values.watch);
  if (!Number.isFinite(watch) || watch < 0) throw new UsageError(`--watch: "${parsed.values.watch}" is not a number of seconds`);
  for (;;) {
    let status: GatewayStatus;
    try {
      const res = await request(`${base.replace(/\/+$/, '')}/status`, { headersTimeout: 5_000, bodyTimeout: 5_000 });
      if (res.statusCode !== 200) {
        process.stderr.write(`edge-gateway status: ${base}/status answered HTTP ${res.statusCode}\n`);
        return 1;
      }
      status = (await res.body.json()) as GatewayStatus;
    } catch (err) {
      process.stderr.write(`edge-gateway status: no gateway answers at ${base} (${(err as Error).message}). Is it running, and is http.enabled true?\n`);
      return 1;
    }
    if (watch > 0 && process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
    process.stdout.write(parsed.values.json ? `${JSON.stringify(status, null, 2)}\n` : renderStatus(status));
    if (watch <= 0) return 0;
    await new Promise((r) => setTimeout(r, watch * 1000));
  }
}

const n = (x: number) => Math.round(x).toLocaleString('en-US');

export function progressBar(fraction: number, width = 30): string {
  const f = Math.max(0, Math.min(1, fraction));
  const full = Math.round(f * width);
  return `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${(f * 100).toFixed(1)}%`;
}

/** Human-readable status for operators. */
export function renderStatus(s: GatewayStatus): string {
  const out: string[] = [];
  out.push(`${s.gateway.name} ${s.gateway.version}, up ${formatDuration(s.gateway.uptime_s)} (pid ${s.gateway.pid})`);
  out.push('');
  out.push('SOURCES');
  if (s.sources.length === 0) out.push('  (none configured)');
  for (const src of s.sources) {
    const refused = Object.entries(src.samplesRefused).map(([k, v]) => `${k} ${n(v)}`).join(', ');
    out.push(`  ${src.name.padEnd(20)} ${src.kind.padEnd(9)} ${src.state.padEnd(12)} read ${n(src.samplesRead)}${refused ? `, refused: ${refused}` : ''}${src.lastError ? `, last error: ${src.lastError.message}` : ''}`);
  }
  out.push('');
  out.push('BUFFER');
  out.push(`  unsent ${n(s.buffer.samples)} samples (oldest ${s.buffer.oldest_unsent_age_s === null ? '-' : formatDuration(s.buffer.oldest_unsent_age_s)} old), ${n(s.buffer.used_bytes)} of ${n(s.buffer.max_bytes)} bytes${s.buffer.writable ? '' : `, NOT WRITABLE (${s.buffer.last_write_error?.code})`}`);
  out.push(`  committed ${n(s.buffer.committed_total)}, dropped ${n(s.buffer.dropped_total)}${s.buffer.full_episode ? ` (full now: ${s.buffer.full_episode.policy}, ${n(s.buffer.full_episode.samplesLost)} lost)` : ''}, set aside ${n(s.set_aside.samples)}`);
  out.push('');
  out.push('UPLINK');
  out.push(`  ${s.uplink.condition}${s.uplink.reason ? ` (${s.uplink.reason})` : ''}, ${n(s.uplink.requests_last_minute)} of ${n(s.uplink.budget_per_minute)} requests in the last minute`);
  out.push(`  sync: ${s.uplink.sync.rate_per_s.toFixed(1)} samples/s, delivered ${n(s.uplink.sync.delivered_total)}, freshest value ${s.uplink.freshest_delivered_age_s === null ? '-' : `${s.uplink.freshest_delivered_age_s.toFixed(1)} s`} old`);
  const bf = s.backfill;
  out.push(`  import jobs: ${bf.enabled ? `${bf.jobs_in_flight} in flight, ${bf.rate_per_s.toFixed(1)} samples/s, delivered ${n(bf.delivered_total)}, failed ${n(bf.failed_total)}` : 'off'}`);
  for (const j of bf.jobs) out.push(`    #${j.ledger_id} ${j.state}${j.job_id ? ` ${j.job_id}` : ''}${j.items ? `, ${n(j.items)} samples` : ''}${j.bytes ? `, ${n(j.bytes)} bytes` : ''}`);
  if (s.buffer.samples > 0) {
    const start = Math.max(bf.backlog_at_start, s.buffer.samples);
    out.push(`  backlog ${progressBar(1 - s.buffer.samples / start)} ETA ${formatDuration(s.backlog_eta_s)}`);
  }
  out.push('');
  out.push(statusLine(s));
  return `${out.join('\n')}\n`;
}
