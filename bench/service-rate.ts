/**
 * Benchmark: does the gateway find the service's real rate limit, use what is left of it, roll its
 * backlog into import jobs from what it measures, and say honestly when the backlog drains?
 *
 * The emulator runs in its own process over real HTTP with a limit of L requests/min per address
 * (§8); a second client on the same address (127.0.0.1) spends BENCH_NEIGHBOUR_SHARE of it (25 %),
 * paced evenly, in this process, with its own API key. The gateway runs in this process with the
 * default configuration (uplink.requests_per_minute 1,400: a ceiling far above L) and a durable
 * buffer on disk.
 *
 * Part A, for each L in BENCH_LIMITS (30, 120, 600, 1500): a backlog larger than the run can send,
 * import jobs off, so every request is a 200-item batch (or a token call). Measured after the first
 * minute for BENCH_SECONDS: the gateway's 429s (its own /metrics), the shortest time from a 429 to
 * the gateway's next request (the emulator's journal), and the samples delivered per minute against
 * the baseline measured in the same run: a bare client that knows the remaining limit (L less what
 * the second client was admitted) and paces 200-item batches at exactly that rate, against the same
 * emulator and second client.
 *
 * Part B, at L = 120 with the second client: a generator source at 1,000 samples/s for
 * BENCH_INGEST_SECONDS, then the source is removed (a configuration reload) and the backlog drains.
 * Every committed sample must be delivered, the oldest unsent stay at most 5 min, and the drain
 * estimate the status reports (the first "draining" after the ingest stopped, and each one after)
 * lie within ±50 % of the time the drain really took.
 *
 *   npx tsx bench/service-rate.ts
 *   BENCH_SECONDS=60 BENCH_INGEST_SECONDS=120 BENCH_LIMITS=120 npx tsx bench/service-rate.ts   # a short run
 *   BENCH_ONLY=A | B                                                                                # one part
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { Agent, request } from 'undici';
import { validateConfig } from '../src/config/load.js';
import { createLogger, silentLogger } from '../src/core/logger.js';
import { startGateway, type GatewayHandle } from '../src/runtime/gateway.js';
import type { GatewayStatus } from '../src/status/model.js';
import { demoToken, freePort, getJson, median, NOISY_MACHINE_NOTE, postJson, startCli, table, verdict, type Proc } from './lib.js';
import { prefillBuffer } from './prefill.js';

const LIMITS = (process.env.BENCH_LIMITS ?? '30,120,600,1500').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 180);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 60);
const BASELINE_SECONDS = Number(process.env.BENCH_BASELINE_SECONDS ?? Math.min(SECONDS, 90));
const NEIGHBOUR_SHARE = Number(process.env.BENCH_NEIGHBOUR_SHARE ?? 0.25);
const INGEST_SECONDS = Number(process.env.BENCH_INGEST_SECONDS ?? 360);
const INGEST_PER_S = Number(process.env.BENCH_INGEST_PER_S ?? 1_000);
const ONLY = process.env.BENCH_ONLY ?? '';
const VARS = Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`);
const JOURNAL = 20_000;

const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));
const dir = mkdtempSync(join(tmpdir(), 'gw-bench-rate-'));

interface Emu extends Proc {
  base: string;
}

async function startEmu(limit: number): Promise<Emu> {
  const port = await freePort();
  const p = await startCli(['emulator', '--port', String(port), '--rate-limit', String(limit), '--job-delay', '500', '--journal-size', String(JOURNAL)], /tracking\/v1/);
  return { ...p, base: `http://127.0.0.1:${port}` };
}

/**
 * The second client behind the same address: GET /machines at `perMinute`, evenly, whatever it is
 * answered; when the machine stalls it does not catch up in a burst (its schedule moves on).
 */
function neighbour(base: string, perMinute: number): { counts(): { sent: number; admitted: number }; stop(): Promise<{ sent: number; admitted: number }> } {
  const agent = new Agent({ connections: 2 });
  let running = perMinute > 0;
  let sent = 0;
  let admitted = 0;
  const loop = (async () => {
    let next = performance.now();
    while (running) {
      try {
        const res = await request(`${base}/tracking/v1/machines?limit=1`, { dispatcher: agent, headers: { authorization: 'Bearer demo-api-key', 'service-organisation-id': 'org_demo' } });
        await res.body.dump();
        sent += 1;
        if (res.statusCode !== 429) admitted += 1;
      } catch {
        /* the emulator stopping */
      }
      next = Math.max(next + 60_000 / perMinute, performance.now());
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  })();
  let stopped: Promise<{ sent: number; admitted: number }> | null = null;
  return {
    counts: () => ({ sent, admitted }),
    stop() {
      running = false;
      stopped ??= loop.then(async () => {
        await agent.close();
        return { sent, admitted };
      });
      return stopped;
    },
  };
}

function gatewayConfig(emu: Emu, gwDir: string, extra: { uplink?: Record<string, unknown>; generator?: unknown[] } = {}) {
  return validateConfig({
    gateway: { name: 'bench-rate', data_dir: join(gwDir, 'data'), status_interval: 0 },
    log: { level: 'silent' },
    service: { base_url: `${emu.base}/tracking/v1`, auth_url: emu.base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
    uplink: { ...extra.uplink },
    buffer: { path: join(gwDir, 'buffer.db') },
    http: { enabled: false },
    generator: extra.generator ?? [],
  }).config;
}

/** The gateway's own requests and 429s, from its metrics. */
async function ownRequests(gw: GatewayHandle): Promise<{ total: number; r429: number }> {
  let total = 0;
  let r429 = 0;
  for (const m of (await gw.metrics.registry.getSingleMetric('gateway_uplink_requests_total')!.get()).values) {
    total += m.value;
    if (m.labels.status === '429') r429 += m.value;
  }
  return { total, r429 };
}

const deliveredOf = (gw: GatewayHandle) => gw.sync.stats().deliveredTotal + gw.backfill.stats().delivered_total;

interface JournalEntry {
  at: string;
  status: number | 'dropped';
  path: string;
}

/**
 * Shortest gap (s) between a 429 to the gateway after `since` (epoch ms) and its next request sent
 * after the 429 arrived: requests within IN_FLIGHT_MS of it were on the wire already.
 */
const IN_FLIGHT_MS = 50;
async function fastestRetry(emu: Emu, since: number): Promise<number | null> {
  const { requests } = await getJson<{ requests: JournalEntry[] }>(`${emu.base}/_emulator/requests?limit=${JOURNAL}`);
  // The gateway's requests: all but the second client's GET /machines (a 429 from the limiter
  // comes before authentication, so the journal does not know whose it was).
  const own = requests.filter((r) => r.path !== '/tracking/v1/machines').map((r) => ({ t: Date.parse(r.at), status: r.status }));
  let fastest: number | null = null;
  for (let i = 0; i + 1 < own.length; i++) {
    if (own[i].status !== 429 || own[i].t < since) continue;
    const next = own.slice(i + 1).find((r) => r.t - own[i].t > IN_FLIGHT_MS);
    if (!next) continue;
    const gap = (next.t - own[i].t) / 1000;
    if (fastest === null || gap < fastest) fastest = gap;
  }
  return fastest;
}

interface RateRow {
  limit: number;
  neighbourPerMin: number;
  remainingPerMin: number;
  gwRequestsPerMin: number;
  r429Pct: number;
  fastestRetryS: number | null;
  foundPerMin: number | null;
  deliveredPerMin: number;
  baselinePerMin: number;
}

/** The oracle: 200-item batches at exactly the remaining limit, with a token fetched once. */
async function baseline(emu: Emu, remainingPerMin: number, neighbourPerMin: number): Promise<number> {
  await postJson(`${emu.base}/_emulator/reset`, {});
  const n = neighbour(emu.base, neighbourPerMin);
  const agent = new Agent({ connections: 4 });
  const token = await demoToken(emu.base, agent);
  let delivered = 0;
  let sent = 0;
  const t0 = performance.now();
  const until = t0 + BASELINE_SECONDS * 1000;
  while (performance.now() < until) {
    const items = Array.from({ length: 200 }, (_, i) => ({ timestamp: new Date(Date.UTC(2026, 0, 1) + sent * 200 + i).toISOString(), machine_variable_id: VARS[i % 20], value: i }));
    const res = await request(`${emu.base}/tracking/v1/machine-data/batch`, { method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token}`, 'service-organisation-id': 'org_demo', 'content-type': 'application/json' }, body: JSON.stringify({ items }) });
    await res.body.dump();
    if (res.statusCode === 200) delivered += 200;
    sent += 1;
    const wait = t0 + (sent * 60_000) / remainingPerMin - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  const seconds = (performance.now() - t0) / 1000;
  await n.stop();
  await agent.close();
  return (delivered / seconds) * 60;
}

async function partA(limit: number): Promise<RateRow> {
  const emu = await startEmu(limit);
  const gwDir = join(dir, `a-${limit}`);
  const neighbourPerMin = Math.round(limit * NEIGHBOUR_SHARE);
  try {
    const n = neighbour(emu.base, neighbourPerMin);
    // More than the run can send at the whole limit.
    await prefillBuffer(join(gwDir, 'buffer.db'), Math.ceil(((limit / 60) * 200 * (WARMUP + SECONDS + 30)) * 1.2), VARS, Date.now() - 86_400_000, 10);
    const gw = await startGateway(gatewayConfig(emu, gwDir, { uplink: { backfill: { enabled: false } } }), { logger: silentLogger() });
    try {
      await sleep(WARMUP);
      const r0 = await ownRequests(gw);
      const d0 = deliveredOf(gw);
      const n0 = n.counts().admitted;
      const t0 = performance.now();
      const wall0 = Date.now();
      await sleep(SECONDS);
      const r1 = await ownRequests(gw);
      const d1 = deliveredOf(gw);
      const minutes = (performance.now() - t0) / 60_000;
      const n1 = n.counts().admitted;
      await n.stop();
      const fastest = await fastestRetry(emu, wall0);
      const found = gw.budget.rateSnapshot().found_per_minute;
      await gw.close();
      // What the second client really got admitted in the window is its part; the rest was the gateway's to use.
      const neighbourAdmittedPerMin = (n1 - n0) / minutes;
      const remaining = Math.max(1, limit - neighbourAdmittedPerMin);
      const requests = r1.total - r0.total;
      const base = await baseline(emu, remaining, neighbourPerMin);
      return {
        limit,
        neighbourPerMin: Math.round(neighbourAdmittedPerMin),
        remainingPerMin: Math.round(remaining),
        gwRequestsPerMin: requests / minutes,
        r429Pct: requests > 0 ? ((r1.r429 - r0.r429) / requests) * 100 : 0,
        fastestRetryS: fastest,
        foundPerMin: found,
        deliveredPerMin: (d1 - d0) / minutes,
        baselinePerMin: base,
      };
    } finally {
      await gw.close();
    }
  } finally {
    await emu.stop();
  }
}

interface DrainReading {
  t: number;
  backlog: number;
  eta: number | null;
  state: string;
}

async function partB(): Promise<void> {
  const limit = 120;
  const emu = await startEmu(limit);
  const gwDir = join(dir, 'b');
  const neighbourPerMin = Math.round(limit * NEIGHBOUR_SHARE);
  const n = neighbour(emu.base, neighbourPerMin);
  const generator = [{ name: 'gen', variables: VARS, interval: Math.max(1, Math.round((VARS.length * 1000) / INGEST_PER_S)) }];
  // BENCH_LOG=<file>: the gateway's log lines (JSON, info) for a timeline of part B.
  const logger = process.env.BENCH_LOG ? createLogger({ level: 'info', format: 'json', destination: pino.destination({ dest: process.env.BENCH_LOG, sync: true }) }) : silentLogger();
  const gw = await startGateway(gatewayConfig(emu, gwDir, { generator }), { logger });
  let oldestMax = 0;
  const readings: DrainReading[] = [];
  let stoppedAt = 0;
  const states = new Map<string, number>();
  let sayOk = 0;
  const watch = setInterval(() => {
    const s: GatewayStatus = gw.status();
    oldestMax = Math.max(oldestMax, s.buffer.oldest_unsent_age_s ?? 0);
    states.set(s.delivery.state, (states.get(s.delivery.state) ?? 0) + 1);
    if (s.delivery.state === 'growing' && (s.uplink.state.ok || /keep/.test(s.delivery.no_estimate_because ?? ''))) sayOk += 1;
    if (process.env.BENCH_LOG && Math.round(performance.now() / 1000) % 10 === 0) {
      process.stderr.write(`${JSON.stringify({ backlog: s.buffer.samples, oldest: s.buffer.oldest_unsent_age_s, state: s.delivery.state, eta: s.delivery.drain_eta_s, why: s.delivery.no_estimate_because, rule: s.backfill.start_rule, jobs: s.backfill.jobs_in_flight, pace: s.uplink.pace_per_minute, uplink: s.uplink.state.text, ingest: Math.round(s.delivery.ingest_per_s), sync: Math.round(s.delivery.sync_per_s) })}\n`);
    }
    if (stoppedAt > 0) readings.push({ t: performance.now(), backlog: s.buffer.samples, eta: s.delivery.drain_eta_s, state: s.delivery.state });
  }, 1_000);
  try {
    const r0 = await ownRequests(gw);
    await sleep(INGEST_SECONDS);
    // The source goes (a reload without it); what it committed must all arrive.
    await gw.reload(gatewayConfig(emu, gwDir, { generator: [] }));
    stoppedAt = performance.now();
    const deadline = stoppedAt + 20 * 60_000;
    while (gw.status().buffer.samples > 0 && performance.now() < deadline) await sleep(1);
    const drainedAt = performance.now();
    clearInterval(watch);
    const s = gw.status();
    const r1 = await ownRequests(gw);
    const committed = s.buffer.committed_total;
    const counts = await getJson<{ values_stored: number }>(`${emu.base}/_emulator/stats`);
    const neighbourDone = await n.stop();
    const drainS = (drainedAt - stoppedAt) / 1000;
    const drains = readings.filter((r) => r.state === 'draining' && r.eta !== null);
    const ratios = drains.map((r) => r.eta! / ((drainedAt - r.t) / 1000));
    const first = drains[0];
    const firstRatio = first ? first.eta! / ((drainedAt - first.t) / 1000) : NaN;
    const within = ratios.filter((x) => x >= 0.5 && x <= 1.5).length;
    process.stdout.write(`\nPart B: limit ${limit}/min, second client ${neighbourDone.admitted} requests admitted, generator ${INGEST_PER_S} samples/s for ${INGEST_SECONDS} s, then drain\n\n`);
    process.stdout.write(
      `${table([
        { figure: 'samples committed', value: committed },
        { figure: 'values stored upstream', value: counts.values_stored },
        { figure: 'delivered / committed', value: (counts.values_stored / Math.max(1, committed)).toFixed(4) },
        { figure: 'oldest unsent, max (s)', value: Math.round(oldestMax) },
        { figure: 'import jobs finished', value: gw.backfill.stats().delivered_total > 0 ? 'yes' : 'no' },
        { figure: 'drain after ingest stopped (s)', value: drainS.toFixed(1) },
        { figure: 'first "draining" ETA / actual', value: Number.isFinite(firstRatio) ? firstRatio.toFixed(2) : 'none' },
        { figure: 'all ETA readings within ±50 %', value: `${within} of ${ratios.length} (median ratio ${ratios.length ? median(ratios).toFixed(2) : '-'})` },
        { figure: 'gateway 429s / requests', value: `${r1.r429 - r0.r429} / ${r1.total - r0.total}` },
        { figure: 'status seconds by delivery state', value: [...states].map(([k, v]) => `${k} ${v}`).join(', ') },
      ])}\n\n`,
    );
    process.stdout.write(`${verdict(counts.values_stored >= committed, `every committed sample delivered (${counts.values_stored} of ${committed})`)}\n`);
    process.stdout.write(`${verdict(oldestMax <= 300, `oldest unsent <= 5 min (max ${Math.round(oldestMax)} s)`)}\n`);
    process.stdout.write(`${verdict(Number.isFinite(firstRatio) && firstRatio >= 0.5 && firstRatio <= 1.5, `drain ETA within ±50 % of the actual drain (first reading ${Number.isFinite(firstRatio) ? firstRatio.toFixed(2) : 'none'})`)}\n`);
    process.stdout.write(`${verdict(sayOk === 0, `never "ok" or "keeps up" while the backlog grows (${sayOk} readings did)`)}\n`);
  } finally {
    clearInterval(watch);
    await n.stop();
    await gw.close();
    await emu.stop();
  }
}

try {
  if (ONLY !== 'B') {
    const rows: RateRow[] = [];
    for (const limit of LIMITS) {
      process.stdout.write(`part A: limit ${limit}/min ...\n`);
      rows.push(await partA(limit));
    }
    process.stdout.write(`\nPart A: backlog larger than the run, import jobs off; a second client spends ${Math.round(NEIGHBOUR_SHARE * 100)} % of the limit; measured ${SECONDS} s after ${WARMUP} s\n\n`);
    process.stdout.write(
      `${table(
        rows.map((r) => ({
          'limit/min': r.limit,
          'second client/min': r.neighbourPerMin,
          'left/min': r.remainingPerMin,
          'limit found/min': r.foundPerMin === null ? '-' : Math.round(r.foundPerMin),
          'gateway requests/min': Math.round(r.gwRequestsPerMin),
          '429 %': r.r429Pct.toFixed(2),
          'next request after a 429 (s, fastest)': r.fastestRetryS === null ? '-' : r.fastestRetryS.toFixed(2),
          'delivered/min': Math.round(r.deliveredPerMin),
          'baseline/min': Math.round(r.baselinePerMin),
          'ratio': (r.deliveredPerMin / r.baselinePerMin).toFixed(3),
        })),
      )}\n\nbaseline: a bare client pacing 200-item batches at exactly the limit left by the second client (it knows it; the gateway finds it)\n`,
    );
    for (const r of rows) {
      process.stdout.write(`${verdict(r.r429Pct <= 2, `${r.limit}/min: <= 2 % of requests 429 after the first minute (${r.r429Pct.toFixed(2)} %)`)}\n`);
      process.stdout.write(`${verdict(r.fastestRetryS === null || r.fastestRetryS >= 0.5, `${r.limit}/min: no request sooner than 1 s ± 500 ms after a 429 after the first minute (fastest ${r.fastestRetryS === null ? '-, no 429' : `${r.fastestRetryS.toFixed(2)} s`})`)}\n`);
      process.stdout.write(`${verdict(r.deliveredPerMin >= 0.9 * r.baselinePerMin, `${r.limit}/min: delivered >= 90 % of what the remaining limit allows (${((r.deliveredPerMin / r.baselinePerMin) * 100).toFixed(1)} %)`)}\n`);
    }
  }
  if (ONLY !== 'A') await partB();
  process.stdout.write(`${NOISY_MACHINE_NOTE}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
