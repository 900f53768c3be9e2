/**
 * CPU per OPC UA value on the gateway's ingest path, without the uplink: the open62541 plant
 * server (bench/open62541.ts) with N items changing every second, then, each in its own process
 * and one after the other,
 *
 *   bare     a node-opcua client that creates the same items and counts each NotificationMessage's
 *            values (bench/open62541.ts bareRawClient): the decoding any node-opcua client pays;
 *   ingest   the gateway's OPC UA source (src/sources/opcua) with its default settings, writing
 *            into a real SQLite buffer (synchronous=FULL, the gateway's defaults) through the
 *            sources' tapped sink with the console's value ring on it, as in the gateway.
 *
 * Each warms up BENCH_WARMUP s, then measures BENCH_SECONDS s: values received (committed, for
 * ingest), CPU of its process (user + system, all threads, /proc), µs of CPU per value, the
 * garbage collector's time (PerformanceObserver 'gc'), RSS. The ratio ingest / bare is the figure
 * to compare across machines and loads. What the uplink adds on top (claims, HTTP, import files)
 * is bench/plant-scale.ts's.
 *
 *   npm run build && npx tsx bench/opcua-ingest.ts
 *   BENCH_ITEMS=30000 BENCH_SECONDS=30 npx tsx bench/opcua-ingest.ts
 *
 * Env: BENCH_ITEMS (default 20000), BENCH_SECONDS (default 30), BENCH_WARMUP (default 10),
 * BENCH_SIDES (bare,ingest), BENCH_CPU_PROF=<dir> (the ingest process profiles its window),
 * BENCH_ALLOC_PROF=<file> (the ingest process samples allocations over its window, including
 * objects the collector already freed, and prints the top allocation sites).
 */
import { fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { cpuSecondsOf, envList, envNumber, freePort, mb, NOISY_MACHINE_NOTE, ratioText, requirePeer, rssOf, smokeBanner, table } from './lib.js';
import { bareRawClient, open62541BuildScript, plantNodeId, startPlantServer } from './open62541.js';

const SELF = fileURLToPath(import.meta.url);
const N = envNumber('BENCH_ITEMS', 20_000, 200);
const SECONDS = envNumber('BENCH_SECONDS', 30, 2);
const WARMUP = envNumber('BENCH_WARMUP', 10, 1);
const SIDES = envList('BENCH_SIDES', 'bare,ingest');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((l) => l.toFixed(1)).join(' / ');

interface Figures {
  values: number;
  cpuS: number;
  gcMs: number;
  rssPeak: number;
  setupS: number;
  note: string;
}

/** Measures this process over the window: `count()` values, CPU, GC, RSS. */
async function measure(count: () => number, before?: () => Promise<void>, after?: () => Promise<string>): Promise<Omit<Figures, 'setupS'>> {
  await sleep(WARMUP * 1_000);
  let gcMs = 0;
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) gcMs += e.duration;
  });
  obs.observe({ entryTypes: ['gc'] });
  let rssPeak = 0;
  const rss = setInterval(() => (rssPeak = Math.max(rssPeak, rssOf())), 250);
  await before?.();
  const c0 = cpuSecondsOf();
  const v0 = count();
  await sleep(SECONDS * 1_000);
  const cpuS = cpuSecondsOf() - c0;
  const values = count() - v0;
  const note = (await after?.()) ?? '';
  clearInterval(rss);
  obs.disconnect();
  return { values, cpuS, gcMs, rssPeak, note };
}

async function bareRole(a: { endpointUrl: string }): Promise<void> {
  const nodeIds = Array.from({ length: N }, (_, i) => plantNodeId(i + 1));
  const t0 = performance.now();
  const c = await bareRawClient({ endpointUrl: a.endpointUrl, nodeIds, samplingMs: 1_000, queueSize: 10, perCall: 1_000, publishRequests: Math.min(100, Math.ceil(N / 1_000) + 2) });
  const setupS = (performance.now() - t0) / 1_000;
  const m = await measure(c.count, undefined, async () => `wrong ${c.wrong()}`);
  await c.stop();
  process.send?.({ ...m, setupS });
  process.exit(0);
}

/** The gateway's OPC UA source into a real buffer, with the sources' tapped sink and the console's value ring. */
async function ingestRole(a: { endpointUrl: string; dir: string }): Promise<void> {
  const { openStore } = await import('../src/store/open.js');
  const { storeLimits, storeSchema } = await import('../src/store/config.js');
  const { GATEWAY_SCHEMAS } = await import('../src/runtime/store-schemas.js');
  const { SampleBuffer } = await import('../src/buffer/sample-buffer.js');
  const { bufferSchema } = await import('../src/buffer/config.js');
  const { systemClock } = await import('../src/core/clock.js');
  const { silentLogger } = await import('../src/core/logger.js');
  const { createMetrics } = await import('../src/core/metrics.js');
  const { TappedSink } = await import('../src/core/sample.js');
  const { SourceStats } = await import('../src/core/source.js');
  const { ValueRing } = await import('../src/console/value-ring.js');
  const { opcuaServerSchema } = await import('../src/sources/opcua/config.js');
  const { OpcuaSource } = await import('../src/sources/opcua/source.js');
  const logger = silentLogger();
  const metrics = createMetrics();
  // The gateway's default store and buffer settings (src/runtime/stages/store.ts builds them the same way).
  const b = bufferSchema.parse({ path: join(a.dir, 'buffer.db') });
  const st = storeSchema.parse({});
  const { store } = openStore({ path: b.path, synchronous: b.synchronous, schemas: GATEWAY_SCHEMAS, limits: storeLimits(st), reserveBytes: st.disk_reserve, logger, metrics });
  const buffer = new SampleBuffer(store, { commitIntervalMs: b.commit_interval, maxBytes: b.max_bytes, whenFull: b.when_full, sealAfterMs: b.seal_after, sealRows: b.seal_rows, compactSamples: b.compact_samples, keepFreeBytes: b.keep_free, returnFreeAfterMs: b.return_free_after, logger, metrics, clock: systemClock });
  const sink = new TappedSink(buffer);
  sink.addTap(new ValueRing());
  const stats = new SourceStats('plant', 'opcua', metrics, systemClock);
  const cfg = opcuaServerSchema.parse({ name: 'plant', endpoint: a.endpointUrl, nodes: Array.from({ length: N }, (_, i) => ({ node_id: plantNodeId(i + 1), variable: `mvr_opcua_${i + 1}` })) });
  const source = new OpcuaSource(cfg, { sink, logger, stats, metrics, clock: systemClock, dataDir: a.dir }, { path: 'opcua.servers[0]', pkiDir: join(tmpdir(), 'opcua-ingest-gw-pki') });
  const t0 = performance.now();
  await source.start();
  while (Number(source.status().detail?.nodes_monitored ?? 0) < N) await sleep(100);
  const setupS = (performance.now() - t0) / 1_000;
  const committed = () => buffer.stats().committedTotal;
  const profDir = process.env.BENCH_CPU_PROF;
  const allocFile = process.env.BENCH_ALLOC_PROF;
  const inspector = profDir || allocFile ? new (await import('node:inspector')).Session() : null;
  const post = (method: string, params?: object) => new Promise<unknown>((resolve, reject) => inspector!.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))));
  if (inspector) inspector.connect();
  const m = await measure(
    committed,
    async () => {
      if (profDir) await post('Profiler.enable').then(() => post('Profiler.start'));
      if (allocFile) await post('HeapProfiler.startSampling', { samplingInterval: 4_096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    },
    async () => {
      let note = `lost ${Number(source.status().detail?.values_lost ?? 0)}, refused ${JSON.stringify(source.status().samplesRefused)}`;
      if (profDir) {
        const { profile } = (await post('Profiler.stop')) as { profile: unknown };
        mkdirSync(profDir, { recursive: true });
        writeFileSync(join(profDir, `opcua-ingest-${N}.cpuprofile`), JSON.stringify(profile));
      }
      if (allocFile) {
        const { profile } = (await post('HeapProfiler.stopSampling')) as { profile: AllocNode & { head: AllocNode } };
        writeFileSync(allocFile, JSON.stringify(profile));
        note += `\n${topAllocations(profile.head)}`;
      }
      return note;
    },
  );
  await source.close();
  await buffer.close();
  process.send?.({ ...m, setupS });
  process.exit(0);
}

interface AllocNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocNode[];
}

/** Bytes allocated per function (self), the top 15. */
function topAllocations(head: AllocNode): string {
  const by = new Map<string, number>();
  let total = 0;
  const walk = (n: AllocNode) => {
    const k = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/.*node_modules\//, '').replace(/.*\/(src|dist)\//, '$1/')}:${n.callFrame.lineNumber}`;
    by.set(k, (by.get(k) ?? 0) + n.selfSize);
    total += n.selfSize;
    n.children.forEach(walk);
  };
  walk(head);
  return [`allocated ${mb(total)} MB (sampled) in the window; by function:`, ...[...by].sort((x, y) => y[1] - x[1]).slice(0, 15).map(([k, v]) => `  ${((v / total) * 100).toFixed(1).padStart(5)} %  ${k}`)].join('\n');
}

async function main(): Promise<void> {
  const role = process.argv[2];
  if (role) {
    const a = await new Promise<Record<string, unknown>>((r) => process.once('message', (m) => r(m as Record<string, unknown>)));
    if (role === 'bare') return bareRole(a as { endpointUrl: string });
    if (role === 'ingest') return ingestRole(a as { endpointUrl: string; dir: string });
    throw new Error(`unknown role ${role}`);
  }
  requirePeer(open62541BuildScript() !== null, 'the open62541 build script (../shared/tools/open62541/build.sh) is missing: the values come from its plant server (set OPEN62541_BUILD)');
  smokeBanner(`BENCH_ITEMS ${N}, BENCH_SECONDS ${SECONDS}, BENCH_WARMUP ${WARMUP}`);
  console.log(`OPC UA ingest path: ${N.toLocaleString('en-US')} items changing every 1 s (open62541 plant server), ${WARMUP} s warm-up, ${SECONDS} s measured per side.\n`);
  const server = await startPlantServer({ n: N, intervalMs: 1_000, port: await freePort() });
  const rows: Array<Record<string, string | number>> = [];
  const results: Record<string, Figures> = {};
  try {
    for (const side of SIDES) {
      const dir = mkdtempSync(join(tmpdir(), `opcua-ingest-${side}-`));
      const loadBefore = load();
      const s0 = cpuSecondsOf(server.pid);
      const cp = fork(SELF, [side], { execArgv: process.execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      cp.send({ endpointUrl: server.endpointUrl, dir });
      const f = await new Promise<Figures>((resolve, reject) => {
        cp.once('message', (m) => resolve(m as Figures));
        cp.once('exit', (code) => reject(new Error(`${side} exited (${code}) before reporting`)));
      });
      await new Promise((r) => cp.once('exit', r));
      const serverCores = (cpuSecondsOf(server.pid) - s0) / (WARMUP + SECONDS + f.setupS);
      rmSync(dir, { recursive: true, force: true });
      results[side] = f;
      const rate = f.values / SECONDS;
      rows.push({ side, 'values /s (of N)': `${Math.round(rate)} (${((rate / N) * 100).toFixed(1)} %)`, 'CPU cores': (f.cpuS / SECONDS).toFixed(3), 'µs CPU / value': f.values > 0 ? ((f.cpuS * 1e6) / f.values).toFixed(2) : 'n/a (no value)', 'GC ms / s': (f.gcMs / SECONDS).toFixed(1), 'RSS peak MB': mb(f.rssPeak), 'set-up s': f.setupS.toFixed(1), 'server CPU': serverCores.toFixed(2), load: `${loadBefore} → ${load()}` });
      console.log(table(rows.slice(-1)));
      if (f.note) console.log(`  ${f.note}`);
    }
    const b = results.bare;
    const g = results.ingest;
    if (b && g) {
      const per = (f: Figures) => (f.values > 0 ? f.cpuS / f.values : NaN);
      rows.push({ side: 'ratio ingest/bare', 'values /s (of N)': ratioText(g.values, b.values, 3), 'CPU cores': ratioText(g.cpuS, b.cpuS), 'µs CPU / value': ratioText(per(g), per(b)), 'GC ms / s': ratioText(g.gcMs, Math.max(1, b.gcMs)), 'RSS peak MB': ratioText(g.rssPeak, b.rssPeak), 'set-up s': ratioText(g.setupS, b.setupS), 'server CPU': '', load: '' });
    }
    console.log(`\n${table(rows)}\n`);
    console.log(NOISY_MACHINE_NOTE);
  } finally {
    await server.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
