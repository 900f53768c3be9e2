/**
 * OPC UA subscription throughput: N monitored items changing every second (default 5,000 at 1 s),
 * sustained for a minute.
 *
 *   gateway: the OpcuaSource (subscription, decoding, bounded queue) writing into the real SQLite
 *            buffer (group commit, synchronous=FULL); counted as samples committed.
 *   bare:    a plain node-opcua client subscribing to the same items, doing nothing with the
 *            values but counting them. The baseline: what the protocol stack alone costs.
 *
 * Each side runs in its own child process (so CPU and RSS are its own), one after the other,
 * against one simulator running in a third process. Reported per side: values/s, CPU % of one
 * core, peak RSS. The machine is shared and noisy: run twice before believing a small difference.
 *
 *   npx tsx bench/opcua-subscription.ts
 *   OPCUA_BENCH_ITEMS=5000 OPCUA_BENCH_SECONDS=60 OPCUA_BENCH_WARMUP=10 npx tsx bench/opcua-subscription.ts
 *   OPCUA_BENCH_SECONDS=10 OPCUA_BENCH_WARMUP=5 npx tsx bench/opcua-subscription.ts   # quick run
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNumber, ratioText, smokeBanner, table } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

const ITEMS = envNumber('OPCUA_BENCH_ITEMS', 5_000, 100);
const SECONDS = envNumber('OPCUA_BENCH_SECONDS', 60, 2);
const WARMUP = envNumber('OPCUA_BENCH_WARMUP', 10, 1);
/** Longest wait for the gateway's source to monitor every item before its warm-up starts. */
const MONITORED_DEADLINE_MS = 10 * 60_000;
const self = fileURLToPath(import.meta.url);

interface PhaseResult {
  side: 'gateway' | 'bare';
  values: number;
  seconds: number;
  perSecond: number;
  cpuPercent: number;
  peakRssMb: number;
  monitored: number;
}

// --- child roles ------------------------------------------------------------------------------

async function runServer(): Promise<void> {
  const { startOpcuaSimulator } = await import('../src/sim/opcua-server.js');
  const sim = await startOpcuaSimulator({ bulkVariables: ITEMS, updateIntervalMs: 1_000, pkiDir: join(tmpdir(), 'opcua-bench-sim-pki') });
  process.send?.({ endpointUrl: sim.endpointUrl, nodeIds: Array.from({ length: ITEMS }, (_, i) => sim.bulkNodeId(i + 1)) });
  process.on('message', (m) => {
    if (m === 'stop') void sim.close().then(() => process.exit(0));
  });
}

async function measure(side: PhaseResult['side'], count: () => number, monitored: () => number): Promise<PhaseResult> {
  await new Promise((r) => setTimeout(r, WARMUP * 1_000));
  const v0 = count();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 250);
  await new Promise((r) => setTimeout(r, SECONDS * 1_000));
  clearInterval(sampler);
  const seconds = (performance.now() - t0) / 1_000;
  const cpu = process.cpuUsage(c0);
  const values = count() - v0;
  return { side, values, seconds, perSecond: values / seconds, cpuPercent: ((cpu.user + cpu.system) / 1e6 / seconds) * 100, peakRssMb: peakRss / 1e6, monitored: monitored() };
}

async function runBare(endpointUrl: string, nodeIds: string[]): Promise<PhaseResult> {
  const { AttributeIds, ClientMonitoredItemGroup, OPCUAClient, OPCUACertificateManager, TimestampsToReturn } = await import('node-opcua');
  const pki = mkdtempSync(join(tmpdir(), 'opcua-bench-bare-'));
  const cm = new OPCUACertificateManager({ rootFolder: pki });
  const client = OPCUAClient.create({ clientCertificateManager: cm, endpointMustExist: false });
  await client.connect(endpointUrl);
  const session = await client.createSession();
  const subscription = await session.createSubscription2({ requestedPublishingInterval: 1_000, requestedMaxKeepAliveCount: 3, requestedLifetimeCount: 120, maxNotificationsPerPublish: 0, publishingEnabled: true });
  let values = 0;
  let monitored = 0;
  for (let start = 0; start < nodeIds.length; start += 1_000) {
    const chunk = nodeIds.slice(start, start + 1_000);
    const group = ClientMonitoredItemGroup.create(subscription, chunk.map((nodeId) => ({ nodeId, attributeId: AttributeIds.Value })), { samplingInterval: 1_000, queueSize: 10, discardOldest: true }, TimestampsToReturn.Both);
    await new Promise<void>((r) => group.on('initialized', () => r()));
    group.on('changed', () => void (values += 1));
    monitored += group.monitoredItems.length;
  }
  const result = await measure('bare', () => values, () => monitored);
  await session.close();
  await client.disconnect();
  rmSync(pki, { recursive: true, force: true });
  return result;
}

async function runGateway(endpointUrl: string, nodeIds: string[]): Promise<PhaseResult> {
  const [{ openBufferDatabase }, { SampleBuffer }, { systemClock }, { silentLogger }, { createMetrics }, { SourceStats }, { opcuaServerSchema }, { OpcuaSource }] = await Promise.all([
    import('../src/store/file/database.js'),
    import('../src/buffer/sample-buffer.js'),
    import('../src/core/clock.js'),
    import('../src/core/logger.js'),
    import('../src/core/metrics.js'),
    import('../src/core/source.js'),
    import('../src/sources/opcua/config.js'),
    import('../src/sources/opcua/source.js'),
  ]);
  const dir = mkdtempSync(join(tmpdir(), 'opcua-bench-gw-'));
  const logger = silentLogger();
  const metrics = createMetrics();
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 4_000_000_000, whenFull: 'drop_oldest', logger, metrics, clock: systemClock });
  const cfg = opcuaServerSchema.parse({
    name: 'bench',
    endpoint: endpointUrl,
    publishing_interval: 1_000,
    sampling_interval: 1_000,
    nodes: nodeIds.map((node_id, i) => ({ node_id, variable: `mvr_bench_${i + 1}` })),
  });
  const stats = new SourceStats('bench', 'opcua', metrics, systemClock);
  const source = new OpcuaSource(cfg, { sink: buffer, logger, stats, metrics, clock: systemClock, dataDir: dir }, { path: 'opcua.servers[0]' });
  await source.start();
  // start() returns while the source connects in the background: like the bare side, which has its
  // items once created, the warm-up starts when every item is monitored.
  const monitored = () => Number(source.status().detail?.nodes_monitored ?? 0);
  const deadline = performance.now() + MONITORED_DEADLINE_MS;
  while (monitored() < nodeIds.length) {
    if (performance.now() > deadline) throw new Error(`the gateway's source monitored ${monitored()} of ${nodeIds.length} items after ${MONITORED_DEADLINE_MS / 60_000} min`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const result = await measure('gateway', () => buffer.stats().committedTotal, monitored);
  await source.close();
  await buffer.close();
  rmSync(dir, { recursive: true, force: true });
  return result;
}

// --- orchestration ----------------------------------------------------------------------------

function child(role: string, payload?: unknown): ChildProcess {
  return fork(self, [role], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, OPCUA_BENCH_PAYLOAD: payload ? JSON.stringify(payload) : '' } });
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
    const { endpointUrl, nodeIds } = JSON.parse(process.env.OPCUA_BENCH_PAYLOAD ?? '{}') as { endpointUrl: string; nodeIds: string[] };
    const r = role === 'bare' ? await runBare(endpointUrl, nodeIds) : await runGateway(endpointUrl, nodeIds);
    process.send?.(r);
    setTimeout(() => process.exit(0), 200);
    return;
  }

  smokeBanner(`OPCUA_BENCH_ITEMS ${ITEMS}, OPCUA_BENCH_SECONDS ${SECONDS}, OPCUA_BENCH_WARMUP ${WARMUP}`);
  console.log(`OPC UA subscription benchmark: ${ITEMS.toLocaleString('en-US')} items changing every 1 s, ${WARMUP} s warm-up + ${SECONDS} s measured per side.`);
  console.log('Shared, noisy machine: compare the ratio, and run twice before trusting a small difference.\n');
  const server = child('server');
  const { endpointUrl, nodeIds } = await firstMessage<{ endpointUrl: string; nodeIds: string[] }>(server);
  try {
    const results: PhaseResult[] = [];
    for (const side of ['bare', 'gateway'] as const) {
      process.stdout.write(`running ${side} ...\n`);
      results.push(await firstMessage<PhaseResult>(child(side, { endpointUrl, nodeIds })));
    }
    const [bare, gw] = results;
    console.log(`\n${table([bare, gw].map((r) => ({ side: r.side, monitored: r.monitored, 'values/s': Math.round(r.perSecond), 'CPU %': Number(r.cpuPercent.toFixed(1)), 'peak RSS MB': Math.round(r.peakRssMb) })))}`);
    console.log(`\nexpected values/s: ${ITEMS.toLocaleString('en-US')} (every item changes once per second)`);
    console.log(`ratio gateway/bare: throughput ${ratioText(gw.perSecond, bare.perSecond, 3)}, CPU ${ratioText(gw.cpuPercent, bare.cpuPercent)}x, RSS ${ratioText(gw.peakRssMb, bare.peakRssMb)}x`);
    console.log('(gateway = decode + bounded queue + durable SQLite group commit; bare = node-opcua only, values dropped)');
  } finally {
    server.send('stop');
    await new Promise((r) => setTimeout(r, 500));
    server.kill();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
