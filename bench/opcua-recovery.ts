/**
 * OPC UA set-up and recovery at scale (issue 25: "subscription set-up time and recovery after a
 * server restart measured; read the server's operation limits and split requests accordingly").
 * For each N in BENCH_STEPS, N monitored items (sampling 1 s, publishing interval 1 s):
 *
 *   server    src/sim/opcua-server.ts in its own process, N bulk Double variables whose value
 *             changes at every sampling, operation limits the simulator's defaults (10,000 per
 *             call) and, once (BENCH_SMALL_AT, default the first step), MaxMonitoredItemsPerCall
 *             and MaxNodesPerRead of BENCH_SMALL_LIMIT (default 1,000) to show the split.
 *   baseline  a bare node-opcua client in its own process: one subscription, the same monitored
 *             items created in calls of the same size as the gateway's (1,000, lowered to the
 *             server's MaxMonitoredItemsPerCall), node-opcua's own reconnection (which re-creates
 *             the subscription and items when the server lost them, split to the server's limit).
 *   gateway   the compiled gateway in its own process (startGatewayProcess), durable buffer,
 *             default settings except the node list, delivering to the emulator in a fourth one.
 *
 * Set-up, from the gateway's start (the bare client's connect):
 *   monitored   every item monitored: the gateway's /status nodes_monitored = N (the bare
 *               client: its last CreateMonitoredItems answered); the server's count of the
 *               session's items is printed beside it;
 *   values      a value of every item committed: every variable's last committed value in the
 *               console's /console/api/variables (fed by the commits) is newer than the start
 *               (the bare client: every item's 'changed' seen). That request lists N rows, so it
 *               is made only once committed_total has grown by N, then every N/20 ms (1 s at
 *               20,000 items, 5 s at 100,000): the time has that resolution. The console
 *               tracks at most 50,000 variables: beyond, "every value" is every tracked variable
 *               fresh, N values committed since and (recovery) every item monitored: a lower bound
 *               of the time, printed with ≥.
 *   The operation limits the gateway read (its status, operation_limits) and the server's count
 *   of CreateMonitoredItems calls, items asked for, the largest call and calls beyond its limit
 *   (MonitoredItemStats) are printed.
 * Recovery, for each BENCH_RESTARTS kind (kill: SIGKILL of the server process; stop: the
 * simulator closes cleanly, shutdown(0)), then BENCH_DOWNTIME s (default 5) before a new server
 * process with the same nodes starts on the same port:
 *   server back  the new process listens (its address space built);
 *   session      a session of the client exists on the new server;
 *   monitored    the server holds N items for that client's session (polled once a second; the
 *                gateway's nodes_monitored is not a recovery signal: node-opcua repairs the
 *                subscription underneath it);
 *   values       every item's value committed again (newer than the kill).
 *   Times are from the kill and from "server back". Also: the gateway's CPU (cores) and peak RSS
 *   from the kill to "values", the event-loop p99/max over the same span (the worst of the
 *   /metrics scrapes 5 s apart: prom-client resets its histogram at every scrape, see
 *   bench/README.md; the spans of the bench's own console list requests are left out and their
 *   longest stall printed beside as "list"), how the gateway recovered (status recoveries by how), the gap it recorded
 *   (/api/gaps: reason, length, whether history filled it: the simulator keeps no history of its
 *   bulk variables) and NotificationMessages it missed or values with the Overflow bit
 *   (gateway_opcua_missed_messages_total, gateway_opcua_queue_overflows_total).
 * After set-up and after each recovery a BENCH_SETTLE s window (default 10) reports what the
 * server managed to sample (one node-opcua process samples ~16–28k items/s on two shared cores,
 * bench/README.md) against what was committed.
 *
 * Times across processes are epoch ms (Date.now()): the processes share no monotonic clock.
 * Parts of bench/plant-scale.ts (child processes over IPC, the gateway's configuration, the
 * emulator's fixture) are written again here: that file is not importable without running it.
 *
 * BENCH_OPCUA_SERVER=open62541 uses the C plant server of ../shared/tools/open62541 instead
 * (bench/open62541.ts: `plant_server PORT N 1000`, values changing every second, ~0.2 core at
 * 100,000 items; a restart is the process killed or stopped and started again on the same port,
 * the small-limit run its --op-limit). It keeps no count of items per session: "monitored" is then
 * the gateway's nodes_monitored (the items the server accepted again) and, for the bare client,
 * "every value" alone; "server back" is its `ready` line.
 *
 *   npm run build && nice -n 10 npx tsx bench/opcua-recovery.ts
 *   BENCH_STEPS=10000 BENCH_RESTARTS=kill nice -n 10 npx tsx bench/opcua-recovery.ts
 *
 * Env: BENCH_STEPS (default 10000,30000,100000), BENCH_RESTARTS (kill,stop), BENCH_DOWNTIME (s,
 * default 5), BENCH_SETTLE (s, default 10), BENCH_SMALL_LIMIT (default 1000; 0: no small-limit
 * run), BENCH_SMALL_AT (the step it runs at, default the first), BENCH_SIDES (bare,gateway),
 * BENCH_DEADLINE (s per phase, default 900), BENCH_GATEWAY_LOG (the gateway's log lines to a file),
 * BENCH_HISTORY_OFF=1 (diagnosis: the gateway with history.backfill off, not a default setting),
 * BENCH_SAMPLING (s, default 1: the sampling interval of every item, the gateway's sampling_interval),
 * BENCH_MEM_LOG (a file: the gateway's RSS, V8 heapTotal and heapUsed from /metrics every 3 s, one
 * JSON line each with the phase; the peaks per phase are printed either way),
 * BENCH_GATEWAY_NODE_ARGS (space-separated flags for the gateway's node, e.g. --trace-gc;
 * diagnosis only).
 */
import { fork, type ChildProcess, type Serializable } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DataValue } from 'node-opcua';
import type { MonitoredItemStats } from '../src/sim/opcua-server.js';
import { cpuSecondsOf, envList, envNumber, freePort, getJson, mb, NOISY_MACHINE_NOTE, rssOf, requirePeer, rssSampler, smokeBanner, startEmulatorProcess, startGatewayProcess, table, type Proc } from './lib.js';
import { open62541BuildScript, startPlantServer } from './open62541.js';

const SELF = fileURLToPath(import.meta.url);
const list = (v: string | undefined, d: string) => (v ?? d).split(',').map((s) => s.trim()).filter(Boolean);
const STEPS = envList('BENCH_STEPS', '10000,30000,100000', '200').map(Number);
const RESTARTS = envList('BENCH_RESTARTS', 'kill,stop', 'kill') as RestartKind[];
const SIDES = list(process.env.BENCH_SIDES, 'bare,gateway') as Side[];
const DOWNTIME_MS = envNumber('BENCH_DOWNTIME', 5, 1) * 1_000;
const SETTLE_MS = envNumber('BENCH_SETTLE', 10, 1) * 1_000;
// Smoke: no second run with small limits (it would double the time).
const SMALL_LIMIT = envNumber('BENCH_SMALL_LIMIT', 1_000, 0);
const SMALL_AT = envNumber('BENCH_SMALL_AT', STEPS[0]);
const DEADLINE_MS = Number(process.env.BENCH_DEADLINE ?? 900) * 1_000;
/** Diagnosis only (not the default settings): the gateway without its historical backfill, whose AccessLevel reads share the connect. */
const HISTORY_OFF = process.env.BENCH_HISTORY_OFF === '1';
/**
 * Sampling interval of every item, ms (default 1,000, the issue's). A node-opcua server in one
 * process on two cores cannot sample 100,000 items a second: it never finished creating them
 * (bench/README.md), so the 100k step is measured with BENCH_SAMPLING=5 as well.
 */
const SAMPLING_MS = Number(process.env.BENCH_SAMPLING ?? 1) * 1_000;
/** The gateway's own chunk (src/sources/opcua/subscription-reader.ts CREATE_CHUNK), for the bare client's split. */
const CREATE_CHUNK = 1_000;
const SIM_PKI = join(tmpdir(), 'opcua-recovery-sim-pki');
const MEM_LOG = process.env.BENCH_MEM_LOG ?? null;
const GATEWAY_NODE_ARGS = list(process.env.BENCH_GATEWAY_NODE_ARGS, '').flatMap((a) => a.split(/\s+/)).filter(Boolean);
/** The OPC UA server: the node-opcua simulator (default) or the open62541 plant server (see the header). */
const OPEN62541 = process.env.BENCH_OPCUA_SERVER === 'open62541';

type RestartKind = 'kill' | 'stop';
type Side = 'bare' | 'gateway';
type Limits = { maxMonitoredItemsPerCall: number; maxNodesPerRead: number } | undefined;
const variableOf = (i: number) => `mvr_opcua_${i + 1}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((l) => l.toFixed(1)).join(' / ');
const s1 = (ms: number | null | undefined) => (ms === null || ms === undefined ? '-' : (ms / 1_000).toFixed(1));

// ================================================================ child roles

/** The simulator with N bulk variables; answers 'items' (MonitoredItemStats), 'reads' (samplings so far), 'stop' (clean close, exit). */
async function serverRole(a: { n: number; port: number; limits: Limits }): Promise<void> {
  const { startOpcuaSimulator } = await import('../src/sim/opcua-server.js');
  const sim = await startOpcuaSimulator({ port: a.port, bulkVariables: a.n, updateIntervalMs: 1_000, securityModes: ['None'], pkiDir: SIM_PKI, historize: false, ...(a.limits ? { operationLimits: a.limits } : {}) });
  process.send?.({ endpointUrl: sim.endpointUrl, port: sim.port, nodeIdPrefix: sim.bulkNodeId(1).slice(0, -1) });
  process.on('message', (m) => {
    if (m === 'items') process.send?.({ items: sim.monitoredItemStats() });
    if (m === 'reads') process.send?.({ reads: sim.bulkStats().reads });
    if (m === 'stop') void sim.close().finally(() => process.exit(0));
  });
}

/**
 * A bare node-opcua client: the gateway's session and subscription parameters (default config),
 * items created in the gateway's chunk size, node-opcua's reconnection. 'mark' starts a new round
 * of "every item seen" (after a restart); 'progress' answers what it saw and when.
 */
async function bareRole(a: { endpointUrl: string; n: number; nodeIdPrefix: string; samplingMs: number }): Promise<void> {
  const { AttributeIds, OPCUAClient, OPCUACertificateManager, TimestampsToReturn, resolveNodeId } = await import('node-opcua');
  const { entriesPerCall, readServerOperationLimits } = await import('../src/sources/opcua/operation-limits.js');
  const n = a.n;
  const seen = new Uint8Array(n);
  let seenCount = 0;
  let markAt = Date.now();
  let allSeenAt: number | null = null;
  const events: Record<string, number> = {};
  const client = OPCUAClient.create({
    clientName: 'bare-client',
    clientCertificateManager: new OPCUACertificateManager({ rootFolder: join(tmpdir(), 'opcua-recovery-bare-pki') }),
    endpointMustExist: false,
    keepSessionAlive: false,
    requestedSessionTimeout: 30_000,
    defaultTransactionTimeout: 15_000,
    connectionStrategy: { maxRetry: 1, initialDelay: 1_000, maxDelay: 30_000, randomisationFactor: 0.2 },
  });
  const on = client as unknown as { on(event: string, f: () => void): void };
  for (const e of ['connection_lost', 'start_reconnection', 'after_reconnection', 'connection_reestablished']) on.on(e, () => void (events[e] ??= Date.now()));
  // Set-up counts from the process's start, as the gateway's does (node start, loading node-opcua).
  const t0 = performance.timeOrigin;
  await client.connect(a.endpointUrl);
  const session = await client.createSession();
  const limits = await readServerOperationLimits(session);
  const subscription = await session.createSubscription2({ requestedPublishingInterval: 1_000, requestedLifetimeCount: 120, requestedMaxKeepAliveCount: 3, maxNotificationsPerPublish: Math.floor((4 * 1024 * 1024) / 64), publishingEnabled: true, priority: 10 });
  const perCall = entriesPerCall(CREATE_CHUNK, limits.maxMonitoredItemsPerCall);
  let calls = 0;
  let good = 0;
  for (let start = 0; start < n; start += perCall) {
    const count = Math.min(perCall, n - start);
    const group = await subscription.monitorItems(
      Array.from({ length: count }, (_, i) => ({ nodeId: resolveNodeId(`${a.nodeIdPrefix}${start + i + 1}`), attributeId: AttributeIds.Value })),
      { samplingInterval: a.samplingMs, queueSize: 10, discardOldest: true },
      TimestampsToReturn.Both,
    );
    calls += 1;
    process.send?.({ created: start + count });
    group.monitoredItems.forEach((item) => void (item.statusCode.isGood() ? (good += 1) : 0));
    group.on('changed', (_item: unknown, dv: DataValue, index: number) => {
      const k = start + index;
      if (seen[k] === 0 && (dv.sourceTimestamp?.getTime() ?? Date.now()) > markAt) {
        seen[k] = 1;
        seenCount += 1;
        if (seenCount === n) allSeenAt = Date.now();
      }
    });
  }
  const monitoredAt = Date.now();
  process.send?.({ t0, monitoredAt, good, calls, perCall, limits });
  process.on('message', (m) => {
    if (m === 'mark') {
      seen.fill(0);
      seenCount = 0;
      allSeenAt = null;
      markAt = Date.now();
      for (const k of Object.keys(events)) delete events[k];
    }
    if (m === 'progress') process.send?.({ seenCount, allSeenAt, events });
    // Closing the session deletes its subscription on the server (Part 4 §5.6.4).
    if (m === 'stop') void Promise.race([client.disconnect(), sleep(5_000)]).finally(() => process.exit(0));
  });
}

// ================================================================ processes

function child(role: string, args: Serializable): ChildProcess {
  const cp = fork(SELF, [role], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  cp.send(args);
  return cp;
}

/** The next message of `cp` that has `key` (answers to different questions share the channel). */
function answer<T>(cp: ChildProcess, key: string, ask?: string, timeoutMs = 60_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      cp.off('message', onMessage);
      cp.off('exit', onExit);
    };
    const onMessage = (m: unknown) => {
      if (typeof m === 'object' && m !== null && key in m) {
        done();
        resolve(m as T);
      }
    };
    const onExit = (code: number | null) => {
      done();
      reject(new Error(`child exited (${code}) before answering ${key}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no ${key} answer in ${timeoutMs / 1000} s`));
    }, timeoutMs);
    cp.on('message', onMessage);
    cp.once('exit', onExit);
    if (ask) cp.send(ask);
  });
}

function exited(cp: ChildProcess): Promise<void> {
  return cp.exitCode !== null || cp.signalCode !== null ? Promise.resolve() : new Promise((r) => cp.once('exit', () => r()));
}

async function stopChild(cp: ChildProcess): Promise<void> {
  if (cp.exitCode !== null || cp.signalCode !== null) return;
  const t = setTimeout(() => cp.kill('SIGKILL'), 10_000);
  cp.send('stop');
  await exited(cp);
  clearTimeout(t);
}

interface Server {
  pid: number;
  endpointUrl: string;
  port: number;
  nodeIdPrefix: string;
  startedAt: number;
  readyAt: number;
  /** SIGKILL. */
  kill(): void;
  /** A clean stop (the simulator closes its sessions; plant_server SIGTERM). */
  stop(): Promise<void>;
  exited: Promise<void>;
  /** The simulator's count of CreateMonitoredItems calls and items per session; null for open62541. */
  items: (() => Promise<MonitoredItemStats>) | null;
  /** Samplings of the bulk variables so far. */
  reads(): Promise<number>;
}

async function startServer(n: number, port: number, limits: Limits): Promise<Server> {
  const startedAt = Date.now();
  if (OPEN62541) {
    const plant = await startPlantServer({ n, intervalMs: SAMPLING_MS, port: port || (await freePort()), args: limits ? ['--op-limit', String(limits.maxMonitoredItemsPerCall)] : [] });
    return { pid: plant.pid, endpointUrl: plant.endpointUrl, port: plant.port, nodeIdPrefix: 'ns=1;s=plant.v', startedAt, readyAt: Date.now(), kill: () => plant.proc.kill('SIGKILL'), stop: () => plant.stop(), exited: plant.exited, items: null, reads: async () => plant.latest().reads };
  }
  const cp = child('server', { n, port, limits });
  const m = await answer<{ endpointUrl: string; port: number; nodeIdPrefix: string }>(cp, 'endpointUrl', undefined, DEADLINE_MS);
  return {
    pid: cp.pid!,
    ...m,
    startedAt,
    readyAt: Date.now(),
    kill: () => cp.kill('SIGKILL'),
    stop: async () => {
      cp.send('stop');
      await exited(cp);
    },
    exited: exited(cp),
    items: async () => (await answer<{ items: MonitoredItemStats }>(cp, 'items', 'items')).items,
    reads: async () => (await answer<{ reads: number }>(cp, 'reads', 'reads')).reads,
  };
}

/** CPU share of the server process over the last second. */
async function cpuOf(srv: Server): Promise<number> {
  const c0 = cpuSecondsOf(srv.pid);
  await sleep(1_000);
  return cpuSecondsOf(srv.pid) - c0;
}
const itemsOf = async (srv: Server): Promise<MonitoredItemStats | null> => (srv.items ? srv.items() : null);
const readsOf = (srv: Server) => srv.reads();
const itemsFor = (st: MonitoredItemStats | null, side: Side) => (st === null ? NaN : Object.entries(st.itemsBySession).reduce((t, [name, k]) => t + ((side === 'gateway') === name.startsWith('edge-gateway') ? k : 0), 0));
/** Whether the server holds a session of `side` (null: it cannot say, open62541). */
const hasSession = (st: MonitoredItemStats | null, side: Side) => (st === null ? null : Object.keys(st.itemsBySession).some((k) => (side === 'gateway') === k.startsWith('edge-gateway')));

// ================================================================ measurements

interface Setup {
  /** Gateway: its process printed "gateway started" (config read, buffer open); bare: null. */
  readyS: number | null;
  monitoredS: number | null;
  valuesS: number | null;
  serverItems: number;
  calls: string;
  limits: string;
  settle: string;
}

interface Recovery {
  kind: RestartKind;
  backS: number;
  sessionS: number | null;
  monitoredS: number | null;
  valuesS: number | null;
  how: string;
  gap: string;
  missed: string;
  cores: number | null;
  peakRss: number | null;
  loop: string;
  calls: string;
  settle: string;
}

/** A server restart: kill or stop, the downtime, a new process on the same port. */
async function restart(srv: Server, kind: RestartKind, n: number, limits: Limits): Promise<{ server: Server; killAt: number; backAt: number }> {
  const killAt = Date.now();
  if (kind === 'kill') srv.kill();
  else await srv.stop();
  await srv.exited;
  await sleep(DOWNTIME_MS);
  const server = await startServer(n, srv.port, limits);
  return { server, killAt, backAt: server.readyAt };
}

/** The CreateMonitoredItems calls since `before` (all calls of a fresh server without it). */
function callsText(st: MonitoredItemStats | null, before?: MonitoredItemStats | null): string {
  if (st === null) return 'not counted (open62541)';
  const sizes = st.callSizes.slice(st.callSizes.length - (st.createCalls - (before?.createCalls ?? 0)));
  return `${sizes.length} calls, ${sizes.reduce((t, k) => t + k, 0)} items, max ${Math.max(0, ...sizes)}/call, ${st.callsOverLimit - (before?.callsOverLimit ?? 0)} over the limit`;
}

/** What the server sampled per second over SETTLE_MS, against the client's own rate (values/s). */
async function settle(srv: Server, n: number, received: () => Promise<number>): Promise<string> {
  const r0 = await readsOf(srv);
  const c0 = await received();
  const t0 = Date.now();
  await sleep(SETTLE_MS);
  const r1 = await readsOf(srv);
  const c1 = await received();
  const s = (Date.now() - t0) / 1_000;
  const expected = (n * 1_000) / SAMPLING_MS;
  const pct = (v: number) => `${((v / s / expected) * 100).toFixed(0)} %`;
  return `server sampled ${pct(r1 - r0)} of ${Math.round(expected)}/s, client got ${pct(c1 - c0)}`;
}

// ---------------------------------------------------------------- bare client

async function bareRun(n: number, srvIn: Server, limits: Limits): Promise<{ setup: Setup; recoveries: Recovery[]; server: Server }> {
  let srv = srvIn;
  const calls0 = await itemsOf(srv);
  const cp = child('bare', { endpointUrl: srv.endpointUrl, n, nodeIdPrefix: srv.nodeIdPrefix, samplingMs: SAMPLING_MS });
  let created = 0;
  cp.on('message', (m) => void (typeof m === 'object' && m !== null && 'created' in m ? (created = (m as { created: number }).created) : 0));
  const first = await answer<{ t0: number; monitoredAt: number; good: number; calls: number; perCall: number; limits: { maxMonitoredItemsPerCall: number; maxNodesPerRead: number } }>(cp, 'monitoredAt', undefined, DEADLINE_MS).catch(async (err: Error) => {
    await stopChild(cp);
    throw new Error(`bare client ${n}: ${err.message}; ${created} of ${n} items created (the server: ${((await cpuOf(srv)) * 100).toFixed(0)} % of a core, RSS ${mb(rssOf(srv.pid))} MB)`);
  });
  const progress = () => answer<{ seenCount: number; allSeenAt: number | null; events: Record<string, number> }>(cp, 'seenCount', 'progress');
  let valuesAt: number | null = null;
  for (const end = Date.now() + DEADLINE_MS; Date.now() < end; await sleep(500)) {
    const p = await progress();
    if (p.allSeenAt !== null) {
      valuesAt = p.allSeenAt;
      break;
    }
  }
  const st = await itemsOf(srv);
  // The bare client counts every value it receives only per item once; its rate is the server's sent count, so report sampling only.
  const setup: Setup = {
    readyS: null,
    monitoredS: first.good === n ? first.monitoredAt - first.t0 : null,
    valuesS: valuesAt === null ? null : valuesAt - first.t0,
    serverItems: itemsFor(st, 'bare'),
    calls: callsText(st, calls0),
    limits: `MaxMonitoredItemsPerCall ${first.limits.maxMonitoredItemsPerCall}, MaxNodesPerRead ${first.limits.maxNodesPerRead} (chunk ${first.perCall})`,
    settle: await settle(srv, n, async () => 0).then((t) => t.replace(/, client got .*/, '')),
  };
  const recoveries: Recovery[] = [];
  try {
    for (const kind of RESTARTS) {
      const before = await itemsOf(srv).catch(() => undefined);
      cp.send('mark');
      const r = await restart(srv, kind, n, limits);
      srv = r.server;
      let sessionAt: number | null = null;
      let monitoredAt: number | null = null;
      let valuesAtR: number | null = null;
      let p = await progress();
      for (const end = Date.now() + DEADLINE_MS; Date.now() < end && valuesAtR === null; await sleep(1_000)) {
        const items = await itemsOf(srv);
        if (hasSession(items, 'bare')) sessionAt ??= Date.now();
        if (itemsFor(items, 'bare') >= n) monitoredAt ??= Date.now();
        p = await progress();
        if (p.allSeenAt !== null) valuesAtR = p.allSeenAt;
      }
      const st2 = await itemsOf(srv);
      void before;
      recoveries.push({
        kind,
        backS: r.backAt - r.killAt,
        sessionS: sessionAt && sessionAt - r.killAt,
        monitoredS: monitoredAt && monitoredAt - r.killAt,
        valuesS: valuesAtR && valuesAtR - r.killAt,
        how: Object.keys(p.events).join(', ') || '-',
        gap: '-',
        missed: `${p.seenCount} of ${n} items seen again`,
        cores: null,
        peakRss: null,
        loop: '-',
        calls: callsText(st2),
        settle: valuesAtR ? (await settle(srv, n, async () => 0)).replace(/, client got .*/, '') : '-',
      });
      printRecovery(`bare ${n}`, recoveries.at(-1)!, r.backAt - r.killAt);
    }
  } finally {
    await stopChild(cp);
  }
  return { setup, recoveries, server: srv };
}

// ---------------------------------------------------------------- gateway

interface Status {
  buffer: { committed_total: number };
  sources: Array<{ state: string; detail?: Record<string, unknown> }>;
}

/** Variables the console's value ring tracks at most (src/console/value-ring.ts maxVariables). */
const CONSOLE_CAP = 50_000;

/** Variables whose last committed value is newer than `since` (the console's list, fed by the commits). */
async function committedSince(base: string, since: number): Promise<number> {
  const v = await getJson<{ variables: Array<{ id: string; ts: number | null }> }>(`${base}/console/api/variables`);
  let k = 0;
  for (const row of v.variables) if (row.id.startsWith('mvr_opcua_') && row.ts !== null && row.ts > since) k += 1;
  return k;
}

/**
 * Waits until `n` variables have a value committed after `since`: cheap /status first, then the
 * console's list (1–5 s apart). `around` runs before and after each list request (with 'before' or
 * 'after'), so the gateway's event-loop figures can leave out the bench's own requests.
 */
async function everyValueCommitted(base: string, n: number, since: number, committed0: number, deadline: number, tick?: () => Promise<void>, around?: (when: 'before' | 'after') => Promise<void>): Promise<number | null> {
  let lastList = 0;
  while (Date.now() < deadline) {
    await tick?.();
    const s = await getJson<Status>(`${base}/status`).catch(() => null);
    // The list is N rows, costly for the gateway at 100,000: N/20 ms apart, from 1 to 5 s.
    if (s && s.buffer.committed_total - committed0 >= n && Date.now() - lastList >= Math.min(5_000, Math.max(1_000, n / 20))) {
      await around?.('before');
      lastList = Date.now();
      const at = Date.now();
      const k = await committedSince(base, since).catch(() => 0);
      await around?.('after');
      // The console tracks at most CONSOLE_CAP variables (src/console/value-ring.ts): beyond, every
      // tracked one fresh and N values committed since is what can be seen.
      if (k >= Math.min(n, CONSOLE_CAP)) return at;
    }
    await sleep(500);
  }
  return null;
}

async function metricsText(base: string): Promise<string> {
  return fetch(`${base}/metrics`).then((r) => r.text()).catch(() => '');
}
function metric(text: string, name: string): number {
  let t = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) t += Number(m[1]);
  return t;
}

/**
 * The gateway's memory by phase (issue 25: ≤ 400 MB RSS at 100,000 items): /proc RSS every
 * 250 ms, and /metrics every 3 s for V8's heapTotal and heapUsed beside RSS. Phases: start (until
 * the configuration's parse garbage is collected), set-up, steady, down (kill to server back),
 * rebuild (to every item monitored again), steady after. `stop()` says, per phase, the highest RSS
 * (/proc), the highest heapTotal and heapUsed, and the lowest heapUsed seen (about the live heap:
 * the polls after a major GC).
 */
class MemWatch {
  private current = 'start';
  private readonly by = new Map<string, { rss: number; total: number; used: number; usedMin: number; from: number; to: number }>();
  private readonly timers: NodeJS.Timeout[] = [];
  private startUsedMax = 0;
  private pendingPhase = 'set-up';
  constructor(pid: number, private readonly base: string, private readonly t0: number) {
    this.timers.push(setInterval(() => this.note({ rss: rssOf(pid) }), 250));
    this.timers.push(setInterval(() => void this.poll(), 3_000));
  }
  phase(name: string): void {
    if (this.current === 'start' && name === 'set-up') this.pendingPhase = name;
    else this.current = name;
  }
  private entry() {
    let e = this.by.get(this.current);
    if (!e) this.by.set(this.current, (e = { rss: 0, total: 0, used: 0, usedMin: Infinity, from: Date.now(), to: Date.now() }));
    return e;
  }
  private note(m: { rss?: number; total?: number; used?: number }): void {
    const e = this.entry();
    e.to = Date.now();
    if (m.rss) e.rss = Math.max(e.rss, m.rss);
    if (m.total) e.total = Math.max(e.total, m.total);
    if (m.used) {
      e.used = Math.max(e.used, m.used);
      e.usedMin = Math.min(e.usedMin, m.used);
    }
  }
  private async poll(): Promise<void> {
    const text = await metricsText(this.base);
    if (!text) return;
    const m = { rss: metric(text, 'gateway_process_process_resident_memory_bytes'), total: metric(text, 'gateway_process_nodejs_heap_size_total_bytes'), used: metric(text, 'gateway_process_nodejs_heap_size_used_bytes'), external: metric(text, 'gateway_process_nodejs_external_memory_bytes') };
    // The configuration's parse garbage (the YAML parser's tree, hundreds of MB at 100,000 nodes)
    // is freed only at the first major GC after start: 'start' lasts until it is gone, so the
    // set-up figures are the set-up's.
    if (this.current === 'start') {
      const first = this.startUsedMax === 0;
      this.startUsedMax = Math.max(this.startUsedMax, m.used);
      // Gone: a major GC freed it and V8 gave the pages back; or there was none to see (collected before ready).
      if ((m.used < 0.5 * this.startUsedMax && m.total < 2 * m.used) || (first && m.total < 250 * 2 ** 20)) this.current = this.pendingPhase;
    }
    this.note(m);
    if (MEM_LOG) appendFileSync(MEM_LOG, JSON.stringify({ t: Math.round((Date.now() - this.t0) / 100) / 10, phase: this.current, rss: mb(m.rss), heapTotal: mb(m.total), heapUsed: mb(m.used), external: mb(m.external), load: loadavg()[0] }) + '\n');
  }
  stop(): string {
    for (const t of this.timers) clearInterval(t);
    return [...this.by].map(([k, e]) => `${k} (${s1(e.to - e.from)} s): RSS peak ${mb(e.rss)}, heapTotal peak ${mb(e.total)}, heapUsed ${e.usedMin === Infinity ? '-' : mb(e.usedMin)}–${mb(e.used)} MB`).join('; ');
  }
}

async function gatewayRun(n: number, srvIn: Server, limits: Limits, dir: string): Promise<{ setup: Setup; recoveries: Recovery[]; server: Server }> {
  let srv = srvIn;
  const { DEMO_FIXTURE } = await import('../src/emulator/demo-fixture.js');
  const fixture = { ...DEMO_FIXTURE, machine_variables: [...DEMO_FIXTURE.machine_variables, ...Array.from({ length: n }, (_, i) => ({ id: variableOf(i), name: variableOf(i), machine: 'mch_gen1', unit: '' }))] };
  const emu = await startEmulatorProcess({ port: await freePort(), dir, fixture, jobDelayMs: 200 });
  const httpPort = await freePort();
  const base = `http://127.0.0.1:${httpPort}`;
  let gw: Proc | null = null;
  let mem: MemWatch | null = null;
  const recoveries: Recovery[] = [];
  try {
    const calls0 = await itemsOf(srv);
    const t0 = Date.now();
    gw = await startGatewayProcess(
      {
        gateway: { name: 'opcua-recovery', data_dir: join(dir, 'data'), status_interval: 0 },
        log: { level: 'info', format: 'json' },
        service: { base_url: `${emu.base}/tracking/v1`, auth_url: emu.base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
        buffer: { path: join(dir, 'buffer.db') },
        http: { enabled: true, host: '127.0.0.1', port: httpPort },
        // The gateway's certificate kept between runs: the set-up time is the session's, not key generation's.
        opcua: { pki_dir: join(tmpdir(), 'opcua-recovery-gw-pki'), servers: [{ name: 'plant', endpoint: srv.endpointUrl, security_mode: 'None', publishing_interval: '1s', sampling_interval: `${SAMPLING_MS}ms`, ...(HISTORY_OFF ? { history: { backfill: 'off' } } : {}), nodes: Array.from({ length: n }, (_, i) => ({ node_id: `${srv.nodeIdPrefix}${i + 1}`, variable: variableOf(i) })) }] },
      },
      dir,
      GATEWAY_NODE_ARGS,
    );
    const readyAt = Date.now();
    const pid = gw.child.pid!;
    mem = new MemWatch(pid, base, t0);
    mem.phase('set-up');
    const status = () => getJson<Status>(`${base}/status`);
    let monitoredAt: number | null = null;
    for (const end = t0 + DEADLINE_MS; Date.now() < end; await sleep(250)) {
      const s = await status().catch(() => null);
      if (Number(s?.sources[0]?.detail?.nodes_monitored ?? -1) === n) {
        monitoredAt = Date.now();
        break;
      }
    }
    const valuesAt = await everyValueCommitted(base, n, t0, 0, t0 + DEADLINE_MS);
    mem.phase('steady');
    const s = await status();
    const ol = s.sources[0]?.detail?.operation_limits as Record<string, number> | null;
    const st = await itemsOf(srv);
    const committed = async () => (await status()).buffer.committed_total;
    const setup: Setup = {
      readyS: readyAt - t0,
      monitoredS: monitoredAt && monitoredAt - t0,
      valuesS: valuesAt && valuesAt - t0,
      serverItems: itemsFor(st, 'gateway'),
      calls: callsText(st, calls0),
      limits: ol ? `MaxMonitoredItemsPerCall ${ol.max_monitored_items_per_call}, MaxNodesPerRead ${ol.max_nodes_per_read}, MaxNodesPerHistoryReadData ${ol.max_nodes_per_history_read_data}` : 'not reported',
      settle: await settle(srv, n, committed),
    };

    for (const kind of RESTARTS) {
      const s0 = await status();
      const rec0 = { ...((s0.sources[0]?.detail?.recoveries as Record<string, number>) ?? {}) };
      const m0 = await metricsText(base); // also resets the event-loop histogram
      const c0 = cpuSecondsOf(pid);
      const rss = rssSampler(pid, 250);
      let loopP99 = 0;
      let loopMax = 0;
      let listLoopMax = 0;
      let scrapes = 0;
      /** prom-client resets its event-loop histogram at every scrape: the worst of the spans between scrapes. */
      const scrape = async (into: 'recovery' | 'list') => {
        const text = await metricsText(base);
        const p99 = metric(text, 'gateway_process_nodejs_eventloop_lag_p99_seconds');
        const max = metric(text, 'gateway_process_nodejs_eventloop_lag_max_seconds');
        if (into === 'list') listLoopMax = Math.max(listLoopMax, max);
        else {
          loopP99 = Math.max(loopP99, p99);
          loopMax = Math.max(loopMax, max);
        }
      };
      let sessionAt: number | null = null;
      let itemsAt: number | null = null;
      mem.phase(`down (${kind})`);
      const r = await restart(srv, kind, n, limits);
      srv = r.server;
      mem.phase(`rebuild (${kind})`);
      let lastTick = 0;
      const tick = async () => {
        if (Date.now() - lastTick < 1_000) return;
        lastTick = Date.now();
        const items = await itemsOf(srv).catch(() => null);
        if (items ? hasSession(items, 'gateway') : (await getJson<Status>(`${base}/status`).catch(() => null))?.sources[0]?.state === 'connected') sessionAt ??= Date.now();
        // open62541 keeps no count per session: the gateway's own count of the items the server accepted again.
        if (items ? itemsFor(items, 'gateway') >= n : Number((await getJson<Status>(`${base}/status`).catch(() => null))?.sources[0]?.detail?.nodes_monitored ?? 0) >= n) itemsAt ??= Date.now();
        if (++scrapes % 5 === 0) await scrape('recovery');
      };
      // open62541: the gateway's own status, 4 times a second on its own (the list requests of
      // everyValueCommitted hold the loop for seconds at 100,000 items and would blur the times).
      let polling = false;
      const poller = srv.items
        ? null
        : setInterval(() => {
            if (polling) return;
            polling = true;
            void getJson<Status>(`${base}/status`)
              .then((st) => {
                if (st.sources[0]?.state === 'connected') sessionAt ??= Date.now();
                if (Number(st.sources[0]?.detail?.nodes_monitored ?? 0) >= n) itemsAt ??= Date.now();
              })
              .catch(() => undefined)
              .finally(() => (polling = false));
          }, 250);
      // The span of a console list request (N rows) is the bench's load, not the recovery's.
      const valuesSeen = await everyValueCommitted(base, n, r.killAt, s0.buffer.committed_total, r.killAt + DEADLINE_MS, tick, (when) => scrape(when === 'before' ? 'recovery' : 'list'));
      // Also the loop since the last scrape, and the session/items times if the values came first.
      while ((sessionAt === null || itemsAt === null) && Date.now() < r.killAt + DEADLINE_MS && valuesSeen !== null) {
        lastTick = 0;
        await tick();
        if (sessionAt === null || itemsAt === null) await sleep(1_000);
      }
      if (poller) clearInterval(poller);
      // Beyond the console's cap the values criterion cannot see every item: not before all are monitored.
      const valuesAtR = n > CONSOLE_CAP && valuesSeen !== null && itemsAt !== null ? Math.max(valuesSeen, itemsAt) : valuesSeen;
      mem.phase(`steady after ${kind}`);
      const m1 = await metricsText(base);
      const spanS = ((valuesAtR ?? Date.now()) - r.killAt) / 1_000;
      const cores = (cpuSecondsOf(pid) - c0) / spanS;
      const peak = rss.stop().peak;
      const s1s = await status();
      const rec1 = (s1s.sources[0]?.detail?.recoveries as Record<string, number>) ?? {};
      const how = Object.entries(rec1).map(([k, v]) => [k, v - (rec0[k] ?? 0)] as const).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
      const gaps = await getJson<{ gaps: Array<{ source: string; reason: string; from: number; to: number | null; filled: string }> }>(`${base}/api/gaps?state=all&limit=5`).catch(() => ({ gaps: [] }));
      const g = gaps.gaps.find((x) => x.source === 'plant' && x.from >= r.killAt - 5_000);
      const st2 = await itemsOf(srv);
      const d = (name: string) => metric(m1, name) - metric(m0, name);
      recoveries.push({
        kind,
        backS: r.backAt - r.killAt,
        sessionS: sessionAt && sessionAt - r.killAt,
        monitoredS: itemsAt && itemsAt - r.killAt,
        valuesS: valuesAtR && valuesAtR - r.killAt,
        how,
        gap: g ? `${g.reason} ${s1(g.to === null ? null : g.to - g.from)} s${g.to === null ? ' (open)' : ''}, filled ${g.filled}` : 'none recorded',
        missed: `missed messages ${d('gateway_opcua_missed_messages_total')}, overflow ${d('gateway_opcua_queue_overflows_total')}`,
        cores,
        peakRss: peak,
        loop: `${Math.round(loopP99 * 1000)} / ${Math.round(loopMax * 1000)} (list ${Math.round(listLoopMax * 1000)})`,
        calls: callsText(st2),
        settle: valuesAtR ? await settle(srv, n, committed) : '-',
      });
      printRecovery(`gateway ${n}`, recoveries.at(-1)!, r.backAt - r.killAt);
      if (valuesAtR === null) break;
    }
    return { setup, recoveries, server: srv };
  } finally {
    if (mem) console.log(`  gateway ${n} memory: ${mem.stop()}`);
    await gw?.stop();
    await emu.stop();
  }
}

function printRecovery(label: string, r: Recovery, backMs: number): void {
  const fromBack = (ms: number | null) => (ms === null ? '-' : s1(ms - backMs));
  process.stdout.write(
    `  ${label} after ${r.kind}: server back ${s1(r.backS)} s; session ${s1(r.sessionS)} s (${fromBack(r.sessionS)} after back), all monitored ${s1(r.monitoredS)} s (${fromBack(r.monitoredS)}), every value ${s1(r.valuesS)} s (${fromBack(r.valuesS)}); ${r.how}; ${r.gap}; ${r.missed}; CPU ${r.cores === null ? '-' : r.cores.toFixed(2)}, RSS peak ${r.peakRss === null ? '-' : mb(r.peakRss)} MB, loop p99/max ${r.loop} ms; server: ${r.calls}; ${r.settle} (load ${load()})\n`,
  );
}

// ================================================================ main

async function main(): Promise<void> {
  const role = process.argv[2];
  if (role) {
    const a = await new Promise<Record<string, unknown>>((r) => process.once('message', (m) => r(m as Record<string, unknown>)));
    if (role === 'server') return serverRole(a as Parameters<typeof serverRole>[0]);
    if (role === 'bare') return bareRole(a as Parameters<typeof bareRole>[0]);
    throw new Error(`unknown role ${role}`);
  }
  if (!existsSync(join(import.meta.dirname, '..', 'dist', 'cli.js'))) throw new Error('run `npm run build` first: the gateway runs from dist/');
  for (const k of RESTARTS) if (k !== 'kill' && k !== 'stop') throw new Error(`BENCH_RESTARTS: unknown kind ${JSON.stringify(k)} (kill, stop)`);
  requirePeer(!OPEN62541 || open62541BuildScript() !== null, 'the open62541 build script (../shared/tools/open62541/build.sh) is missing (set OPEN62541_BUILD, or leave BENCH_OPCUA_SERVER unset for the node-opcua server)');
  smokeBanner(`BENCH_STEPS ${STEPS.join(',')}, BENCH_RESTARTS ${RESTARTS.join(',')}, BENCH_DOWNTIME ${DOWNTIME_MS / 1_000}, BENCH_SETTLE ${SETTLE_MS / 1_000}, BENCH_SMALL_LIMIT ${SMALL_LIMIT}`);
  console.log(`OPC UA set-up and recovery: ${STEPS.map((s) => s.toLocaleString('en-US')).join(', ')} items (sampling ${SAMPLING_MS / 1000} s, publishing 1 s)${HISTORY_OFF ? ', gateway with history.backfill off' : ''}; restarts ${RESTARTS.join(', ')}, ${DOWNTIME_MS / 1000} s down; small limits (${SMALL_LIMIT}) at ${SMALL_AT}.\n`);
  const setupRows: Array<Record<string, string | number>> = [];
  const recRows: Array<Record<string, string | number>> = [];
  const configs: Array<{ n: number; limits: Limits; label: string }> = [];
  for (const n of STEPS) {
    configs.push({ n, limits: undefined, label: `${n.toLocaleString('en-US')}` });
    if (SMALL_LIMIT > 0 && n === SMALL_AT) configs.push({ n, limits: { maxMonitoredItemsPerCall: SMALL_LIMIT, maxNodesPerRead: SMALL_LIMIT }, label: `${n.toLocaleString('en-US')}, limits ${SMALL_LIMIT}` });
  }
  for (const { n, limits, label } of configs) {
    const dir = mkdtempSync(join(tmpdir(), `opcua-recovery-${n}-`));
    let srv = await startServer(n, 0, limits);
    console.log(`${label}: server up in ${s1(srv.readyAt - srv.startedAt)} s (load ${load()})`);
    try {
      const results: Partial<Record<Side, { setup: Setup; recoveries: Recovery[] }>> = {};
      for (const side of SIDES) {
        console.log(`${label}: ${side} ...`);
        const r = side === 'bare' ? await bareRun(n, srv, limits) : await gatewayRun(n, srv, limits, dir);
        srv = r.server;
        results[side] = r;
        const su = r.setup;
        const approx = side === 'gateway' && n > CONSOLE_CAP ? '≥' : '';
        setupRows.push({ step: label, side, 'process ready s': s1(su.readyS), 'monitored s': s1(su.monitoredS), 'every value s': approx + s1(su.valuesS), 'server items': su.serverItems, 'limits read': su.limits, 'CreateMonitoredItems (server)': su.calls, 'after set-up': su.settle, load: load() });
        console.log(table(setupRows.slice(-1)));
      }
      const g = results.gateway;
      const b = results.bare;
      if (g && b) {
        const ratio = (x: number | null, y: number | null) => (x !== null && y !== null && y > 0 ? (x / y).toFixed(2) : '-');
        setupRows.push({ step: label, side: 'ratio gateway/bare', 'process ready s': '', 'monitored s': ratio(g.setup.monitoredS, b.setup.monitoredS), 'every value s': ratio(g.setup.valuesS, b.setup.valuesS), 'server items': '', 'limits read': '', 'CreateMonitoredItems (server)': '', 'after set-up': '', load: '' });
      }
      for (const side of SIDES) {
        for (const r of results[side]?.recoveries ?? []) {
          const fromBack = (ms: number | null) => (ms === null ? '-' : `${s1(ms)} (${s1(ms - r.backS)})`);
          recRows.push({ step: label, side, restart: r.kind, 'server back s': s1(r.backS), 'session s (after back)': fromBack(r.sessionS), 'monitored s (after back)': fromBack(r.monitoredS), 'every value s (after back)': (side === 'gateway' && n > CONSOLE_CAP ? '≥' : '') + fromBack(r.valuesS), how: r.how, gap: r.gap, missed: r.missed, 'CPU cores': r.cores === null ? '-' : r.cores.toFixed(2), 'RSS peak MB': r.peakRss === null ? '-' : mb(r.peakRss), 'loop p99/max ms': r.loop, 'CreateMonitoredItems (server, this run)': r.calls, after: r.settle });
        }
      }
      if (g && b) {
        for (const kind of RESTARTS) {
          const gr = g.recoveries.find((x) => x.kind === kind);
          const br = b.recoveries.find((x) => x.kind === kind);
          if (!gr || !br) continue;
          const ratio = (x: number | null, y: number | null) => (x !== null && y !== null && y - br.backS > 0 ? ((x - gr.backS) / (y - br.backS)).toFixed(2) : '-');
          recRows.push({ step: label, side: 'ratio gateway/bare (after back)', restart: kind, 'server back s': '', 'session s (after back)': ratio(gr.sessionS, br.sessionS), 'monitored s (after back)': ratio(gr.monitoredS, br.monitoredS), 'every value s (after back)': ratio(gr.valuesS, br.valuesS), how: '', gap: '', missed: '', 'CPU cores': '', 'RSS peak MB': '', 'loop p99/max ms': '', 'CreateMonitoredItems (server, this run)': '', after: '' });
        }
      }
    } finally {
      await srv.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log(`\nSet-up (from the gateway's start / the bare client's connect):\n${table(setupRows)}\n`);
  if (recRows.length > 0) console.log(`Recovery (seconds from the kill; in brackets from "server back"):\n${table(recRows)}\n`);
  console.log(NOISY_MACHINE_NOTE);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
