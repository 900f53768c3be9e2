/**
 * OPC UA historical backfill (issue 14 §4): a node-opcua server with 500 historized nodes holding a
 * 1-hour gap of history (one value every 5 s per node by default: 360,000 values), values also
 * changing live every second.
 *
 *   gateway: the OpcuaSource connects with its last committed timestamps one hour old; its history
 *            backfill (src/sources/opcua/history.ts) reads the gap with HistoryRead raw and commits
 *            it into the real SQLite buffer (synchronous=FULL) while the live subscription keeps
 *            delivering. Measured: values/s backfilled (committed), and the freshness of live
 *            values during the backfill (commit time minus the value's source timestamp).
 *   bare:    a plain node-opcua client reading the same interval with HistoryRead (same
 *            values_per_request and nodes per request as the gateway, continuation points), counting the values
 *            and doing nothing with them. The baseline: what the protocol stack alone costs.
 *
 * Each side runs in its own child process, one after the other, against one simulator in a third.
 * The machine is shared and noisy: run twice before believing a small difference.
 *
 *   npx tsx bench/history-backfill.ts
 *   HIST_BENCH_NODES=500 HIST_BENCH_GAP_S=3600 HIST_BENCH_STEP_MS=1000 npx tsx bench/history-backfill.ts   # 1.8 M values
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNumber, NOISY_MACHINE_NOTE, smokeBanner, table, verdict } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

const NODES = envNumber('HIST_BENCH_NODES', 500, 20);
const GAP_S = envNumber('HIST_BENCH_GAP_S', 3_600, 600);
const STEP_MS = envNumber('HIST_BENCH_STEP_MS', 5_000);
const VALUES_PER_REQUEST = envNumber('HIST_BENCH_VALUES_PER_REQUEST', 1_000);
const FRESHNESS_LIMIT_S = 5;
const self = fileURLToPath(import.meta.url);

interface Payload {
  endpointUrl: string;
  nodeIds: string[];
  fromMs: number;
  toMs: number;
}

interface Result {
  side: 'gateway' | 'bare';
  values: number;
  seconds: number;
  perSecond: number;
  cpuPercent: number;
  peakRssMb: number;
  /** gateway only: live values committed during the backfill. */
  liveValues?: number;
  /** gateway only: their freshness in seconds, null when there was none (the backfill ended before the subscription's next publish). */
  freshness?: { p50: number; p95: number; max: number } | null;
}

// --- child roles ------------------------------------------------------------------------------

async function runServer(): Promise<void> {
  const { startOpcuaSimulator } = await import('../src/sim/opcua-server.js');
  const toMs = Date.now() - 2_000;
  const fromMs = toMs - GAP_S * 1_000;
  const sim = await startOpcuaSimulator({ historizedBulk: { count: NODES, fromMs, toMs, stepMs: STEP_MS }, updateIntervalMs: 1_000, pkiDir: join(tmpdir(), 'opcua-bench-hist-pki') });
  const payload: Payload = { endpointUrl: sim.endpointUrl, nodeIds: Array.from({ length: NODES }, (_, i) => sim.histNodeId(i + 1)), fromMs, toMs };
  process.send?.(payload);
  process.on('message', (m) => {
    if (m === 'stop') void sim.close().then(() => process.exit(0));
  });
}

function usage(t0: number, c0: NodeJS.CpuUsage, values: number, peakRss: number) {
  const seconds = (performance.now() - t0) / 1_000;
  const cpu = process.cpuUsage(c0);
  return { values, seconds, perSecond: values / seconds, cpuPercent: ((cpu.user + cpu.system) / 1e6 / seconds) * 100, peakRssMb: peakRss / 1e6 };
}

async function runBare(p: Payload): Promise<Result> {
  const { HistoryReadRequest, OPCUAClient, OPCUACertificateManager, ReadRawModifiedDetails, TimestampsToReturn, resolveNodeId } = await import('node-opcua');
  const { HistoryData } = await import('node-opcua-service-history');
  const pki = mkdtempSync(join(tmpdir(), 'opcua-bench-hist-bare-'));
  const cm = new OPCUACertificateManager({ rootFolder: pki });
  const client = OPCUAClient.create({ clientCertificateManager: cm, endpointMustExist: false });
  await client.connect(p.endpointUrl);
  const session = await client.createSession();
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 250);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let values = 0;
  const details = new ReadRawModifiedDetails({ isReadModified: false, startTime: new Date(p.fromMs), endTime: new Date(p.toMs), numValuesPerNode: VALUES_PER_REQUEST, returnBounds: false });
  const { nodesPerRequest } = await import('../src/sources/opcua/history.js');
  const perRequest = nodesPerRequest(VALUES_PER_REQUEST);
  for (let start = 0; start < p.nodeIds.length; start += perRequest) {
    let open = p.nodeIds.slice(start, start + perRequest).map((nodeId) => ({ nodeId, cp: undefined as Buffer | undefined }));
    while (open.length > 0) {
      const r = await session.historyRead(new HistoryReadRequest({ historyReadDetails: details, timestampsToReturn: TimestampsToReturn.Source, nodesToRead: open.map((x) => ({ nodeId: resolveNodeId(x.nodeId), continuationPoint: x.cp })) }));
      const next: typeof open = [];
      (r.results ?? []).forEach((res, i) => {
        if (res.historyData instanceof HistoryData) values += res.historyData.dataValues?.length ?? 0;
        if (res.continuationPoint && res.continuationPoint.length > 0) next.push({ nodeId: open[i].nodeId, cp: res.continuationPoint });
      });
      open = next;
    }
  }
  const u = usage(t0, c0, values, peakRss);
  clearInterval(sampler);
  await session.close();
  await client.disconnect();
  rmSync(pki, { recursive: true, force: true });
  return { side: 'bare', ...u };
}

async function runGateway(p: Payload): Promise<Result> {
  const [{ openBufferDatabase }, { SampleBuffer }, { GapLedger }, { systemClock }, { silentLogger }, { createMetrics }, { SourceStats }, { opcuaServerSchema }, { OpcuaSource }] = await Promise.all([
    import('../src/store/file/database.js'),
    import('../src/buffer/sample-buffer.js'),
    import('../src/buffer/gaps.js'),
    import('../src/core/clock.js'),
    import('../src/core/logger.js'),
    import('../src/core/metrics.js'),
    import('../src/core/source.js'),
    import('../src/sources/opcua/config.js'),
    import('../src/sources/opcua/source.js'),
  ]);
  const dir = mkdtempSync(join(tmpdir(), 'opcua-bench-hist-gw-'));
  const logger = silentLogger();
  const metrics = createMetrics();
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 4_000_000_000, whenFull: 'drop_oldest', logger, metrics, clock: systemClock });
  const variables = p.nodeIds.map((_, i) => `mvr_hist_${i + 1}`);
  // The gateway's last run committed every variable up to the start of the gap.
  await buffer.append(variables.map((variable) => ({ variable, ts: p.fromMs, value: 0 })));
  await buffer.flush();

  let live = 0;
  const freshness: number[] = [];
  let backfilling = true;
  // Live values during the backfill: the backfill starts once each node's first live value is in
  // (history.ts) and reads up to it, so a variable's first sample here is the subscription's, every
  // older one is history, and every newer one is live and came while the backfill ran.
  const firstLive = new Map<string, number>();
  const sink = {
    async append(samples: readonly { variable: string; ts: number; value: number }[]) {
      await buffer.append(samples);
      if (!backfilling) return;
      const now = Date.now();
      for (const s of samples) {
        const first = firstLive.get(s.variable);
        if (first === undefined) firstLive.set(s.variable, s.ts);
        else if (s.ts > first) {
          live += 1;
          freshness.push((now - s.ts) / 1_000);
        }
      }
    },
  };
  const cfg = opcuaServerSchema.parse({
    name: 'bench',
    endpoint: p.endpointUrl,
    publishing_interval: 1_000,
    sampling_interval: 1_000,
    history: { values_per_request: VALUES_PER_REQUEST, max_window: '2h' },
    nodes: p.nodeIds.map((node_id, i) => ({ node_id, variable: variables[i] })),
  });
  const stats = new SourceStats('bench', 'opcua', metrics, systemClock);
  const source = new OpcuaSource(cfg, { sink, logger, stats, metrics, clock: systemClock, dataDir: dir, history: { lastCommitted: buffer.lastCommitted, gaps: new GapLedger(gatewayStore(db).owner('gaps'), metrics) } }, { path: 'opcua.servers[0]' });
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 250);
  const historyStatus = () => source.status().detail?.history as { values_total: number; last_run: { outcome: string } | null } | undefined;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await source.start();
  // Done when the backfill says so (its last HistoryRead answered and every value is committed).
  for (;;) {
    const h = historyStatus();
    if (h?.last_run) break;
    if (performance.now() - t0 > 30 * 60_000) throw new Error('backfill did not finish in 30 min');
    await new Promise((r) => setTimeout(r, 100));
  }
  backfilling = false;
  const h = historyStatus()!;
  const u = usage(t0, c0, h.values_total, peakRss);
  clearInterval(sampler);
  if (h.last_run?.outcome !== 'done') throw new Error(`backfill ended ${h.last_run?.outcome}`);
  await source.close();
  await buffer.close();
  rmSync(dir, { recursive: true, force: true });
  freshness.sort((a, b) => a - b);
  const q = (x: number) => freshness[Math.min(freshness.length - 1, Math.floor(x * freshness.length))];
  return { side: 'gateway', ...u, liveValues: live, freshness: freshness.length > 0 ? { p50: q(0.5), p95: q(0.95), max: freshness[freshness.length - 1] } : null };
}

// --- orchestration ----------------------------------------------------------------------------

function child(role: string, payload?: unknown): ChildProcess {
  return fork(self, [role], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, HIST_BENCH_PAYLOAD: payload ? JSON.stringify(payload) : '' } });
}

function firstMessage<T>(cp: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    cp.once('message', (m) => resolve(m as T));
    cp.once('exit', (code) => reject(new Error(`child exited with ${code} before reporting`)));
  });
}

async function main(): Promise<void> {
  const role = process.argv[2];
  if (role === 'server') return runServer();
  if (role === 'bare' || role === 'gateway') {
    const payload = JSON.parse(process.env.HIST_BENCH_PAYLOAD ?? '{}') as Payload;
    const r = role === 'bare' ? await runBare(payload) : await runGateway(payload);
    process.send?.(r);
    setTimeout(() => process.exit(0), 200);
    return;
  }

  smokeBanner(`HIST_BENCH_NODES ${NODES}, HIST_BENCH_GAP_S ${GAP_S}`);
  const perNode = Math.floor((GAP_S * 1_000) / STEP_MS) + 1;
  console.log(`OPC UA historical backfill benchmark: ${NODES} historized nodes, a ${GAP_S / 60}-minute gap with one value every ${STEP_MS / 1000} s per node (${(NODES * perNode).toLocaleString('en-US')} values), live values every 1 s; values_per_request ${VALUES_PER_REQUEST}.`);
  console.log(`${NOISY_MACHINE_NOTE}\n`);
  const server = child('server');
  const payload = await firstMessage<Payload>(server);
  try {
    const bare = await firstMessage<Result>(child('bare', payload));
    const gateway = await firstMessage<Result>(child('gateway', payload));
    const rows = [bare, gateway].map((r) => ({
      side: r.side,
      values: r.values,
      seconds: Number(r.seconds.toFixed(1)),
      'values/s': Math.round(r.perSecond),
      'CPU %': Math.round(r.cpuPercent),
      'peak RSS MB': Math.round(r.peakRssMb),
      'live values during it': r.liveValues ?? '-',
      'live freshness p50/p95/max s': r.freshness ? `${r.freshness.p50.toFixed(2)} / ${r.freshness.p95.toFixed(2)} / ${r.freshness.max.toFixed(2)}` : r.side === 'gateway' ? 'none' : '-',
    }));
    console.log(table(rows));
    const ratio = gateway.perSecond / bare.perSecond;
    console.log(`\nratio gateway / bare HistoryRead client: ${ratio.toFixed(2)} (values/s; the gateway also decodes, applies scale/offset and commits every value durably)`);
    console.log(verdict(gateway.values >= bare.values, `the gateway backfilled ${gateway.values.toLocaleString('en-US')} values; the bare client read ${bare.values.toLocaleString('en-US')} (the gateway also reads the seconds between the server start and its connect)`));
    const fresh = gateway.freshness;
    if (fresh) console.log(verdict(fresh.max <= FRESHNESS_LIMIT_S, `live values stayed fresh during the backfill: at most ${fresh.max.toFixed(2)} s old when committed (limit ${FRESHNESS_LIMIT_S} s), ${gateway.liveValues} live values`));
    else console.log(`live freshness not measured: no live value came while the backfill ran (the whole run, connect and subscription included, took ${gateway.seconds.toFixed(1)} s; live values come once a second), so none waited behind it. A longer gap (HIST_BENCH_GAP_S) or more nodes measure it.`);
  } finally {
    server.send('stop');
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
