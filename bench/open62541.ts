/**
 * The open62541 plant server (../shared/tools/open62541, `plant_server PORT N INTERVAL_MS`) as the
 * OPC UA peer of a benchmark, a bare node-opcua client for the baseline, and the value-by-value
 * check its values allow: variable i (1-based, node `ns=1;s=plant.v<i>`) holds at tick k
 *
 *     value(i, k) = k + i / 1e6        stamped with the wall time tick k began (SourceTimestamp)
 *
 * so every delivered (variable, timestamp, value) says which tick it is, and whether it is right.
 * The server prints a `tick K T_MS reads=R new=A repeat=B skipped=C` line per tick: T_MS is the
 * timestamp of every value of tick K, `new` counts samplings that saw a tick not read before for
 * that variable (values produced), `skipped` ticks a variable was never sampled at (values never
 * produced: nobody can deliver them).
 *
 * Used by bench/plant-scale.ts (BENCH_OPCUA_SERVER=open62541, the default) and bench/opcua-recovery.ts.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

const BUILD = process.env.OPEN62541_BUILD ?? join(import.meta.dirname, '..', '..', 'shared', 'tools', 'open62541', 'build.sh');
const BUILD_FALLBACK = '/work/shared/tools/open62541/build.sh';

let prefix: string | null = null;

/** The build script of the team's open62541 tool, or null where it is not (benches then exit as a missing peer). */
export function open62541BuildScript(): string | null {
  return [BUILD, BUILD_FALLBACK].find((p) => existsSync(p)) ?? null;
}

/** Installs (once, cached by build.sh) and returns the prefix holding bin/plant_server. */
export function open62541Prefix(): string {
  if (prefix) return prefix;
  const script = open62541BuildScript();
  if (!script) throw new Error(`open62541 build script not found (${BUILD}); set OPEN62541_BUILD`);
  const out = execFileSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  prefix = out.trim().split('\n').at(-1)!.trim();
  return prefix;
}

export const plantNodeId = (i: number) => `ns=1;s=plant.v${i}`;
/** The value variable `i` (1-based) holds at tick `k`. */
export const plantValue = (i: number, k: number) => k + i / 1e6;

export interface TickCounters {
  reads: number;
  fresh: number;
  repeat: number;
  skipped: number;
}

export interface PlantServer {
  proc: ChildProcess;
  pid: number;
  port: number;
  endpointUrl: string;
  n: number;
  intervalMs: number;
  /** Seconds the server took to build its address space. */
  nodesS: number;
  /** Tick number → epoch ms of its values. */
  readonly tickAt: Map<number, number>;
  /** Epoch ms → tick number (the inverse of tickAt). */
  readonly tickOf: Map<number, number>;
  /** The counters at the latest tick line, and at each tick (for a window's difference). */
  latest(): TickCounters & { tick: number; at: number };
  countersAt(tick: number): TickCounters | undefined;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts plant_server on `port` (0: a free one is picked by the caller; pass a real port). */
export async function startPlantServer(o: { n: number; intervalMs: number; port: number; args?: string[] }): Promise<PlantServer> {
  const bin = join(open62541Prefix(), 'bin', 'plant_server');
  const proc = spawn(bin, [String(o.port), String(o.n), String(o.intervalMs), ...(o.args ?? [])], { stdio: ['ignore', 'pipe', 'pipe'] });
  const tickAt = new Map<number, number>();
  const tickOf = new Map<number, number>();
  const counters = new Map<number, TickCounters>();
  let latest: TickCounters & { tick: number; at: number } = { tick: 0, at: 0, reads: 0, fresh: 0, repeat: 0, skipped: 0 };
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let stderr = '';
  proc.stderr!.on('data', (d) => (stderr = (stderr + String(d)).slice(-4_000)));
  const ready = await new Promise<{ nodesS: number }>((resolve, reject) => {
    const lines = createInterface({ input: proc.stdout! });
    let isReady = false;
    lines.on('line', (line) => {
      if (line.startsWith('ready ')) {
        isReady = true;
        resolve({ nodesS: Number(/nodes_s=([\d.]+)/.exec(line)?.[1] ?? NaN) });
        return;
      }
      const m = /^tick (\d+) (\d+) reads=(\d+) new=(\d+) repeat=(\d+) skipped=(\d+)/.exec(line);
      if (!m) return;
      const [k, at, reads, fresh, repeat, skipped] = m.slice(1).map(Number);
      tickAt.set(k, at);
      tickOf.set(at, k);
      const c = { reads, fresh, repeat, skipped };
      counters.set(k, c);
      latest = { tick: k, at, ...c };
    });
    void exited.then(() => {
      if (!isReady) reject(new Error(`plant_server exited before ready: ${stderr}`));
    });
  });
  return {
    proc,
    pid: proc.pid!,
    port: o.port,
    endpointUrl: `opc.tcp://127.0.0.1:${o.port}`,
    n: o.n,
    intervalMs: o.intervalMs,
    nodesS: ready.nodesS,
    tickAt,
    tickOf,
    latest: () => latest,
    countersAt: (k) => counters.get(k),
    exited,
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** What the value-by-value check found for ticks [fromTick, toTick]. */
export interface ValueCheck {
  ticks: number;
  /** N × ticks: every variable at every tick. */
  expected: number;
  /** Ticks the server never sampled some variable at, in the range (values never produced). */
  skipped: number;
  /** Distinct (variable, tick) delivered with the right value. */
  delivered: number;
  /** Delivered at a tick's timestamp with a value that is not value(i, k). */
  wrong: number;
  /** Delivered in the range at a timestamp that is no tick's. */
  unexpected: number;
  /** Writes that replaced a stored value (delivered twice). */
  duplicates: number;
  /** Variables with at least one value missing in the range. */
  variablesShort: number;
}

/**
 * Compares what the emulator stores for variables `<prefix>1 … <prefix>N` (GET
 * /_emulator/value-keys?values=1) with value(i, k) for every tick k in [fromTick, toTick].
 */
export async function checkPlantValues(emuBase: string, prefix: string, server: Pick<PlantServer, 'n' | 'tickAt' | 'tickOf' | 'countersAt'>, fromTick: number, toTick: number): Promise<ValueCheck> {
  const n = server.n;
  const fromTs = server.tickAt.get(fromTick)!;
  const toTs = server.tickAt.get(toTick)!;
  const ticks = toTick - fromTick + 1;
  const c0 = server.countersAt(fromTick - 1) ?? server.countersAt(fromTick);
  const c1 = server.countersAt(toTick);
  const f: ValueCheck = { ticks, expected: n * ticks, skipped: c0 && c1 ? c1.skipped - c0.skipped : 0, delivered: 0, wrong: 0, unexpected: 0, duplicates: 0, variablesShort: 0 };
  const seen = new Uint8Array(n + 1);
  let cursor: string | null = null;
  do {
    const url = `${emuBase}/_emulator/value-keys?prefix=${prefix}&values=1&limit=2000${cursor ? `&starting_after=${cursor}` : ''}`;
    const res = await fetch(url);
    if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
    const page = (await res.json()) as { variables: Array<{ id: string; epoch_ms: number[]; values: number[]; overwritten: number }>; next_cursor: string | null };
    for (const v of page.variables) {
      const i = Number(v.id.slice(prefix.length));
      if (!(i >= 1 && i <= n)) continue;
      seen[i] = 1;
      f.duplicates += v.overwritten;
      let got = 0;
      for (let j = 0; j < v.epoch_ms.length; j++) {
        const ts = v.epoch_ms[j];
        if (ts < fromTs || ts > toTs) continue;
        const k = server.tickOf.get(ts);
        if (k === undefined) {
          f.unexpected += 1;
          continue;
        }
        if (Math.abs(v.values[j] - plantValue(i, k)) > 1e-7) f.wrong += 1;
        else {
          f.delivered += 1;
          got += 1;
        }
      }
      if (got < ticks) f.variablesShort += 1;
    }
    cursor = page.next_cursor;
  } while (cursor !== null);
  for (let i = 1; i <= n; i++) if (!seen[i]) f.variablesShort += 1;
  return f;
}

/** The bare client's PKI folder, kept between runs (the certificate is made once, not inside a measurement). */
export const BARE_PKI = join(tmpdir(), 'plant-bare-pki');

/**
 * The baseline: a bare node-opcua client doing nothing but receiving. One subscription (publishing
 * 1 s), the monitored items created with the CreateMonitoredItems service in calls of `perCall`
 * (client handle = position), each NotificationMessage's values counted (and checked against
 * value(i, k) by their fraction, cheaply) from node-opcua's decoded message; `publishRequests`
 * Publish requests kept in flight (node-opcua's engine sends one per response). `setupMs`: from
 * the process's start to every item created; `count()` gives the values received.
 */
export async function bareRawClient(o: { endpointUrl: string; nodeIds: readonly string[]; samplingMs: number; queueSize: number; perCall: number; publishRequests: number }): Promise<{ setupMs: number; count: () => number; wrong: () => number; stop: () => Promise<void> }> {
  const { AttributeIds, ClientSidePublishEngine, MonitoringMode, OPCUAClient, OPCUACertificateManager, TimestampsToReturn, resolveNodeId } = (await import('node-opcua')) as typeof import('node-opcua') & { ClientSidePublishEngine?: { publishRequestCountInPipeline: number } };
  if (ClientSidePublishEngine) ClientSidePublishEngine.publishRequestCountInPipeline = o.publishRequests;
  const client = OPCUAClient.create({ clientCertificateManager: new OPCUACertificateManager({ rootFolder: BARE_PKI }), endpointMustExist: false, keepSessionAlive: false, requestedSessionTimeout: 30_000 });
  await client.connect(o.endpointUrl);
  const session = await client.createSession();
  const subscription = await session.createSubscription2({ requestedPublishingInterval: 1_000, requestedLifetimeCount: 120, requestedMaxKeepAliveCount: 3, maxNotificationsPerPublish: 0, publishingEnabled: true, priority: 10 });
  let values = 0;
  let wrong = 0;
  subscription.on('raw_notification', (msg: import('node-opcua').NotificationMessage) => {
    for (const n of msg.notificationData ?? []) {
      const items = (n as { monitoredItems?: Array<{ clientHandle: number; value: import('node-opcua').DataValue }> }).monitoredItems;
      if (!items) continue;
      values += items.length;
      for (const it of items) {
        const v = Number(it.value.value?.value);
        if (Math.abs(v - Math.floor(v) - it.clientHandle / 1e6) > 1e-7) wrong += 1;
      }
    }
    msg.notificationData = [];
  });
  const raw = session as unknown as import('node-opcua').ClientSessionRawSubscriptionService;
  for (let start = 0; start < o.nodeIds.length; start += o.perCall) {
    const chunk = o.nodeIds.slice(start, start + o.perCall);
    await raw.createMonitoredItems({
      subscriptionId: subscription.subscriptionId,
      timestampsToReturn: TimestampsToReturn.Both,
      itemsToCreate: chunk.map((nodeId, j) => ({
        itemToMonitor: { nodeId: resolveNodeId(nodeId), attributeId: AttributeIds.Value },
        monitoringMode: MonitoringMode.Reporting,
        requestedParameters: { clientHandle: start + j + 1, samplingInterval: o.samplingMs, queueSize: o.queueSize, discardOldest: true },
      })),
    });
  }
  // From the process's start, as the gateway's set-up counts (node start, loading node-opcua included).
  return { setupMs: performance.now(), count: () => values, wrong: () => wrong, stop: () => client.disconnect() };
}
