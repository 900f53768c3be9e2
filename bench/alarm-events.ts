/**
 * Alarm events into stored annotations (issue 26): a node-opcua server raises condition events at
 * RATE per second for SECONDS (100 AlarmConditionType instances toggled round-robin, so every second
 * event ends an activation: RATE/2 range annotations per second), in a process of its own.
 *
 *   gateway: the whole gateway (startGateway) with opcua.servers[].events and annotations.alarms:
 *            decode, validate, one SQLite transaction per Publish response (synchronous=FULL),
 *            a range annotation queued in the outbox per activation. Counted when committed.
 *   bare:    a plain node-opcua client with the same subscription and event filter, counting the
 *            events and dropping them. The baseline: what the protocol stack alone costs.
 *
 * Each side runs in its own child process, one after the other, against the same server. Reported:
 * events/s from the storm's start to the last event stored (received, for bare), the lag after the
 * storm's end, CPU % of one core, peak RSS, heap growth; for the gateway also whether every
 * activation is in the outbox exactly once with the server's times. The server is the bottleneck
 * on a 2-core machine (node-opcua raising 1,000 conditions/s takes most of a core), so compare the
 * CPU per event and the lag, not the rate alone.
 *
 *   npx tsx bench/alarm-events.ts                                   # 1,000/s for 60 s
 *   ALARM_BENCH_RATE=500 ALARM_BENCH_SECONDS=20 npx tsx bench/alarm-events.ts
 */
import Database from 'better-sqlite3';
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envNumber, NOISY_MACHINE_NOTE, ratioText, smokeBanner, table, verdict } from './lib.js';

const RATE = envNumber('ALARM_BENCH_RATE', 1_000, 100);
const SECONDS = envNumber('ALARM_BENCH_SECONDS', 60, 2);
const ALARMS = 100;
const self = fileURLToPath(import.meta.url);

interface SideResult {
  side: 'gateway' | 'bare';
  events: number;
  seconds: number;
  lagAfterStormMs: number;
  cpuPercent: number;
  cpuUsPerEvent: number;
  peakRssMb: number;
  heapGrowthMb: number;
  /** gateway only: activations found in the outbox exactly, of those the server reported. */
  exact?: number;
  annotations?: number;
}

type ToChild = { cmd: 'go' } | { cmd: 'expect'; events: number; stormEndedAt: number; activations: Array<[number, number, number]>; conditionIds: string[] };

/** Waits for the count to reach what the parent says the storm raised; reports the measurements. */
async function measure(side: SideResult['side'], count: () => number, end: () => Promise<void>, check?: (m: Extract<ToChild, { cmd: 'expect' }>) => { exact: number; annotations: number }): Promise<void> {
  process.once('disconnect', () => void end().finally(() => process.exit(0)));
  let t0 = 0;
  let c0 = process.cpuUsage();
  let lastAt = 0;
  let last = 0;
  let peakRss = process.memoryUsage().rss;
  const heap: number[] = [];
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    if (t0) heap.push(m.heapUsed);
    const n = count();
    if (n !== last) {
      last = n;
      lastAt = performance.now();
    }
  }, 20);
  process.on('message', async (m: ToChild) => {
    if (m.cmd === 'go') {
      t0 = performance.now();
      c0 = process.cpuUsage();
      return;
    }
    const deadline = performance.now() + 120_000;
    while (count() < m.events && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const endedAt = Math.max(lastAt, performance.now() - 20);
    clearInterval(sampler);
    const cpu = process.cpuUsage(c0);
    const seconds = (endedAt - t0) / 1_000;
    const events = count();
    const early = Math.min(...heap.slice(0, Math.max(2, Math.floor(heap.length / 4))));
    const late = Math.max(...heap.slice(Math.floor(heap.length / 2)));
    const cpuUs = cpu.user + cpu.system;
    const result: SideResult = {
      side,
      events,
      seconds,
      lagAfterStormMs: Math.max(0, Date.now() - m.stormEndedAt - (performance.now() - endedAt)),
      cpuPercent: (cpuUs / 1e6 / seconds) * 100,
      cpuUsPerEvent: cpuUs / Math.max(1, events),
      peakRssMb: peakRss / 1e6,
      heapGrowthMb: (late - early) / 1e6,
      ...(check ? check(m) : {}),
    };
    process.send!(result);
  });
  process.send!({ ready: true });
}

async function runBare(endpointUrl: string): Promise<void> {
  const [{ AttributeIds, OPCUAClient, TimestampsToReturn, constructEventFilter, makeContentFilter }, { whereClause }, { SELECTED_FIELDS }] = await Promise.all([
    import('node-opcua'),
    import('../src/sources/opcua/condition-reader.js'),
    import('../src/sources/opcua/condition-decode.js'),
  ]);
  const client = OPCUAClient.create({ endpointMustExist: false });
  await client.connect(endpointUrl);
  const session = await client.createSession();
  const sub = await session.createSubscription2({ requestedPublishingInterval: 100, requestedMaxKeepAliveCount: 3, requestedLifetimeCount: 1_200, maxNotificationsPerPublish: 0, publishingEnabled: true, priority: 20 });
  const filter = constructEventFilter([...SELECTED_FIELDS], makeContentFilter(whereClause(['ns=0;i=2915'], 1)));
  const item = await sub.monitor({ nodeId: 'i=2253', attributeId: AttributeIds.EventNotifier }, { samplingInterval: 0, queueSize: 10_000, discardOldest: true, filter }, TimestampsToReturn.Neither);
  let n = 0;
  item.on('changed', () => void (n += 1));
  await measure('bare', () => n, async () => {
    await session.close().catch(() => undefined);
    await client.disconnect().catch(() => undefined);
  });
}

async function runGateway(endpointUrl: string): Promise<void> {
  const [{ validateConfig }, { startGateway }, { silentLogger }, { alarmExternalId }] = await Promise.all([
    import('../src/config/load.js'),
    import('../src/runtime/gateway.js'),
    import('../src/core/logger.js'),
    import('../src/annotations/external-id.js'),
  ]);
  const dir = mkdtempSync(join(tmpdir(), 'alarm-bench-gw-'));
  const { config } = validateConfig({
    gateway: { name: 'bench', data_dir: join(dir, 'data'), status_interval: 0 },
    log: { level: 'silent' },
    // Nothing listens there: delivery is not measured, the outbox is.
    service: { base_url: 'http://127.0.0.1:9/tracking/v1', auth_url: 'http://127.0.0.1:9', organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'bench', client_secret: 'bench-secret' } },
    buffer: { path: join(dir, 'buffer.db') },
    http: { enabled: false },
    opcua: { servers: [{ name: 'press1', endpoint: endpointUrl, events: { publishing_interval: 100 } }] },
    annotations: {
      site: { external_id: 'plant-bench' },
      machines: [{ key: 'press1', machine_variables: ['mvr_press1_state'] }],
      alarms: { servers: [{ server: 'press1', machine: 'press1' }], rules: [{ match: { condition_name: 'A*' }, reason_code: 'BULK' }] },
    },
  });
  const gw = await startGateway(config, { logger: silentLogger() });
  const annotator = gw.annotations!.alarms!;
  const stored = () => {
    const t = annotator.totals;
    return t.opened + t.closed + t.updated + t.instant + t.ignored + t.refused;
  };
  while ((gw.sources[0].status().detail as { events?: { refreshes?: { ok: number } } }).events?.refreshes?.ok !== 1) await new Promise((r) => setTimeout(r, 50));
  const end = async () => {
    await gw.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  await measure('gateway', stored, end, (m) => {
    // A reader of its own on the buffer file (WAL: it sees what the gateway committed).
    const reader = new Database(gw.config.buffer.path, { readonly: true });
    const rows = reader.prepare("SELECT external_id, started_at, ended_at FROM annotation_outbox WHERE origin = 'alarm'").all() as Array<{ external_id: string; started_at: number; ended_at: number }>;
    reader.close();
    const byId = new Map(rows.map((r) => [r.external_id, r]));
    let exact = 0;
    for (const [i, from, to] of m.activations) {
      const r = byId.get(alarmExternalId('bench', 'r', 'press1', m.conditionIds[i - 1], from));
      if (r && r.started_at === from && r.ended_at === to) exact += 1;
    }
    return { exact, annotations: rows.length };
  });
}

function firstMessage<T>(cp: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    cp.once('message', (m) => resolve(m as T));
    cp.once('exit', (code) => reject(new Error(`child exited with ${code} before reporting`)));
  });
}

async function main(): Promise<void> {
  const role = process.argv[2];
  if (role === 'bare') return runBare(process.argv[3]);
  if (role === 'gateway') return runGateway(process.argv[3]);

  smokeBanner(`ALARM_BENCH_RATE ${RATE}, ALARM_BENCH_SECONDS ${SECONDS}`);
  const { startAlarmStorm } = await import('../src/sim/alarm-storm.js');
  console.log(`Alarm events benchmark: ${RATE.toLocaleString('en-US')} condition events/s for ${SECONDS} s from ${ALARMS} alarms (a node-opcua server in its own process), per side.`);
  console.log(`${NOISY_MACHINE_NOTE}\n`);
  const storm = await startAlarmStorm(ALARMS);
  const results: SideResult[] = [];
  let raised = { events: 0, activations: 0, seconds: 0 };
  try {
    for (const side of ['bare', 'gateway'] as const) {
      process.stdout.write(`running ${side} ...\n`);
      const cp = fork(self, [side, storm.endpointUrl], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
      await firstMessage(cp);
      const reported = firstMessage<SideResult>(cp);
      cp.send({ cmd: 'go' } satisfies ToChild);
      const r = await storm.storm(RATE, SECONDS);
      raised = { events: r.events, activations: r.activations.length, seconds: r.seconds };
      // + the ConditionRefresh markers the gateway counts (RefreshStart/End are not in the bare count).
      cp.send({ cmd: 'expect', events: r.events, stormEndedAt: Date.now(), activations: r.activations, conditionIds: storm.conditionIds } satisfies ToChild);
      results.push(await reported);
      cp.disconnect();
      await new Promise((res) => cp.once('exit', res));
    }
  } finally {
    await storm.close();
  }
  const [bare, gw] = results;
  console.log(`\nserver: raised ${raised.events.toLocaleString('en-US')} events (${raised.activations.toLocaleString('en-US')} activations) in ${raised.seconds.toFixed(1)} s = ${(raised.events / raised.seconds).toFixed(0)}/s\n`);
  console.log(
    table(
      results.map((r) => ({
        side: r.side,
        events: r.events,
        'events/s': Math.round(r.events / r.seconds),
        'lag after storm s': Math.round(r.lagAfterStormMs / 100) / 10,
        'CPU %': Math.round(r.cpuPercent * 10) / 10,
        'CPU µs/event': Math.round(r.cpuUsPerEvent),
        'peak RSS MB': Math.round(r.peakRssMb),
        'heap growth MB': Math.round(r.heapGrowthMb * 10) / 10,
      })),
    ),
  );
  console.log(`\nstored annotations: ${gw.annotations?.toLocaleString('en-US')}; activations in the outbox exactly (id, started_at, ended_at): ${gw.exact?.toLocaleString('en-US')} of ${raised.activations.toLocaleString('en-US')}`);
  console.log(`ratio gateway/bare: throughput ${ratioText(gw.events / gw.seconds, bare.events / bare.seconds, 3)}, CPU per event ${ratioText(gw.cpuUsPerEvent, bare.cpuUsPerEvent)}x, RSS ${ratioText(gw.peakRssMb, bare.peakRssMb)}x`);
  console.log(verdict(gw.exact === raised.activations, "nothing lost: every activation is one range annotation with the server's times"));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
