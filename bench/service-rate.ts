/**
 * Benchmark: does the gateway find the service's real rate limit, use what is left of it, roll its
 * backlog into import jobs from what it measures, and say honestly when the backlog drains?
 *
 * The emulator runs in its own process over real HTTP with a limit of L requests/min per address
 * (§8); a second client on the same address spends BENCH_NEIGHBOUR_SHARE of it (25 %): the
 * emulator's fault neighbour_per_minute, paced evenly in the emulator's own clock and counted in its
 * stats (stats.neighbour.admitted), so a stall of this busy process neither delays it nor bunches
 * its requests, and every request in the emulator's journal is the gateway's. The gateway runs in
 * this process with the default configuration (uplink.requests_per_minute 1,400: a ceiling far
 * above L) and a durable buffer on disk.
 *
 * Part A, for each L in BENCH_LIMITS (30, 120, 600, 1500): a backlog larger than the run can send,
 * import jobs off, so every request is a 200-item batch (or a token call). Measured after the first
 * minute for BENCH_SECONDS: the gateway's 429s (its own /metrics), the shortest time from a 429's
 * answer to the next request the gateway decides to send (its request budget's grants, watched in
 * this process: a request granted before the 429 arrived was on its way already, whatever the
 * journal's arrival times say on a loaded machine), against what §8 allows (1 s ± 500 ms, and
 * Retry-After as a lower bound), and the samples delivered per minute against the baseline
 * measured in the same run: a bare client that knows the remaining limit (L less what the second
 * client was admitted) and paces 200-item batches at exactly that rate, against the same emulator
 * and second client.
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
 *   BENCH_SMOKE=1 npx tsx bench/service-rate.ts                                                     # seconds: proves it runs
 * The emulator runs from dist/ (npm run build first).
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
import { demoToken, envList, envNumber, freePort, getJson, median, NOISY_MACHINE_NOTE, postJson, ratioText, SMOKE, smokeBanner, startCli, table, verdict, type Proc } from './lib.js';
import { prefillBuffer } from './prefill.js';

const LIMITS = envList('BENCH_LIMITS', '30,120,600,1500', '600').map(Number);
const SECONDS = envNumber('BENCH_SECONDS', 180, 4);
const WARMUP = envNumber('BENCH_WARMUP', 60, 3);
const BASELINE_SECONDS = envNumber('BENCH_BASELINE_SECONDS', Math.min(SECONDS, 90), 3);
const NEIGHBOUR_SHARE = envNumber('BENCH_NEIGHBOUR_SHARE', 0.25);
/** Part B's limit: 120/min is the target's; a smoke run uses a wider one to drain in seconds. */
const DRAIN_LIMIT = envNumber('BENCH_DRAIN_LIMIT', 120, 600);
const INGEST_SECONDS = envNumber('BENCH_INGEST_SECONDS', 360, 3);
const INGEST_PER_S = envNumber('BENCH_INGEST_PER_S', 1_000, 200);
/** Seconds of sending part A's backlog holds beyond the warm-up and the window. */
const BACKLOG_MARGIN_S = SMOKE ? 5 : 30;
const ONLY = process.env.BENCH_ONLY ?? '';
const VARS = Array.from({ length: 20 }, (_, i) => `mvr_gen_${i + 1}`);
smokeBanner(`BENCH_LIMITS ${LIMITS.join(',')}, BENCH_SECONDS ${SECONDS}, BENCH_WARMUP ${WARMUP}, BENCH_BASELINE_SECONDS ${BASELINE_SECONDS}, BENCH_DRAIN_LIMIT ${DRAIN_LIMIT}, BENCH_INGEST_SECONDS ${INGEST_SECONDS}, BENCH_INGEST_PER_S ${INGEST_PER_S}`);

const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));
const dir = mkdtempSync(join(tmpdir(), 'gw-bench-rate-'));

interface Emu extends Proc {
  base: string;
}

async function startEmu(limit: number): Promise<Emu> {
  const port = await freePort();
  const p = await startCli(['emulator', '--port', String(port), '--rate-limit', String(limit), '--job-delay', '500'], /tracking\/v1/);
  return { ...p, base: `http://127.0.0.1:${port}` };
}

/** The second client behind the same address: the emulator's fault, `perMinute` evenly in its own clock. */
async function setNeighbour(emu: Emu, perMinute: number): Promise<void> {
  await postJson(`${emu.base}/_emulator/faults`, { neighbour_per_minute: perMinute });
}

/** The second client's requests the emulator admitted so far (all addresses together: there is one). */
async function neighbourAdmitted(emu: Emu): Promise<number> {
  return (await getJson<{ neighbour: { admitted: number } }>(`${emu.base}/_emulator/stats`)).neighbour.admitted;
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

/** §8: wait 1 s after a 429, doubling, with about ±500 ms of jitter: nothing sooner than this. */
const SOONEST_RETRY_MS = 500;
/** Timer slack allowed against a Retry-After (setTimeout fires a millisecond or two early or late). */
const TIMER_SLACK_MS = 20;

/** The soonest request the gateway decided to send after a 429's answer, against what §8 allowed. */
interface RetryWatch {
  /** Shortest time (s) from a 429 answered to the next request granted after it; null without a 429. */
  fastestS: number | null;
  /** 429s after which a request was granted sooner than max(500 ms, Retry-After). */
  tooSoon: number;
  limited: number;
}

/**
 * Watches the gateway's request budget (in this process): every request is granted a ticket just
 * before it is sent (client.ts, auth.ts) and every answer is reported back with `answered`. A
 * request granted after a 429 was answered is the gateway's decision to send again; one granted
 * before was on its way already. Only what happens after `since()` counts.
 */
function watchRetries(gw: GatewayHandle): { from(): void; result(): RetryWatch } {
  const budget = gw.budget;
  let counting = false;
  let limited = 0;
  let tooSoon = 0;
  let fastest: number | null = null;
  let pending: { at: number; requiredMs: number } | null = null;
  const ticket = budget.ticket.bind(budget);
  const answered = budget.answered.bind(budget);
  budget.ticket = () => {
    if (pending) {
      const gap = performance.now() - pending.at;
      if (fastest === null || gap < fastest) fastest = gap;
      if (gap + TIMER_SLACK_MS < pending.requiredMs) tooSoon += 1;
      pending = null;
    }
    return ticket();
  };
  budget.answered = (status: number, t: number, retryAfterMs?: number) => {
    if (status === 429 && counting) {
      limited += 1;
      // A second 429 before any new grant (another request of the same wave) keeps the first's clock.
      pending ??= { at: performance.now(), requiredMs: Math.max(SOONEST_RETRY_MS, retryAfterMs ?? 0) };
    }
    answered(status, t, retryAfterMs);
  };
  return {
    from: () => {
      counting = true;
    },
    result: () => ({ fastestS: fastest === null ? null : fastest / 1000, tooSoon, limited }),
  };
}

interface RateRow {
  limit: number;
  neighbourPerMin: number;
  remainingPerMin: number;
  gwRequestsPerMin: number;
  r429Pct: number;
  retry: RetryWatch;
  foundPerMin: number | null;
  deliveredPerMin: number;
  baselinePerMin: number;
}

/** The oracle: 200-item batches at exactly the remaining limit, with a token fetched once. */
async function baseline(emu: Emu, remainingPerMin: number, neighbourPerMin: number): Promise<number> {
  await postJson(`${emu.base}/_emulator/reset`, { faults: true });
  await setNeighbour(emu, neighbourPerMin);
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
  await agent.close();
  return (delivered / seconds) * 60;
}

async function partA(limit: number): Promise<RateRow> {
  const emu = await startEmu(limit);
  const gwDir = join(dir, `a-${limit}`);
  const neighbourPerMin = Math.round(limit * NEIGHBOUR_SHARE);
  try {
    await setNeighbour(emu, neighbourPerMin);
    // More than the run can send at the whole limit.
    await prefillBuffer(join(gwDir, 'buffer.db'), Math.ceil((limit / 60) * 200 * (WARMUP + SECONDS + BACKLOG_MARGIN_S) * 1.2), VARS, Date.now() - 86_400_000, 10);
    const gw = await startGateway(gatewayConfig(emu, gwDir, { uplink: { backfill: { enabled: false } } }), { logger: silentLogger() });
    const retries = watchRetries(gw);
    try {
      await sleep(WARMUP);
      retries.from();
      const r0 = await ownRequests(gw);
      const d0 = deliveredOf(gw);
      const n0 = await neighbourAdmitted(emu);
      const t0 = performance.now();
      await sleep(SECONDS);
      const r1 = await ownRequests(gw);
      const d1 = deliveredOf(gw);
      const n1 = await neighbourAdmitted(emu);
      const minutes = (performance.now() - t0) / 60_000;
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
        retry: retries.result(),
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

/** The backlog must have grown by more than a batch over this long to count as growing (the issue's 30 s). */
const GROWTH_WINDOW_MS = 30_000;

async function partB(): Promise<void> {
  const limit = DRAIN_LIMIT;
  const emu = await startEmu(limit);
  const gwDir = join(dir, 'b');
  await setNeighbour(emu, Math.round(limit * NEIGHBOUR_SHARE));
  const generator = [{ name: 'gen', variables: VARS, interval: Math.max(1, Math.round((VARS.length * 1000) / INGEST_PER_S)) }];
  // BENCH_LOG=<file>: the gateway's log lines (JSON, info) for a timeline of part B.
  const logger = process.env.BENCH_LOG ? createLogger({ level: 'info', format: 'json', destination: pino.destination({ dest: process.env.BENCH_LOG, sync: true }) }) : silentLogger();
  const gw = await startGateway(gatewayConfig(emu, gwDir, { generator }), { logger });
  let oldestMax = 0;
  const readings: DrainReading[] = [];
  let stoppedAt = 0;
  const states = new Map<string, number>();
  // The bench's own reading of growth (not the gateway's): the backlog a batch above where it was 30 s ago.
  const backlogs: Array<{ t: number; backlog: number }> = [];
  let grownReadings = 0;
  let sayOk = 0;
  const watch = setInterval(() => {
    const s: GatewayStatus = gw.status();
    const now = performance.now();
    oldestMax = Math.max(oldestMax, s.buffer.oldest_unsent_age_s ?? 0);
    states.set(s.delivery.state, (states.get(s.delivery.state) ?? 0) + 1);
    backlogs.push({ t: now, backlog: s.buffer.samples });
    while (backlogs.length > 1 && backlogs[1].t <= now - GROWTH_WINDOW_MS) backlogs.shift();
    const grown = backlogs[0].t <= now - GROWTH_WINDOW_MS + 1_500 && s.buffer.samples > backlogs[0].backlog + 200;
    if (grown) {
      grownReadings += 1;
      if (s.uplink.state.ok || s.delivery.state === 'keeping_up' || s.delivery.state === 'idle') sayOk += 1;
    }
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
    const counts = await getJson<{ values_stored: number; neighbour: { admitted: number } }>(`${emu.base}/_emulator/stats`);
    const drainS = (drainedAt - stoppedAt) / 1000;
    const drains = readings.filter((r) => r.state === 'draining' && r.eta !== null);
    const ratios = drains.map((r) => r.eta! / ((drainedAt - r.t) / 1000));
    const first = drains[0];
    const firstRatio = first ? first.eta! / Math.max(0.001, (drainedAt - first.t) / 1000) : null;
    const firstText = firstRatio === null ? 'none (no "draining" reading with an estimate)' : firstRatio.toFixed(2);
    const within = ratios.filter((x) => x >= 0.5 && x <= 1.5).length;
    process.stdout.write(`\nPart B: limit ${limit}/min, second client ${counts.neighbour.admitted} requests admitted, generator ${INGEST_PER_S} samples/s for ${INGEST_SECONDS} s, then drain\n\n`);
    process.stdout.write(
      `${table([
        { figure: 'samples committed', value: committed },
        { figure: 'values stored upstream', value: counts.values_stored },
        { figure: 'delivered / committed', value: (counts.values_stored / Math.max(1, committed)).toFixed(4) },
        { figure: 'oldest unsent, max (s)', value: Math.round(oldestMax) },
        { figure: 'import jobs finished', value: gw.backfill.stats().delivered_total > 0 ? 'yes' : 'no' },
        { figure: 'drain after ingest stopped (s)', value: drainS.toFixed(1) },
        { figure: 'first "draining" ETA / actual (ratio)', value: firstText },
        { figure: 'all ETA readings within ±50 %', value: `${within} of ${ratios.length} (median ratio ${ratios.length ? median(ratios).toFixed(2) : '-'})` },
        { figure: 'gateway 429s / requests', value: `${r1.r429 - r0.r429} / ${r1.total - r0.total}` },
        { figure: 'status seconds by delivery state', value: [...states].map(([k, v]) => `${k} ${v}`).join(', ') },
        { figure: 'readings with the backlog a batch above 30 s before', value: grownReadings },
      ])}\n\n`,
    );
    process.stdout.write(`${verdict(counts.values_stored >= committed, `every committed sample delivered (${counts.values_stored} of ${committed})`)}\n`);
    process.stdout.write(`${verdict(oldestMax <= 300, `oldest unsent <= 5 min (max ${Math.round(oldestMax)} s)`)}\n`);
    process.stdout.write(`${verdict(firstRatio !== null && firstRatio >= 0.5 && firstRatio <= 1.5, `drain ETA within ±50 % of the actual drain (first reading ${firstText})`)}\n`);
    process.stdout.write(`${verdict(sayOk === 0, `never "ok", "keeping up" or "nothing waits" while the backlog grows (${sayOk} of ${grownReadings} such readings did)`)}\n`);
  } finally {
    clearInterval(watch);
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
          '429s to the gateway': r.retry.limited,
          'next request granted after a 429 (s, fastest)': r.retry.fastestS === null ? '- (no 429)' : r.retry.fastestS.toFixed(2),
          'delivered/min': Math.round(r.deliveredPerMin),
          'baseline/min': Math.round(r.baselinePerMin),
          'ratio': ratioText(r.deliveredPerMin, r.baselinePerMin, 3),
        })),
      )}\n\nbaseline: a bare client pacing 200-item batches at exactly the limit left by the second client (it knows it; the gateway finds it)\n`,
    );
    for (const r of rows) {
      process.stdout.write(`${verdict(r.r429Pct <= 2, `${r.limit}/min: <= 2 % of requests 429 after the first minute (${r.r429Pct.toFixed(2)} %)`)}\n`);
      const fastest = r.retry.fastestS === null ? 'no 429' : `fastest ${r.retry.fastestS.toFixed(2)} s`;
      process.stdout.write(`${verdict(r.retry.tooSoon === 0, `${r.limit}/min: no request sooner than §8 allows after a 429 (1 s ± 500 ms, Retry-After a lower bound) after the first minute (${r.retry.tooSoon} of ${r.retry.limited} too soon; ${fastest})`)}\n`);
      process.stdout.write(`${verdict(r.deliveredPerMin >= 0.9 * r.baselinePerMin, `${r.limit}/min: delivered >= 90 % of what the remaining limit allows (ratio ${ratioText(r.deliveredPerMin, r.baselinePerMin, 3)})`)}\n`);
    }
  }
  if (ONLY !== 'A') await partB();
  process.stdout.write(`${NOISY_MACHINE_NOTE}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
