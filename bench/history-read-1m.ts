/**
 * One HistoryRead answer of 1,000,000 values (issue 21 §2): a node-opcua server whose node
 * `Misbehaving.HugeHistory` (src/sim/opcua-misbehaving.ts) answers any HistoryRead raw with
 * 1,000,000 values spread over the asked range, ignoring numValuesPerNode, without a continuation
 * point. The server allows messages up to 256 MiB unless the client announces less.
 *
 *   bare:    a plain node-opcua client (no transport limits: it announces MaxMessageSize 0) sends
 *            the HistoryRead the gateway sends (the last minute, numValuesPerNode 1000). The
 *            baseline: what the protocol stack does with such an answer.
 *   gateway: the OpcuaSource with its history backfill and a real buffer, whose last committed
 *            value of the node is a minute old: it reads the gap with its defaults
 *            (max_message_size 4 MiB, values_per_request 1000) next to its live subscription.
 *   gateway, max_message_size 128MiB: the same with the largest limit the schema allows, so the
 *            server sends its answer: what the gateway did before it announced a limit (it then
 *            also handed the 1,000,000 values to the buffer in one append; now in slices).
 *
 * Measured in each side's own process, from before the HistoryRead to its end (the gateway: until
 * the backfill reports): growth of the peak RSS (getrusage maxRSS, so a peak inside a blocked event
 * loop counts too), the longest event-loop block (perf_hooks.monitorEventLoopDelay, 10 ms
 * resolution), values taken. The server runs in a third process.
 *
 *   npx tsx bench/history-read-1m.ts
 *   HIST1M_VALUES=300000 npx tsx bench/history-read-1m.ts
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { envNumber, NOISY_MACHINE_NOTE, SMOKE, smokeBanner, table, verdict } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

const VALUES = envNumber('HIST1M_VALUES', 1_000_000, 20_000);
/**
 * The limited gateway's max_message_size: its default (4 MiB), which the full answer exceeds; in a
 * smoke run the smallest allowed, 128 KiB, which the smoke answer (20,000 values, ~360 kB) exceeds.
 */
const LIMITED = SMOKE ? '128KiB' : undefined;
const GAP_MS = 60_000;
/** Targets for the gateway: a block the watchdog and the live values do not notice, and bounded memory. */
const BLOCK_LIMIT_MS = 500;
const RSS_LIMIT_MB = 100;
const self = fileURLToPath(import.meta.url);

interface Payload {
  endpointUrl: string;
  nodeId: string;
}

interface Result {
  side: string;
  seconds: number;
  values: number;
  outcome: string;
  peakRssGrowthMb: number;
  longestBlockMs: number;
  watchdogTrips?: number;
}

// --- child roles ------------------------------------------------------------------------------

async function runServer(): Promise<void> {
  const { startOpcuaSimulator } = await import('../src/sim/opcua-server.js');
  const sim = await startOpcuaSimulator({ misbehave: { hugeHistory: VALUES }, updateIntervalMs: 1_000, pkiDir: join(tmpdir(), 'opcua-bench-hist1m-pki') });
  process.send?.({ endpointUrl: sim.endpointUrl, nodeId: sim.misbehaviour!.nodeIds.hugeHistory! } satisfies Payload);
  process.on('message', (m) => {
    if (m === 'stop') void sim.close().then(() => process.exit(0));
  });
}

/** maxRSS of this process so far, bytes (getrusage: includes peaks the event loop was too busy to sample). */
const maxRss = () => process.resourceUsage().maxRSS * 1024;

function measure() {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  const rss0 = maxRss();
  const t0 = performance.now();
  loop.enable();
  return {
    stop() {
      loop.disable();
      return { seconds: (performance.now() - t0) / 1_000, peakRssGrowthMb: (maxRss() - rss0) / 1e6, longestBlockMs: loop.max / 1e6 };
    },
  };
}

async function runBare(p: Payload): Promise<Result> {
  const { HistoryReadRequest, OPCUAClient, OPCUACertificateManager, ReadRawModifiedDetails, TimestampsToReturn, resolveNodeId } = await import('node-opcua');
  const { HistoryData } = await import('node-opcua-service-history');
  const pki = mkdtempSync(join(tmpdir(), 'opcua-bench-hist1m-bare-'));
  const cm = new OPCUACertificateManager({ rootFolder: pki });
  const client = OPCUAClient.create({ clientCertificateManager: cm, endpointMustExist: false, defaultTransactionTimeout: 300_000 });
  await client.connect(p.endpointUrl);
  const session = await client.createSession();
  const to = Date.now();
  const details = new ReadRawModifiedDetails({ isReadModified: false, startTime: new Date(to - GAP_MS), endTime: new Date(to), numValuesPerNode: 1_000, returnBounds: false });
  const m = measure();
  let values = 0;
  let outcome = 'done';
  try {
    const r = await session.historyRead(new HistoryReadRequest({ historyReadDetails: details, timestampsToReturn: TimestampsToReturn.Source, nodesToRead: [{ nodeId: resolveNodeId(p.nodeId) }] }));
    const res = r.results?.[0];
    if (res?.historyData instanceof HistoryData) values = res.historyData.dataValues?.length ?? 0;
  } catch (err) {
    outcome = `failed: ${(err as Error).message}`;
  }
  const u = m.stop();
  await session.close();
  await client.disconnect();
  await cm.dispose();
  rmSync(pki, { recursive: true, force: true });
  return { side: 'bare', values, outcome, ...u };
}

async function runGateway(p: Payload, maxMessageSize: string | undefined): Promise<Result> {
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
  const dir = mkdtempSync(join(tmpdir(), 'opcua-bench-hist1m-gw-'));
  const logger = silentLogger();
  const metrics = createMetrics();
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 4_000_000_000, whenFull: 'drop_oldest', logger, metrics, clock: systemClock });
  const gaps = new GapLedger(gatewayStore(db).owner('gaps'), metrics);
  const variable = 'mvr_huge';
  // The gateway's last run committed the variable a minute ago, and recorded the gap since.
  const from = Date.now() - GAP_MS;
  await buffer.append([{ variable, ts: from, value: 0 }]);
  await buffer.flush();
  gaps.open({ source: 'bench', variables: null, from, to: Date.now(), reason: 'gateway_stopped', filled: 'pending' }, Date.now());
  const cfg = opcuaServerSchema.parse({ name: 'bench', endpoint: p.endpointUrl, publishing_interval: 1_000, request_timeout: '120s', ...(maxMessageSize ? { max_message_size: maxMessageSize } : {}), nodes: [{ node_id: p.nodeId, variable }] });
  const stats = new SourceStats('bench', 'opcua', metrics, systemClock);
  const source = new OpcuaSource(cfg, { sink: buffer, logger, stats, metrics, clock: systemClock, dataDir: dir, history: { lastCommitted: buffer.lastCommitted, gaps } }, { path: 'opcua.servers[0]' });
  const detail = () => source.status().detail as { history: { values_total: number; last_run: { outcome: string } | null }; recoveries: Record<string, number> };
  // From the start: the connect is cheap next to the answer, and the backfill starts right after it.
  const m = measure();
  await source.start();
  const t0 = performance.now();
  for (;;) {
    if (detail().history.last_run) break;
    if (performance.now() - t0 > 600_000) throw new Error('backfill did not finish in 10 min');
    await new Promise((r) => setTimeout(r, 100));
  }
  const u = m.stop();
  const d = detail();
  const gap = gaps.list({ limit: 1 })[0];
  await source.close();
  await buffer.close();
  rmSync(dir, { recursive: true, force: true });
  return { side: maxMessageSize ? `gateway, max_message_size ${maxMessageSize}` : 'gateway (default 4 MiB)', values: d.history.values_total, outcome: `${d.history.last_run!.outcome}; gap filled ${gap.filled}${gap.note ? `: ${gap.note}` : ''}`, watchdogTrips: d.recoveries.watchdog ?? 0, ...u };
}

// --- orchestration ----------------------------------------------------------------------------

function child(role: string, payload?: unknown): ChildProcess {
  return fork(self, [role], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, HIST1M_PAYLOAD: payload ? JSON.stringify(payload) : '' } });
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
  if (role === 'bare' || role === 'gateway' || role === 'gateway-unbounded') {
    const payload = JSON.parse(process.env.HIST1M_PAYLOAD ?? '{}') as Payload;
    const r = role === 'bare' ? await runBare(payload) : await runGateway(payload, role === 'gateway-unbounded' ? '128MiB' : LIMITED);
    process.send?.(r);
    setTimeout(() => process.exit(0), 200);
    return;
  }

  smokeBanner(`HIST1M_VALUES ${VALUES.toLocaleString('en-US')}, the limited gateway's max_message_size ${LIMITED}`);
  console.log(`One HistoryRead answer of ${VALUES.toLocaleString('en-US')} values (a server that ignores numValuesPerNode), read by a bare node-opcua client and by the gateway's history backfill.`);
  console.log(`${NOISY_MACHINE_NOTE}\n`);
  const server = child('server');
  const payload = await firstMessage<Payload>(server);
  try {
    const bare = await firstMessage<Result>(child('bare', payload));
    const unbounded = await firstMessage<Result>(child('gateway-unbounded', payload));
    const gateway = await firstMessage<Result>(child('gateway', payload));
    console.log(
      table(
        [bare, unbounded, gateway].map((r) => ({
          side: r.side,
          'values taken': r.values,
          seconds: Number(r.seconds.toFixed(1)),
          'peak RSS growth MB': Math.round(r.peakRssGrowthMb),
          'longest event-loop block ms': Math.round(r.longestBlockMs),
          'watchdog trips': r.watchdogTrips ?? '-',
        })),
      ),
    );
    console.log(`\nbare: ${bare.outcome}`);
    console.log(`${unbounded.side}: ${unbounded.outcome}`);
    console.log(`${gateway.side}: ${gateway.outcome}`);
    const ratio = (a: number, b: number, floor: number) => (a / Math.max(floor, b)).toFixed(1);
    console.log(`\nratio bare / gateway: peak RSS growth ${ratio(bare.peakRssGrowthMb, gateway.peakRssGrowthMb, 1)}x, longest block ${ratio(bare.longestBlockMs, gateway.longestBlockMs, 10)}x`);
    console.log(`ratio gateway without the limit / with it: peak RSS growth ${ratio(unbounded.peakRssGrowthMb, gateway.peakRssGrowthMb, 1)}x, longest block ${ratio(unbounded.longestBlockMs, gateway.longestBlockMs, 10)}x`);
    console.log(verdict(gateway.longestBlockMs <= BLOCK_LIMIT_MS, `the gateway's longest event-loop block ${Math.round(gateway.longestBlockMs)} ms (limit ${BLOCK_LIMIT_MS} ms)`));
    console.log(verdict(gateway.peakRssGrowthMb <= RSS_LIMIT_MB, `the gateway's peak RSS grew ${Math.round(gateway.peakRssGrowthMb)} MB (limit ${RSS_LIMIT_MB} MB)`));
    console.log(verdict((gateway.watchdogTrips ?? 0) === 0, `no watchdog trip (a false gap) during the backfill: ${gateway.watchdogTrips}`));
  } finally {
    server.send('stop');
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
