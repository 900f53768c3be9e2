/**
 * Benchmark: recovery after an outage of the tracking service (issue 12 §7). Under steady traffic
 * (20 variables every BENCH_INTERVAL_MS, default 40 ms: 500 samples/s; default max_in_flight 4, annotations and backfill as
 * configured by default), the emulator drops every connection for 10 s, 60 s and 10 min
 * (BENCH_OUTAGES, seconds). Measured: the time from the service's return to the first sample
 * stored at the emulator, and the requests the gateway made during the outage.
 *
 * Baseline in the same run, side by side on the same machine: the same gateway with the former
 * uplink health (bench/former-uplink-health.ts: every failed call a backoff step, 60 s cap, every
 * sender resumes at once). Target: ≤ 5 s after outages up to 60 s.
 *
 *   nice -n 5 npx tsx bench/outage-recovery.ts                 # 10 s, 60 s, 10 min: about 13 min
 *   BENCH_OUTAGES=10,60 BENCH_REPEATS=3 npx tsx bench/outage-recovery.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateConfig } from '../src/config/load.js';
import { silentLogger } from '../src/core/logger.js';
import { startEmulator, type EmulatorHandle } from '../src/emulator/index.js';
import { startGateway, type GatewayHandle, type StartOptions } from '../src/runtime/gateway.js';
import { DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID } from '../src/emulator/demo-fixture.js';
import { formerUplinkHealth } from './former-uplink-health.js';
import { envList, envNumber, NOISY_MACHINE_NOTE, smokeBanner, table, verdict } from './lib.js';

const OUTAGES = envList('BENCH_OUTAGES', '10,60,600', '2').map(Number);
const REPEATS = envNumber('BENCH_REPEATS', 1);
// The demo fixture's 20 generated variables (all known to the emulator: no refusals in the way).
const VARS = Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`);
const INTERVAL_MS = envNumber('BENCH_INTERVAL_MS', 40);
smokeBanner(`BENCH_OUTAGES ${OUTAGES.join(',')}`);
const TARGET_S = 5;

interface Rig {
  name: string;
  emu: EmulatorHandle;
  gw: GatewayHandle;
  dir: string;
}

async function rig(name: string, options: StartOptions): Promise<Rig> {
  const dir = mkdtempSync(join(tmpdir(), `gw-bench-outage-${name}-`));
  const emu = await startEmulator({ port: 0 });
  const { config } = validateConfig({
    gateway: { name: `outage-${name}`, data_dir: join(dir, 'data'), status_interval: 0 },
    log: { level: 'silent' },
    service: {
      base_url: emu.baseUrl,
      auth_url: emu.authUrl,
      organisation_id: DEMO_ORGANISATION_ID,
      auth: { mode: 'client_credentials', client_id: DEMO_CLIENT_ID, client_secret: DEMO_CLIENT_SECRET },
    },
    buffer: { path: join(dir, 'buffer.db') },
    http: { enabled: false },
    generator: [{ name: 'steady', variables: VARS, interval: INTERVAL_MS }],
  });
  const gw = await startGateway(config, { logger: silentLogger(), ...options });
  return { name, emu, gw, dir };
}

const stored = (r: Rig) => Object.values(r.emu.valueCounts()).reduce((a, b) => a + b, 0);
const retries = async (r: Rig) => {
  const m = await r.gw.metrics.uplinkRetries.get();
  return m.values.reduce((n, v) => n + v.value, 0);
};

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<number | null> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (check()) return performance.now();
    await new Promise((r) => setTimeout(r, 10));
  }
  return null;
}

/** One outage of `seconds` on a rig; returns seconds from the return to the first stored sample. */
async function outage(r: Rig, seconds: number): Promise<{ recovery: number | null; requests: number }> {
  // Steady state first: deliveries flowing.
  const before = stored(r);
  await waitUntil(() => stored(r) > before, 30_000);
  const retriesBefore = await retries(r);
  r.emu.setFaults({ outage_seconds: seconds });
  const back = performance.now() + seconds * 1000;
  await new Promise((res) => setTimeout(res, seconds * 1000));
  const during = stored(r);
  // Within the former 60 s cap plus jitter a delivery must come.
  const first = await waitUntil(() => stored(r) > during, 120_000);
  r.emu.clearFaults();
  return { recovery: first === null ? null : Math.max(0, (first - back) / 1000), requests: (await retries(r)) - retriesBefore };
}

const rigs = [await rig('former', { uplinkHealth: formerUplinkHealth }), await rig('now', {})];
const rows: Array<Record<string, string | number>> = [];
const verdicts: string[] = [];
try {
  for (const seconds of OUTAGES) {
    for (let i = 0; i < REPEATS; i++) {
      const [former, now] = await Promise.all(rigs.map((r) => outage(r, seconds)));
      const f = former.recovery;
      const n = now.recovery;
      rows.push({
        outage: seconds >= 60 ? `${seconds / 60} min` : `${seconds} s`,
        'former: recovery s': f === null ? '>120' : Math.round(f * 10) / 10,
        'now: recovery s': n === null ? '>120' : Math.round(n * 10) / 10,
        'ratio former/now': f !== null && n !== null && n > 0 ? Math.round((f / n) * 10) / 10 : '-',
        'former: failed requests': former.requests,
        'now: failed requests': now.requests,
      });
      console.log(`outage ${seconds} s #${i + 1}: former ${f?.toFixed(1) ?? '>120'} s, now ${n?.toFixed(1) ?? '>120'} s`);
      if (seconds <= 60) verdicts.push(verdict(n !== null && n <= TARGET_S, `recovery after a ${seconds} s outage: ${n?.toFixed(1) ?? '>120'} s (target ≤ ${TARGET_S} s)`));
    }
  }
} finally {
  for (const r of rigs) {
    await r.gw.close();
    await r.emu.close();
    rmSync(r.dir, { recursive: true, force: true });
  }
}

console.log(`\nRecovery after an outage of the tracking service: first sample stored after its return (${VARS.length} variables every ${INTERVAL_MS} ms, max_in_flight 4)\n`);
console.log(table(rows));
console.log(`\n${verdicts.join('\n')}`);
console.log(`\n${NOISY_MACHINE_NOTE}`);
