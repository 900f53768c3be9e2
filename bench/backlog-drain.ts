/**
 * Benchmark (d): backlog drain. A gateway that was offline holds BENCH_BACKLOG samples (default
 * 5,000,000) when the link comes back; live samples keep arriving. Measures the time until the whole
 * backlog is stored at the emulator, the gateway's peak RSS, and the age of the freshest live value
 * upstream during the drain (target <= 5 s).
 *
 * Baseline in the same run: the same gateway with import jobs off (sync path only) for
 * BENCH_BASELINE_SECONDS, whose drain rate gives the time the sync path alone would need.
 * Gateway and emulator run in separate processes; default budget (1,400/min) and emulator limit
 * (1,500/min).
 *
 *   npx tsx bench/backlog-drain.ts
 *   BENCH_BACKLOG=1000000 npx tsx bench/backlog-drain.ts     # quick run
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { envNumber, freePort, getJson, mb, NOISY_MACHINE_NOTE, postJson, rssSampler, SMOKE, smokeBanner, startEmulatorProcess, startGatewayProcess, table, verdict, type Proc } from './lib.js';
import { prefillBuffer } from './prefill.js';

const BACKLOG = envNumber('BENCH_BACKLOG', 5_000_000, 200_000);
const BASELINE_SECONDS = envNumber('BENCH_BASELINE_SECONDS', 30, 3);
/** Samples in the baseline's buffer: more than the sync path sends in BASELINE_SECONDS (~4,700/s). */
const BASELINE_BACKLOG = SMOKE ? 50_000 : 1_000_000;
/** Left out of the sync rate and of the freshness: the gateway's start-up and token request. */
const START_UP_S = SMOKE ? 2 : 5;
/**
 * The import-job threshold (uplink.backfill.threshold): the default (5 min of sync capacity,
 * ~400,000 samples) under the full backlog; the smallest allowed in a smoke run, so its small
 * backlog still goes through import jobs.
 */
const THRESHOLD = SMOKE ? '10s' : undefined;
const BACKLOG_VARS = Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`);
const LIVE_VARS = ['mvr_press1_temperature', 'mvr_press1_pressure', 'mvr_press1_speed', 'mvr_mixer1_power', 'mvr_packer1_rate'];
const LIVE_PROBE = LIVE_VARS[0];

function gatewayConfig(dir: string, base: string, httpPort: number, backfill: boolean) {
  return {
    gateway: { name: 'drain', data_dir: join(dir, 'data'), status_interval: 0 },
    log: { level: 'info', format: 'json' },
    service: { base_url: `${base}/tracking/v1`, auth_url: base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
    uplink: { backfill: { enabled: backfill, ...(THRESHOLD ? { threshold: THRESHOLD } : {}) } },
    buffer: { path: join(dir, 'buffer.db') },
    http: { enabled: true, port: httpPort },
    generator: [{ name: 'live', variables: LIVE_VARS, interval: 200 }],
  };
}

const storedBacklog = async (base: string) => {
  const counts = await getJson<Record<string, number>>(`${base}/_emulator/values`);
  return BACKLOG_VARS.reduce((n, v) => n + (counts[v] ?? 0), 0);
};

smokeBanner(`BENCH_BACKLOG ${BACKLOG.toLocaleString('en-US')}, BENCH_BASELINE_SECONDS ${BASELINE_SECONDS}, baseline backlog ${BASELINE_BACKLOG.toLocaleString('en-US')}, uplink.backfill.threshold ${THRESHOLD}`);
const root = mkdtempSync(join(tmpdir(), 'gw-bench-drain-'));
const emu = await startEmulatorProcess({ port: await freePort(), dir: root, jobDelayMs: 200 });
let gw: Proc | null = null;
try {
  // ---- baseline: sync path only
  const baseDir = join(root, 'baseline');
  await prefillBuffer(join(baseDir, 'buffer.db'), BASELINE_BACKLOG, BACKLOG_VARS, Date.UTC(2026, 9, 1));
  gw = await startGatewayProcess(gatewayConfig(baseDir, emu.base, await freePort(), false), baseDir);
  await new Promise((r) => setTimeout(r, START_UP_S * 1_000));
  // On a busy machine the first batch can take longer than that: the window starts after it.
  for (const deadline = performance.now() + 120_000; (await storedBacklog(emu.base)) === 0; ) {
    if (performance.now() > deadline) throw new Error('the baseline gateway delivered nothing in 2 minutes');
    await new Promise((r) => setTimeout(r, 200));
  }
  const b0 = await storedBacklog(emu.base);
  await new Promise((r) => setTimeout(r, BASELINE_SECONDS * 1000));
  const b1 = await storedBacklog(emu.base);
  await gw.stop();
  gw = null;
  const syncRate = (b1 - b0) / BASELINE_SECONDS;
  await postJson(`${emu.base}/_emulator/reset`, {});

  // ---- gateway with import jobs beside the live path
  const dir = join(root, 'drain');
  process.stdout.write(`prefilling ${BACKLOG.toLocaleString('en-US')} samples...\n`);
  await prefillBuffer(join(dir, 'buffer.db'), BACKLOG, BACKLOG_VARS, Date.UTC(2026, 9, 1));
  const httpPort = await freePort();
  const t0 = performance.now();
  gw = await startGatewayProcess(gatewayConfig(dir, emu.base, httpPort, true), dir);
  const rss = rssSampler(gw.child.pid!, 200);
  const ages: number[] = [];
  let jobs = 0;
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_000));
    const values = await getJson<Array<{ timestamp: string }>>(`${emu.base}/_emulator/values?machine_variable_id=${LIVE_PROBE}`);
    if (values.length > 0) ages.push((Date.now() - Date.parse(values[values.length - 1].timestamp)) / 1000);
    const stored = await storedBacklog(emu.base);
    if (stored >= BACKLOG) break;
    if (performance.now() - t0 > 1_800_000) throw new Error(`not drained after 30 minutes (${stored} of ${BACKLOG})`);
  }
  const seconds = (performance.now() - t0) / 1000;
  jobs = (await getJson<unknown[]>(`${emu.base}/_emulator/import-jobs`)).length;
  const peak = rss.stop().peak;
  await gw.stop();
  gw = null;

  const steady = ages.slice(START_UP_S); // one a second; the first include start-up and the token request
  const sorted = [...steady].sort((a, b) => a - b);
  // None when the drain was over within the start-up seconds: then nothing was measured.
  const freshness = sorted.length > 0 ? { p50: sorted[Math.floor(sorted.length / 2)], max: sorted[sorted.length - 1] } : null;
  const syncOnlySeconds = BACKLOG / syncRate;
  process.stdout.write(`\nBacklog drain: ${BACKLOG.toLocaleString('en-US')} samples, ${LIVE_VARS.length} live variables at 5 Hz, budget 1,400/min\n\n`);
  process.stdout.write(
    `${table([
      { path: 'baseline: sync path only (measured rate, projected)', 'samples/s': Math.round(syncRate), 'drain time s': Math.round(syncOnlySeconds), 'peak RSS MB': '-', 'freshest age s (p50 / max)': '-' },
      { path: 'gateway: import jobs + live sync path', 'samples/s': Math.round(BACKLOG / seconds), 'drain time s': Math.round(seconds), 'peak RSS MB': mb(peak), 'freshest age s (p50 / max)': freshness ? `${freshness.p50.toFixed(1)} / ${freshness.max.toFixed(1)}` : 'not measured' },
    ])}\n\nimport jobs: ${jobs}; speed-up over the sync path alone = ${(syncOnlySeconds / seconds).toFixed(1)}x\n`,
  );
  if (freshness) process.stdout.write(`${verdict(freshness.max <= 5, `freshest live value upstream <= 5 s old during the drain (max ${freshness.max.toFixed(1)} s)`)}\n`);
  else process.stdout.write(`freshness not measured: the drain took ${seconds.toFixed(1)} s, within the ${START_UP_S} s of start-up left out (BENCH_BACKLOG larger measures it)\n`);
  process.stdout.write(`${NOISY_MACHINE_NOTE}\n`);
} finally {
  await gw?.stop();
  await emu.stop();
  rmSync(root, { recursive: true, force: true });
}
