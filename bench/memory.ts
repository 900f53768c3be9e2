/**
 * Benchmark (e): memory. RSS of the gateway process holding a BENCH_BACKLOG-sample backlog
 * (default 20,000,000) while BENCH_LIVE live variables (default 5,000) arrive once a second.
 * Target: <= 150 MB.
 *
 * Two phases of BENCH_SECONDS each: offline (the service unreachable: the buffer grows, nothing is
 * sent) and online (the backlog drains through 128 MB import files beside the live sync path, the
 * heaviest moment for memory). The gateway is the compiled CLI in its own process (run `npm run
 * build` first); the emulator runs in another process.
 * Baseline in the same run: a bare Node.js process that opens the same buffer file with
 * better-sqlite3 and idles, the floor any Node.js gateway with this buffer starts from.
 *
 *   npm run build && npx tsx bench/memory.ts
 *   BENCH_BACKLOG=2000000 BENCH_SECONDS=20 npx tsx bench/memory.ts     # quick run
 *   SEAL_ROWS=20000 BENCH_VERBOSE=1 npx tsx bench/memory.ts               # buffer.seal_rows, RSS series
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envNumber, freePort, getJson, mb, NOISY_MACHINE_NOTE, postJson, ROOT, rssOf, rssSampler, SMOKE, smokeBanner, startEmulatorProcess, startGatewayProcess, table, verdict, type Proc } from './lib.js';
import { prefillBuffer } from './prefill.js';

const BACKLOG = envNumber('BENCH_BACKLOG', 20_000_000, 100_000);
const LIVE = envNumber('BENCH_LIVE', 5_000, 200);
const SECONDS = envNumber('BENCH_SECONDS', 60, 3);
/** How long the baseline process idles before its RSS is read. */
const BASELINE_IDLE_MS = SMOKE ? 1_000 : 5_000;
smokeBanner(`BENCH_BACKLOG ${BACKLOG.toLocaleString('en-US')}, BENCH_LIVE ${LIVE}, BENCH_SECONDS ${SECONDS}`);
const BACKLOG_VARS = Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`);

// A fixture with the live variables besides the demo ones.
const { DEMO_FIXTURE } = await import('../src/emulator/demo-fixture.js');
const liveVars = Array.from({ length: LIVE }, (_, i) => `mvr_live_${i + 1}`);
const fixture = { ...DEMO_FIXTURE, machine_variables: [...DEMO_FIXTURE.machine_variables, ...liveVars.map((id) => ({ id, name: id, machine: 'mch_gen1', unit: '' }))] };

const root = mkdtempSync(join(tmpdir(), 'gw-bench-mem-'));
const emu = await startEmulatorProcess({ port: await freePort(), dir: root, fixture, jobDelayMs: 200 });
let gw: Proc | null = null;
try {
  const dbPath = join(root, 'buffer.db');
  process.stdout.write(`prefilling ${BACKLOG.toLocaleString('en-US')} samples...\n`);
  await prefillBuffer(dbPath, BACKLOG, BACKLOG_VARS, Date.UTC(2026, 8, 1));

  // Baseline: Node.js + better-sqlite3 with the same file open, idle.
  const base = spawn(process.execPath, ['-e', `const D=require('better-sqlite3');const d=new D(${JSON.stringify(dbPath)});d.pragma('journal_mode=WAL');d.prepare('select count(*) from samples').get();console.log('ready');setInterval(()=>{},1000)`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  // Idle from when it has the file open (a busy machine can take seconds to start node).
  await new Promise<void>((resolve, reject) => {
    base.stdout!.once('data', () => resolve());
    base.once('exit', (code) => reject(new Error(`the baseline process exited (${code}) before it had the buffer open`)));
  });
  await new Promise((r) => setTimeout(r, BASELINE_IDLE_MS));
  const baselineRss = rssOf(base.pid!);
  base.kill();

  const httpPort = await freePort();
  await postJson(`${emu.base}/_emulator/faults`, { outage_seconds: SECONDS + 30 });
  gw = await startGatewayProcess(
    {
      gateway: { name: 'mem', data_dir: join(root, 'data'), status_interval: 0 },
      log: { level: 'info', format: 'json' },
      service: { base_url: `${emu.base}/tracking/v1`, auth_url: emu.base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' }, request_timeout: '10s' },
      buffer: { path: dbPath, max_bytes: '10GB', ...(process.env.SEAL_ROWS ? { seal_rows: Number(process.env.SEAL_ROWS) } : {}) },
      http: { enabled: true, port: httpPort },
      generator: [{ name: 'live', variables: { prefix: 'mvr_live_', count: LIVE }, interval: '1s' }],
    },
    root,
  );
  const offline = rssSampler(gw.child.pid!, 200);
  const detail = process.env.BENCH_VERBOSE
    ? setInterval(async () => {
        const s = await getJson<{ gateway: { memory: Record<string, number> }; backfill: { jobs: Array<{ state: string }> } }>(`http://127.0.0.1:${httpPort}/status`).catch(() => null);
        if (s) process.stdout.write(`  rss ${mb(s.gateway.memory.rss_bytes)} heap ${mb(s.gateway.memory.heap_used_bytes)} external ${mb(s.gateway.memory.external_bytes)} jobs ${s.backfill.jobs.map((j) => j.state).join(',')}\n`);
      }, 2_000)
    : null;
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const off = offline.stop();
  const offlinePeak = off.peak;
  const series = (xs: number[]) => xs.filter((_, i) => i % 25 === 0).map((v) => Math.round(v / 1048576)).join(' ');
  if (process.env.BENCH_VERBOSE) process.stdout.write(`offline RSS every 5 s (MB): ${series(off.samples)}\n`);

  await postJson(`${emu.base}/_emulator/faults`, { outage_seconds: 0 });
  await fetch(`${emu.base}/_emulator/faults`, { method: 'DELETE' });
  const online = rssSampler(gw.child.pid!, 200);
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const on = online.stop();
  if (detail) clearInterval(detail);
  const onlinePeak = on.peak;
  if (process.env.BENCH_VERBOSE) process.stdout.write(`online RSS every 5 s (MB): ${series(on.samples)}\n`);
  const status = await getJson<{ buffer: { samples: number }; backfill: { delivered_total: number; jobs_in_flight: number }; uplink: { sync: { delivered_total: number } } }>(`http://127.0.0.1:${httpPort}/status`);
  await gw.stop();
  gw = null;

  const peak = Math.max(offlinePeak, onlinePeak);
  process.stdout.write(`\nMemory: ${BACKLOG.toLocaleString('en-US')}-sample backlog, ${LIVE.toLocaleString('en-US')} live variables at 1 Hz, ${SECONDS} s per phase\n\n`);
  process.stdout.write(
    `${table([
      { process: 'baseline: node + better-sqlite3, same file, idle', 'peak RSS MB': mb(baselineRss), note: '' },
      { process: 'gateway, offline (buffering)', 'peak RSS MB': mb(offlinePeak), note: '' },
      { process: 'gateway, online (import jobs + live)', 'peak RSS MB': mb(onlinePeak), note: `delivered ${(status.backfill.delivered_total + status.uplink.sync.delivered_total).toLocaleString('en-US')}, ${status.buffer.samples.toLocaleString('en-US')} left` },
    ])}\n\nratio gateway peak / baseline = ${(peak / baselineRss).toFixed(2)}\n`,
  );
  process.stdout.write(`${verdict(peak <= 150 * 1024 * 1024, `RSS <= 150 MB (peak ${mb(peak)} MB)`)}\n${NOISY_MACHINE_NOTE}\n`);
} finally {
  await gw?.stop();
  await emu.stop();
  rmSync(root, { recursive: true, force: true });
}
