/**
 * Benchmark (b): sync uplink against the emulator. Does the gateway use its request budget (>= 95 %)
 * without ever exceeding the service's limit (0 x 429)?
 *
 * Scaled so it finishes in about two minutes: the budget is BENCH_BUDGET requests/min (default
 * 6,000) and the emulator's limit keeps the production headroom (1,500 / 1,400 of the budget). The
 * buffer is prefilled with more samples than the run can send, import jobs are off, so only the
 * sync path works. Baseline in the same run: a bare undici client that paces POSTs at exactly the
 * budget (fixed interval), against the same emulator. Both are measured at the emulator, over a
 * 60 s window after a warm-up.
 *
 *   npx tsx bench/uplink-budget.ts
 *   BENCH_SECONDS=20 npx tsx bench/uplink-budget.ts     # quick run
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { demoToken, envNumber, freePort, getJson, NOISY_MACHINE_NOTE, postJson, SMOKE, smokeBanner, startEmulatorProcess, startGatewayProcess, table, verdict } from './lib.js';
import { prefillBuffer } from './prefill.js';

const BUDGET = envNumber('BENCH_BUDGET', 6_000, 1_500);
const SECONDS = envNumber('BENCH_SECONDS', 60, 3);
const WARMUP = envNumber('BENCH_WARMUP', 10, 2);
/** Seconds of sending the backlog holds beyond the warm-up and the window. */
const BACKLOG_MARGIN_S = SMOKE ? 5 : 30;
smokeBanner(`BENCH_BUDGET ${BUDGET}, BENCH_SECONDS ${SECONDS}, BENCH_WARMUP ${WARMUP}`);
const LIMIT = Math.ceil((BUDGET * 1_500) / 1_400);
const VARS = Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`);

type Stats = { requests: Record<string, Record<string, number>>; rate_limited?: number };
const count = (s: Stats, status: string) => Object.entries(s.requests).reduce((n, [route, by]) => n + (route.startsWith('GET /_') ? 0 : by[status] ?? 0), 0);
const total = (s: Stats) => Object.entries(s.requests).reduce((n, [, by]) => n + Object.values(by).reduce((a, b) => a + b, 0), 0);

async function measure(emuBase: string, run: () => Promise<() => Promise<void>>): Promise<{ perMinute: number; rejected: number }> {
  await postJson(`${emuBase}/_emulator/reset`, {});
  const stop = await run();
  await new Promise((r) => setTimeout(r, WARMUP * 1000));
  const a = await getJson<Stats>(`${emuBase}/_emulator/stats`);
  await new Promise((r) => setTimeout(r, SECONDS * 1000));
  const b = await getJson<Stats>(`${emuBase}/_emulator/stats`);
  await stop();
  return { perMinute: ((total(b) - total(a)) / SECONDS) * 60, rejected: count(b, '429') };
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-budget-'));
const port = await freePort();
const emu = await startEmulatorProcess({ port, rateLimit: LIMIT, dir });
try {
  // Baseline: a paced client posting 200-item batches with a token fetched once.
  const baseline = await measure(emu.base, async () => {
    const agent = new Agent({ connections: 8 });
    const token = await demoToken(emu.base, agent);
    let n = 0;
    const t0 = performance.now();
    let running = true;
    const loop = (async () => {
      while (running) {
        const items = Array.from({ length: 200 }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1) + n * 200 + i).toISOString(), machine_variable_id: VARS[i % 20], value: i }));
        const res = await request(`${emu.base}/tracking/v1/machine-data/batch`, { method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token}`, 'service-organisation-id': 'org_demo', 'content-type': 'application/json' }, body: JSON.stringify({ items }) });
        await res.body.dump();
        n++;
        const due = t0 + (n * 60_000) / BUDGET;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    })();
    return async () => {
      running = false;
      await loop;
      await agent.close();
    };
  });

  const gwDir = join(dir, 'gw');
  const backlog = Math.ceil((BUDGET / 60) * 200 * (SECONDS + WARMUP + BACKLOG_MARGIN_S));
  await prefillBuffer(join(gwDir, 'buffer.db'), backlog, VARS, Date.UTC(2026, 1, 1));
  const gateway = await measure(emu.base, async () => {
    const gw = await startGatewayProcess(
      {
        gateway: { name: 'bench', data_dir: join(gwDir, 'data'), status_interval: 0 },
        log: { level: 'info', format: 'json' },
        service: { base_url: `${emu.base}/tracking/v1`, auth_url: emu.base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
        uplink: { requests_per_minute: BUDGET, max_in_flight: 8, backfill: { enabled: false } },
        buffer: { path: join(gwDir, 'buffer.db') },
        http: { enabled: false },
      },
      gwDir,
    );
    return () => gw.stop();
  });

  const ratioBudget = gateway.perMinute / BUDGET;
  process.stdout.write(`\nSync uplink vs emulator: budget ${BUDGET.toLocaleString('en-US')}/min, emulator limit ${LIMIT.toLocaleString('en-US')}/min, ${SECONDS} s measured after ${WARMUP} s warm-up\n\n`);
  process.stdout.write(
    `${table([
      { client: 'baseline: bare client paced at the budget', 'requests/min': Math.round(baseline.perMinute), '429s': baseline.rejected, 'of budget': `${((baseline.perMinute / BUDGET) * 100).toFixed(1)} %` },
      { client: 'gateway: sync sender + request budget', 'requests/min': Math.round(gateway.perMinute), '429s': gateway.rejected, 'of budget': `${(ratioBudget * 100).toFixed(1)} %` },
    ])}\n\nratio gateway / baseline = ${(gateway.perMinute / baseline.perMinute).toFixed(3)}\n`,
  );
  process.stdout.write(`${verdict(ratioBudget >= 0.95, `>= 95 % of the budget (${(ratioBudget * 100).toFixed(1)} %)`)}\n${verdict(gateway.rejected === 0, `0 x 429 (${gateway.rejected})`)}\n${NOISY_MACHINE_NOTE}\n`);
} finally {
  await emu.stop();
  rmSync(dir, { recursive: true, force: true });
}
