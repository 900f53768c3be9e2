/**
 * Plant scale (issue 25): one gateway fed by a whole plant through real protocols, at 10k, 30k and
 * 100k variables changing once a second. For each protocol and step:
 *
 *   server / publisher  in its own process: a node-opcua server with N variables that change at
 *                       every sampling (opcua); a publisher sending JSON metrics documents with 100
 *                       values each through mosquitto (mqtt); a Sparkplug B edge node with devices
 *                       of 100 metrics sending DDATA through mosquitto (sparkplug); N holding
 *                       registers over 50 Modbus TCP devices (modbus).
 *   baseline            a bare protocol client doing nothing but receiving, in its own process:
 *                       node-opcua client with the same monitored items; mqtt.js subscriber
 *                       (messages counted, payloads not decoded); modbus-serial polling the same
 *                       registers once a second in blocks of 125.
 *   gateway             the compiled gateway in its own process (startGatewayProcess), durable
 *                       buffer, default settings except the variable lists, delivering to the
 *                       emulator (startEmulatorProcess) in a fourth process.
 *
 * Measured over BENCH_SECONDS after a BENCH_WARMUP once everything is set up (from /proc for CPU
 * and RSS, from the gateway's /status and /metrics for the rest): CPU in cores, peak and steady
 * (median) RSS, commit rate against the expected N/s, freshness of the newest value the service
 * acknowledged (status uplink.freshest_delivered_age_s, sampled every second: p50/p99), the largest
 * backlog (buffer.samples) and oldest unsent age, the worst p99 event-loop delay between two
 * /metrics scrapes (gateway_process_nodejs_eventloop_lag_p99_seconds, perf_hooks'
 * monitorEventLoopDelay, 10 ms resolution), and for OPC UA the time from the gateway's start to
 * every item monitored (the bare client: connect to every item created). Load averages are
 * printed beside each step: the machine is shared.
 *
 * OPC UA loss accounting, per side: what the server sampled (each sampling of a bulk variable is a
 * new value), sent to that client, discarded from full monitored-item queues (Overflow) and still
 * holds (harvested or queued), against what the gateway received, refused and committed
 * (gateway_opcua_* and buffer metrics), as rates over the same window; the server's backlog for the
 * gateway and how often it had one with no Publish request to answer. A commit rate below N/s with
 * nothing lost in these rows is the server not sampling every item every second.
 *
 * Kill check (BENCH_KILL=1; MQTT JSON and Sparkplug B): half-way through the measured window the
 * gateway process is SIGKILLed (no handler runs, as in a crash) and started again on the same data
 * dir, buffer and config while the publisher keeps publishing; the window's figures then cover both
 * processes (CPU added up, the commit rate from the last reading before the kill). After the window
 * the publisher stops and says what it sent (per message group, the timestamps of its values: JSON
 * counts a message once mosquitto acknowledged it, Sparkplug's QoS 0 once written); the bench waits
 * (status polled, 15 min at most) until the gateway holds nothing (backlog 0, nothing pending a
 * commit, no batch or import job in flight), then compares per variable every (variable, timestamp)
 * sent since the window began with what the emulator stores (GET /_emulator/value-keys) and prints
 * sent, delivered, lost (by timestamp: before the kill, between the kill and the restarted gateway's
 * first commit, after it), duplicates (values written twice upstream), the restart times (kill →
 * process started → /status answering → first commit → first delivery), the backlog before the kill,
 * at the restart and its maximum afterwards, the drain time and the emulator's RSS. JSON runs with
 * a persistent session (clean: false) so mosquitto redelivers what the killed gateway never
 * acknowledged and keeps what arrives while it is away (max_queued_messages 100000 here: 1,000
 * messages/s at 100k for 100 s); its notices go to a log and "messages are being dropped" is counted.
 * Sparkplug keeps clean: true (Sparkplug 3.0) and QoS 0 DDATA. In the kill check the gateway is by
 * default the edge node's Primary Host (primary_host_id; BENCH_PRIMARY_HOST=0 turns it off, =1 turns
 * it on outside the kill check): the edge node publishes only while the gateway's STATE is online,
 * stores what it produces while the Will says offline and forwards it as is_historical DDATA after
 * its next BIRTH; the bare client stands in for the host during its own window. What is still lost
 * is what was in flight at the kill (received by the gateway or queued for it at the broker, not
 * yet committed: QoS 0 has nothing to redeliver), printed with the gateway's uncommitted messages
 * at its last /status. Without a Primary Host, values published while no gateway is subscribed are
 * lost too, and DDATA arriving before the restarted gateway's Rebirth request is answered is
 * refused (unknown_alias): the check shows how many and when. OPC UA and Modbus run without a kill (a polled or sampled source has no
 * "sent" set: a value nobody read while the gateway was dead was never a sample). The emulator keeps
 * every value in memory (~170 bytes each in its process, printed): ~6 M values a minute at 100k, so
 * the kill check defaults to 10k and 30k (BENCH_STEPS overrides).
 *
 * OPC UA server (BENCH_OPCUA_SERVER): `open62541` (default) is the C plant server of
 * ../shared/tools/open62541 (bench/open62541.ts: `plant_server PORT N INTERVAL`, ~0.2 core for
 * 100,000 items a second), whose values say which variable and tick they are, value(i, k) = k +
 * i/1e6 stamped with tick k's time. Its baseline is a bare node-opcua client that creates the same
 * items with CreateMonitoredItems and counts each NotificationMessage's values (the decoding every
 * node-opcua client pays, nothing more), with as many Publish requests in flight as the gateway
 * keeps. After the gateway's window the server keeps running BENCH_DRAIN_LIVE s (default 15), is
 * then stopped, and once the gateway holds nothing (or after DRAIN_DEADLINE) every value of every
 * tick in the window is looked up in the emulator (value by value: right value, missing, wrong,
 * duplicates), against the ticks the server itself never sampled. CPU per value (µs) is printed for
 * both sides. `node-opcua` is the simulator of src/sim (one node-opcua process samples ~16–28k
 * items a second on these cores, so 100k at 1 s cannot be produced with it). BENCH_INTERVAL (s,
 * default 1): how often every value changes and is sampled (the publishing interval stays 1 s).
 *
 *   npm run build && nice -n 10 npx tsx bench/plant-scale.ts
 *   BENCH_PROTOCOLS=opcua BENCH_STEPS=10000 BENCH_SECONDS=60 npx tsx bench/plant-scale.ts
 *   BENCH_KILL=1 BENCH_PROTOCOLS=mqtt,sparkplug BENCH_STEPS=10000,30000 nice -n 10 npx tsx bench/plant-scale.ts
 *
 * Env: BENCH_PROTOCOLS (opcua,mqtt,sparkplug,modbus; default all), BENCH_STEPS (default
 * 10000,30000,100000; modbus takes only steps ≤ 10,000 unless BENCH_MODBUS_ANY=1, the issue's
 * Modbus target being 10k registers), BENCH_SECONDS (measured, default 60), BENCH_WARMUP (default
 * 20), BENCH_CPU_PROF=<dir> (the gateway runs with --cpu-prof into <dir>; with BENCH_KILL the
 * killed process writes none, the restarted one <protocol>-<n>-restarted.cpuprofile), BENCH_SERVER_PROF=<dir> (the OPC UA server profiles itself over each
 * measured window), BENCH_GATEWAY_LOG, BENCH_KILL=1 (the kill check above; steps default to
 * 10000,30000), BENCH_PRIMARY_HOST (Sparkplug: the gateway as Primary Host; default 1 with
 * BENCH_KILL, else 0).
 */
import { fork, spawn, type ChildProcess, type Serializable } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BulkStats } from '../src/sim/opcua-server.js';
import { cpuSecondsOf, envList, envNumber, freePort, getJson, mb, MOSQUITTO, NOISY_MACHINE_NOTE, ratioText, requirePeer, rssOf, rssSampler, smokeBanner, startMosquitto as startBroker, startEmulatorProcess, startGatewayProcess, table, type Proc } from './lib.js';
import { bareRawClient, checkPlantValues, open62541BuildScript, plantNodeId, startPlantServer, type PlantServer, type ValueCheck } from './open62541.js';

const SELF = fileURLToPath(import.meta.url);
const PROTOCOLS = envList('BENCH_PROTOCOLS', 'opcua,mqtt,sparkplug,modbus');
const STEPS = envList('BENCH_STEPS', process.env.BENCH_KILL === '1' ? '10000,30000' : '10000,30000,100000', '100').map(Number);
const SECONDS = envNumber('BENCH_SECONDS', 60, 2);
const WARMUP = envNumber('BENCH_WARMUP', 20, 1);
const SETUP_DEADLINE_MS = 600_000;
const MODBUS_DEVICES = 50;
const PER_MESSAGE = 100;
/** BENCH_KILL=1: SIGKILL the gateway in the middle of each MQTT/Sparkplug window and check what arrived (see the header). */
const KILL = process.env.BENCH_KILL === '1';
/**
 * BENCH_PRIMARY_HOST=1: the gateway is the Sparkplug Primary Host (primary_host_id) and the edge node
 * waits for its STATE and stores and forwards while it is offline. Default: on in the kill check, off otherwise.
 */
const PRIMARY_HOST = (process.env.BENCH_PRIMARY_HOST ?? (KILL ? '1' : '0')) === '1';
/** Longest wait for the gateway to deliver everything after the publisher stopped (kill check). */
const DRAIN_DEADLINE_MS = 900_000;
/** The OPC UA peer: the open62541 plant server (default) or the node-opcua simulator (see the header). */
const OPCUA_SERVER = (process.env.BENCH_OPCUA_SERVER ?? 'open62541') as 'open62541' | 'node-opcua';
/** How often every OPC UA value changes and is sampled, ms (the open62541 server's tick). */
const INTERVAL_MS = Number(process.env.BENCH_INTERVAL ?? 1) * 1_000;
/** Seconds the open62541 server keeps running after the gateway's window before the value check stops it. */
const DRAIN_LIVE_S = Number(process.env.BENCH_DRAIN_LIVE ?? 15);
/** Publish requests the bare client keeps in flight: what the gateway keeps for the same items (publish-pipeline.ts), at most 100. */
const barePublishRequests = (n: number) => Math.min(100, Math.max(5, Math.ceil(n / 1_000) + 2));

type Protocol = 'opcua' | 'mqtt' | 'sparkplug' | 'modbus';
const variableOf = (p: Protocol, i: number) => `mvr_${p}_${i + 1}`;

// ================================================================ child roles

/**
 * Sends `ready` to the parent, then answers {count} to every 'count' message and {stats} to every
 * 'stats' message; 'stop' runs `stop` (a client closing its session, so the server does not keep
 * serving an orphan subscription into the next measurement) and exits.
 */
function serveCount(count: () => number, ready: Record<string, unknown>, o: { stats?: () => unknown; stop?: () => Promise<void>; sentKeys?: () => Promise<SentKeys> } = {}): void {
  process.send?.(ready);
  process.on('message', (m) => {
    if (typeof m === 'object' && m !== null && 'profile' in m) void profileSelf(m as { profile: 'start' | string });
    if (m === 'count') process.send?.({ count: count() });
    if (m === 'keys') void o.sentKeys?.().then((keys) => process.send?.({ keys }));
    if (m === 'stats') process.send?.({ stats: o.stats?.() ?? null });
    if (m === 'stop') {
      const stopping = o.stop ? Promise.race([o.stop().catch(() => undefined), sleep(3_000)]) : Promise.resolve();
      void stopping.then(() => process.exit(0));
    }
  });
}

async function opcuaServer(n: number): Promise<void> {
  const { startOpcuaSimulator } = await import('../src/sim/opcua-server.js');
  const sim = await startOpcuaSimulator({ bulkVariables: n, updateIntervalMs: 1_000, securityModes: ['None'], pkiDir: join(tmpdir(), 'plant-scale-sim-pki'), historize: false });
  serveCount(() => 0, { endpointUrl: sim.endpointUrl, nodeIds: Array.from({ length: n }, (_, i) => sim.bulkNodeId(i + 1)) }, { stats: () => sim.bulkStats() });
}

let profiler: import('node:inspector').Session | null = null;

/** BENCH_SERVER_PROF: the server profiles itself over one measured window ('start', then the file to write). */
async function profileSelf(m: { profile: 'start' | string }): Promise<void> {
  const inspector = await import('node:inspector');
  const post = (method: string) => new Promise<unknown>((resolve, reject) => profiler!.post(method, (err, res) => (err ? reject(err) : resolve(res))));
  if (m.profile === 'start') {
    profiler = new inspector.Session();
    profiler.connect();
    await post('Profiler.enable');
    await post('Profiler.start');
    return;
  }
  if (!profiler) return;
  const { profile } = (await post('Profiler.stop')) as { profile: unknown };
  writeFileSync(m.profile, JSON.stringify(profile));
  profiler.disconnect();
  profiler = null;
}

/**
 * Calls `slice` ten times a second by the clock, catching up on ticks a busy machine delayed, so
 * the publisher sends its N values a second whatever its timer's lateness.
 */
function catchUp(slice: () => void): () => void {
  const t0 = performance.now();
  let done = 0;
  const timer = setInterval(() => {
    const due = Math.floor((performance.now() - t0) / 100);
    while (done < due) {
      slice();
      done += 1;
    }
  }, 20);
  return () => clearInterval(timer);
}

/**
 * What a publisher sent, for the kill check (BENCH_KILL): per message group (100 variables that
 * always travel together: a JSON document's metrics, a Sparkplug device's), the timestamps of the
 * values sent with it. Every variable of group g is `g * 100 + j`. MQTT JSON: a value counts as
 * sent when the broker acknowledged its message (PUBACK); Sparkplug B (QoS 0): when mqtt.js wrote it.
 */
interface SentKeys {
  groups: number[][];
  /** Publishes the broker refused or that failed (not counted as sent). */
  failed: number;
}

/**
 * Timestamps per group, strictly increasing (a catching-up publisher sends one group twice within a
 * millisecond: two values at one instant would be one key upstream, so the check could not tell them apart).
 */
function groupClock(groups: number): (g: number) => number {
  const last = new Float64Array(groups);
  return (g) => (last[g] = Math.max(Date.now(), last[g] + 1));
}

/** Stops the publisher, waits until nothing it sent awaits an acknowledgement (60 s at most), then reports. */
async function finishSending(stop: () => void, outstanding: () => number, keys: () => SentKeys): Promise<SentKeys> {
  stop();
  const deadline = performance.now() + 60_000;
  while (outstanding() > 0 && performance.now() < deadline) await sleep(50);
  return keys();
}

/** JSON metrics documents, 100 values each, QoS 1, spread over the second in 10 slices. */
async function mqttPublisher(n: number, url: string): Promise<void> {
  const mqtt = (await import('mqtt')).default;
  const client = await mqtt.connectAsync(url, { clientId: `plant-scale-pub-${process.pid}`, clean: true });
  const messages = Math.ceil(n / PER_MESSAGE);
  const clock = groupClock(messages);
  const groups: number[][] = Array.from({ length: messages }, () => []);
  let sent = 0;
  let failed = 0;
  let outstanding = 0;
  let tick = 0;
  const slice = () => {
    const from = Math.floor((messages * (tick % 10)) / 10);
    const to = Math.floor((messages * ((tick % 10) + 1)) / 10);
    tick += 1;
    for (let g = from; g < to; g++) {
      const ts = clock(g);
      const metrics = [];
      for (let k = g * PER_MESSAGE; k < Math.min(n, (g + 1) * PER_MESSAGE); k++) metrics.push({ name: variableOf('mqtt', k), value: k + (tick % 1000) / 1000 });
      outstanding += 1;
      void client
        .publishAsync(`plant/json/g${g}`, JSON.stringify({ timestamp: ts, metrics }), { qos: 1 })
        .then(
          () => {
            sent += 1;
            groups[g].push(ts);
          },
          () => void (failed += 1),
        )
        .finally(() => void (outstanding -= 1));
    }
  };
  const stop = catchUp(slice);
  serveCount(() => sent * PER_MESSAGE, { ok: true }, { sentKeys: () => finishSending(stop, () => outstanding, () => ({ groups, failed })) });
}

/**
 * A Sparkplug B edge node with n/100 devices of 100 metrics (aliases after the BIRTH), DDATA at QoS 0.
 * With `hostId` (BENCH_PRIMARY_HOST) it is configured with that Primary Host (Sparkplug 3.0): it
 * births and publishes live data only while the host's STATE says online, keeps every value it
 * produces while the host is offline (store and forward, in memory) and, once the host is back,
 * births again and sends the stored values as DDATA whose metrics are flagged is_historical, paced
 * by its socket, beside the live data. A value counts as sent once, when it is produced.
 */
async function sparkplugPublisher(n: number, url: string, hostId: string | null): Promise<void> {
  const mqtt = (await import('mqtt')).default;
  const { sparkplugCodec } = await import('../src/sources/mqtt/decoders/sparkplug.js');
  const { PrimaryHostWatch } = await import('../src/sim/sparkplug-host-watch.js');
  const group = 'plant';
  const node = 'scale';
  const devices = Math.ceil(n / PER_MESSAGE);
  const watch = hostId === null ? null : new PrimaryHostWatch(hostId);
  let bdSeq = 0;
  let seq = 0;
  const nextSeq = () => {
    const s = seq;
    seq = (seq + 1) % 256;
    return s;
  };
  const client = await mqtt.connectAsync(url, {
    clientId: `plant-scale-sp-${process.pid}`,
    clean: true,
    will: { topic: `spBv1.0/${group}/NDEATH/${node}`, payload: Buffer.from(sparkplugCodec.encodePayload({ timestamp: Date.now(), metrics: [{ name: 'bdSeq', type: 'UInt64', value: bdSeq }] })), qos: 1, retain: false },
  });
  const metricsOf = (d: number) => Array.from({ length: Math.min(PER_MESSAGE, n - d * PER_MESSAGE) }, (_, j) => d * PER_MESSAGE + j);
  const clock = groupClock(devices);
  // DBIRTH metrics carry values too (they become samples): their timestamps are sent values as well.
  const groups: number[][] = Array.from({ length: devices }, () => []);
  const birth = () => {
    seq = 0;
    const now = Date.now();
    client.publish(`spBv1.0/${group}/NBIRTH/${node}`, Buffer.from(sparkplugCodec.encodePayload({ timestamp: now, seq: nextSeq(), metrics: [{ name: 'bdSeq', type: 'UInt64', value: bdSeq, timestamp: now }, { name: 'Node Control/Rebirth', alias: 1_000_000, type: 'Boolean', value: false, timestamp: now }] })), { qos: 0 });
    for (let d = 0; d < devices; d++) {
      const ts = clock(d);
      const metrics = metricsOf(d).map((k) => ({ name: variableOf('sparkplug', k), alias: k + 1, type: 'Double' as const, value: k, timestamp: ts }));
      client.publish(`spBv1.0/${group}/DBIRTH/${node}/d${d}`, Buffer.from(sparkplugCodec.encodePayload({ timestamp: ts, seq: nextSeq(), metrics })), { qos: 0 });
      groups[d].push(ts);
    }
  };
  // Store and forward: per device, the [timestamp, tick] of every DDATA not sent while the host was offline.
  const stored: Array<Array<[number, number]>> = Array.from({ length: devices }, () => []);
  let storedCount = 0;
  let storedMax = 0;
  let forwarded = 0;
  let forwarding = false;
  const valueOf = (k: number, tick: number) => k + (tick % 1000) / 1000;
  const forward = async () => {
    if (forwarding) return;
    forwarding = true;
    try {
      // Up to 10 stored instants of one device per DDATA (1,000 metrics), device by device, waiting
      // for the socket to drain: a burst would only move the queue into mosquitto.
      for (let d = 0; d < devices && watch?.hostOnline; d++) {
        while (stored[d].length > 0 && watch.hostOnline) {
          const batch = stored[d].splice(0, 10);
          const metrics = batch.flatMap(([ts, tick]) => metricsOf(d).map((k) => ({ alias: k + 1, type: 'Double' as const, value: valueOf(k, tick), timestamp: ts, isHistorical: true })));
          client.publish(`spBv1.0/${group}/DDATA/${node}/d${d}`, Buffer.from(sparkplugCodec.encodePayload({ timestamp: Date.now(), seq: nextSeq(), metrics })), { qos: 0 });
          storedCount -= batch.length;
          forwarded += batch.length;
          if (client.stream.writableLength > 1_048_576) await new Promise((r) => client.stream.once('drain', r));
        }
      }
    } finally {
      forwarding = false;
    }
    if (storedCount > 0 && watch?.hostOnline) void forward();
  };
  await client.subscribeAsync(`spBv1.0/${group}/NCMD/${node}`, { qos: 1 });
  client.on('message', (topic, payload) => {
    if (watch && topic === watch.topic) {
      // The host came (back) online: BIRTH first, then what was stored (tck-id-operational-behavior-edge-node-birth-sequence-wait).
      if (watch.onState(payload) === 'online') {
        birth();
        void forward();
      }
      return;
    }
    // The only command sent to us is a Rebirth request (spec §6.4.9).
    if (!watch || watch.hostOnline) birth();
  });
  if (watch) await client.subscribeAsync(watch.topic, { qos: 1 });
  else birth();
  let sent = 0;
  let tick = 0;
  const stop = catchUp(() => {
    const from = Math.floor((devices * (tick % 10)) / 10);
    const to = Math.floor((devices * ((tick % 10) + 1)) / 10);
    tick += 1;
    for (let d = from; d < to; d++) {
      const ts = clock(d);
      groups[d].push(ts);
      sent += 1;
      if (watch && !watch.hostOnline) {
        stored[d].push([ts, tick]);
        storedCount += 1;
        storedMax = Math.max(storedMax, storedCount);
        continue;
      }
      const metrics = metricsOf(d).map((k) => ({ alias: k + 1, type: 'Double' as const, value: valueOf(k, tick), timestamp: ts }));
      client.publish(`spBv1.0/${group}/DDATA/${node}/d${d}`, Buffer.from(sparkplugCodec.encodePayload({ timestamp: ts, seq: nextSeq(), metrics })), { qos: 0 });
    }
  });
  // QoS 0: nothing to wait for but mqtt.js's write buffer and, with a Primary Host, the stored values.
  serveCount(() => sent * PER_MESSAGE, { ok: true }, {
    stats: () => ({ stored: storedCount * PER_MESSAGE, storedMax: storedMax * PER_MESSAGE, forwarded: forwarded * PER_MESSAGE }),
    sentKeys: () => finishSending(stop, () => (client.stream.writableLength > 0 || storedCount > 0 ? 1 : 0), () => ({ groups, failed: 0 })),
  });
}

/** 50 Modbus TCP devices, each with n/50 holding registers that all change every second. */
async function modbusDevices(n: number): Promise<void> {
  const { startModbusSimulator } = await import('../src/sim/modbus-device.js');
  const per = Math.ceil(n / MODBUS_DEVICES);
  const sims = await Promise.all(Array.from({ length: MODBUS_DEVICES }, () => startModbusSimulator({ port: 0, demo: false })));
  let tick = 0;
  setInterval(() => {
    tick += 1;
    for (const s of sims) for (let a = 0; a < per; a++) s.setRegister('holding', a, (a + tick) % 65_536);
  }, 1_000);
  serveCount(() => 0, { ports: sims.map((s) => s.port) });
}

async function bareOpcua(endpointUrl: string, nodeIds: string[]): Promise<void> {
  const { AttributeIds, ClientMonitoredItemGroup, OPCUAClient, OPCUACertificateManager, TimestampsToReturn } = await import('node-opcua');
  // A PKI folder kept between runs: the certificate is made once, not inside a measurement.
  const client = OPCUAClient.create({ clientCertificateManager: new OPCUACertificateManager({ rootFolder: join(tmpdir(), 'plant-scale-bare-pki') }), endpointMustExist: false });
  const t0 = performance.now();
  await client.connect(endpointUrl);
  const session = await client.createSession();
  const subscription = await session.createSubscription2({ requestedPublishingInterval: 1_000, requestedMaxKeepAliveCount: 10, requestedLifetimeCount: 120, maxNotificationsPerPublish: 0, publishingEnabled: true });
  let values = 0;
  for (let start = 0; start < nodeIds.length; start += 1_000) {
    const chunk = nodeIds.slice(start, start + 1_000);
    const group = ClientMonitoredItemGroup.create(subscription, chunk.map((nodeId) => ({ nodeId, attributeId: AttributeIds.Value })), { samplingInterval: 1_000, queueSize: 1, discardOldest: true }, TimestampsToReturn.Both);
    await new Promise<void>((r) => group.on('initialized', () => r()));
    group.on('changed', () => void (values += 1));
  }
  // Closing the session deletes its subscription on the server (Part 4 §5.6.4): a client that just
  // exits leaves it sampling (and its session open) into the gateway's measurement.
  serveCount(() => values, { setupMs: performance.now() - t0 }, { stop: () => client.disconnect() });
}

/** The baseline for the open62541 server (bench/open62541.ts bareRawClient). */
async function bareOpcuaRaw(endpointUrl: string, nodeIds: string[], samplingMs: number): Promise<void> {
  const c = await bareRawClient({ endpointUrl, nodeIds, samplingMs, queueSize: 10, perCall: 1_000, publishRequests: barePublishRequests(nodeIds.length) });
  serveCount(c.count, { setupMs: c.setupMs }, { stats: () => ({ wrong: c.wrong() }), stop: c.stop });
}

/**
 * The bare client: an mqtt.js subscriber counting messages. With `hostId` (Sparkplug, BENCH_PRIMARY_HOST)
 * it stands in for the Primary Host the edge node waits for: its STATE birth and Will, and the death
 * STATE before it leaves, so the edge node stores from then until the gateway's birth.
 */
async function bareMqtt(url: string, topic: string, perMessage: number, hostId: string | null): Promise<void> {
  const mqtt = (await import('mqtt')).default;
  const { stateTopic, statePayload } = await import('../src/sources/mqtt/primary-host.js');
  const t = Date.now();
  const will = hostId === null ? undefined : { topic: stateTopic(hostId), payload: statePayload(false, t), qos: 1 as const, retain: true };
  const client = await mqtt.connectAsync(url, { clientId: `plant-scale-bare-${process.pid}`, clean: true, will });
  let messages = 0;
  client.on('message', () => void (messages += 1));
  await client.subscribeAsync(topic, { qos: 1 });
  if (hostId !== null) await client.publishAsync(stateTopic(hostId), statePayload(true, t), { qos: 1, retain: true });
  serveCount(() => messages * perMessage, { setupMs: 0 }, {
    stop: async () => {
      if (hostId !== null) await client.publishAsync(stateTopic(hostId), statePayload(false, Date.now()), { qos: 1, retain: true });
      await client.endAsync();
    },
  });
}

async function bareModbus(ports: number[], per: number): Promise<void> {
  const modbusSerial = (await import('modbus-serial')).default;
  let values = 0;
  for (const port of ports) {
    const c = new modbusSerial.default();
    c.on('error', () => undefined);
    await c.connectTCP('127.0.0.1', { port });
    c.setID(1);
    c.setTimeout(1_000);
    const poll = async () => {
      for (let a = 0; a < per; a += 125) {
        const r = await c.readHoldingRegisters(a, Math.min(125, per - a)).catch(() => null);
        if (r) values += r.data.length;
      }
    };
    setInterval(() => void poll(), 1_000);
  }
  serveCount(() => values, { setupMs: 0 });
}

// ================================================================ orchestration helpers

/** A child in `role`; its arguments go over IPC (100,000 node ids do not fit a command line). */
function child(role: string, args: Serializable): ChildProcess {
  const cp = fork(SELF, [role], { execArgv: process.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  cp.send(args);
  return cp;
}

function nextMessage<T>(cp: ChildProcess): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`child exited (${code}) before answering`));
    cp.once('exit', onExit);
    cp.once('message', (m) => {
      cp.off('exit', onExit);
      resolve(m as T);
    });
  });
}

async function countOf(cp: ChildProcess): Promise<number> {
  const answer = nextMessage<{ count: number }>(cp);
  cp.send('count');
  return (await answer).count;
}

async function stopChild(cp: ChildProcess): Promise<void> {
  if (cp.exitCode !== null || cp.signalCode !== null) return;
  const exited = new Promise<void>((r) => cp.once('exit', () => r()));
  cp.send('stop');
  const t = setTimeout(() => cp.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(t);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const load = () => loadavg().map((l) => l.toFixed(1)).join(' / ');

function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** mosquitto in its own process (bench/lib.ts); the kill check keeps its notices (see the header). */
const startMosquitto = (dir: string) => startBroker(dir, { keepLog: KILL });

interface Measured {
  cores: number;
  /** CPU of the server or publisher (and broker) processes in the same window: are they the limit? */
  sourceCores: number;
  /** Values the publisher sent per second in the window (MQTT, Sparkplug), else null. */
  published: number | null;
  peakRss: number;
  steadyRss: number;
  rate: number;
  setupS: number | null;
  /** Per-second rates of the counters `snap` read at both ends of the window (loss accounting). */
  counters: Record<string, number>;
}

/** The process a window measures: its pid now, and the CPU seconds it used (with those of processes it replaced: the kill check). */
interface Watched {
  pid(): number;
  cpuSeconds(): number;
}
const watch = (pid: number): Watched => ({ pid: () => pid, cpuSeconds: () => cpuSecondsOf(pid) });

/** CPU (cores), RSS and the count's rate of process `proc` over SECONDS; `snap`'s counters as rates. */
async function window(proc: Watched, src: Source, count: () => Promise<number>, during?: () => Promise<void>, snap: () => Promise<Record<string, number>> = async () => ({}), profileLabel = 'window'): Promise<Omit<Measured, 'setupS'>> {
  const sourcePids = src.pids;
  const p0 = (await src.published?.()) ?? null;
  const rss = rssSampler(() => proc.pid(), 500);
  const sourceCpu = () => sourcePids.reduce((t, p) => t + cpuSecondsOf(p), 0);
  const s0 = sourceCpu();
  const c0 = proc.cpuSeconds();
  const n0 = await count();
  const k0 = await snap();
  const serverProf = process.env.BENCH_SERVER_PROF;
  if (serverProf && src.profile) src.profile('start');
  const t0 = performance.now();
  const end = t0 + SECONDS * 1_000;
  while (performance.now() < end) {
    await sleep(Math.min(1_000, end - performance.now()));
    await during?.();
  }
  if (serverProf && src.profile) {
    mkdirSync(serverProf, { recursive: true });
    src.profile(join(serverProf, `server-${profileLabel}.cpuprofile`));
  }
  const n1 = await count();
  const k1 = await snap();
  const p1 = (await src.published?.()) ?? null;
  const s = (performance.now() - t0) / 1_000;
  const counters: Record<string, number> = {};
  for (const [k, v] of Object.entries(k1)) counters[k] = (v - (k0[k] ?? 0)) / s;
  const cpu = proc.cpuSeconds() - c0;
  const sourceCores = (sourceCpu() - s0) / s;
  const { peak, samples } = rss.stop();
  return { cores: cpu / s, sourceCores, published: p0 !== null && p1 !== null ? (p1 - p0) / s : null, peakRss: peak, steadyRss: percentile(samples, 50), rate: (n1 - n0) / s, counters };
}

// ================================================================ loss accounting (OPC UA)

/**
 * Counters at one instant, flat: the server's samplings and, per session, notifications sent,
 * values its monitored-item queues discarded and notifications harvested but not yet sent; the
 * gateway's stage counters from /metrics when `metricsUrl` is given.
 */
async function opcuaSnapshot(src: Source, metricsUrl?: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  if (src.plant) {
    const c = src.plant.latest();
    out['server samplings (plant)'] = c.reads;
    out['server new values (plant)'] = c.fresh;
    out['server ticks never sampled (plant)'] = c.skipped;
  }
  const st = await src.serverStats?.();
  if (st) {
    out['server samplings'] = st.reads;
    for (const sub of st.subscriptions) {
      const who = sub.session.startsWith('edge-gateway') ? 'gateway' : 'bare client';
      out[`server sent to ${who}`] = (out[`server sent to ${who}`] ?? 0) + sub.notificationsSent;
      out[`server discarded (overflow) for ${who}`] = (out[`server discarded (overflow) for ${who}`] ?? 0) + sub.queueOverflows;
      out[`server holds for ${who} (growth)`] = (out[`server holds for ${who} (growth)`] ?? 0) + sub.pendingNotifications + sub.queuedInItems;
    }
  }
  if (metricsUrl) {
    const text = await fetch(metricsUrl).then((r) => r.text()).catch(() => '');
    const sum = (name: string) => {
      let t = 0;
      for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) t += Number(m[1]);
      return t;
    };
    out['gateway received'] = sum('gateway_opcua_values_received_total');
    out['gateway saw Overflow bit'] = sum('gateway_opcua_queue_overflows_total');
    out['gateway missed messages'] = sum('gateway_opcua_missed_messages_total');
    out['gateway refused (any reason)'] = sum('gateway_source_samples_refused_total');
    out['buffer refused'] = sum('gateway_buffer_refused_samples_total');
    out['buffer dropped'] = sum('gateway_buffer_dropped_samples_total');
    // Values lost before the buffer, counted by the source (status dropped_total includes them): the
    // Overflow-bit estimate and values refused by a full source queue.
    out['gateway counted lost (server_overflow, buffer_full)'] = sum('gateway_source_values_lost_total');
    out['gateway committed'] = sum('gateway_buffer_committed_samples_total');
  }
  return out;
}

/**
 * The accounting rows of one side: each counter per second and as a share of the expected N/s,
 * then what the counters leave unexplained. On the server: values sampled for this client that
 * were neither sent, nor still held (harvested or in the items' queues), nor counted as
 * discarded: with queue size 1 a newer value replaces an unsent one without an Overflow bit
 * (Part 4 §5.12.1.5), so this is where the bare client's lost values show. On the gateway: values
 * received and neither committed nor refused (in memory, waiting for a commit, at the window's end).
 */
function accountingRows(step: string, side: string, counters: Record<string, number>, n: number): Array<Record<string, string | number>> {
  const row = (stage: string, rate: number) => ({ step, side, stage, 'per s': Math.round(rate), 'of N/s': `${((rate / n) * 100).toFixed(1)} %` });
  const rows = Object.entries(counters).map(([stage, rate]) => row(stage, rate));
  const who = side === 'gateway' ? 'gateway' : 'bare client';
  const c = (k: string) => counters[k] ?? 0;
  if ('server samplings' in counters) rows.push(row(`server: sampled, not sent, not held, not counted (replaced in a queue of 1)`, c('server samplings') - c(`server sent to ${who}`) - c(`server holds for ${who} (growth)`) - c(`server discarded (overflow) for ${who}`)));
  if ('gateway received' in counters) rows.push(row('gateway: received, not committed, not refused', c('gateway received') - c('gateway committed') - c('gateway refused (any reason)')));
  if ('server new values (plant)' in counters && 'gateway received' in counters) rows.push(row('plant server: new values not received by the gateway', c('server new values (plant)') - c('gateway received')));
  return rows;
}

async function opcuaSnapshotIf(p: Protocol, src: Source, metricsUrl?: string): Promise<Record<string, number>> {
  return p === 'opcua' ? opcuaSnapshot(src, metricsUrl) : {};
}

// ================================================================ one step

interface Source {
  /** The gateway configuration's source sections. */
  config: Record<string, unknown>;
  /** Starts the bare client process; resolves with it once set up. */
  bare(): Promise<{ cp: ChildProcess; setupMs: number }>;
  /** Server, publisher and broker processes. */
  pids: number[];
  /** Values published so far (MQTT, Sparkplug publishers). */
  published?: () => Promise<number>;
  /** The OPC UA server's own counters (samplings, notifications sent, queue overflows). */
  serverStats?: () => Promise<BulkStats>;
  /** The open62541 plant server (its ticks and counters; the value check). */
  plant?: PlantServer;
  /** BENCH_SERVER_PROF: starts ('start') or writes (a file path) the server's CPU profile. */
  profile?: (what: string) => void;
  /** Kill check: stops the publisher and says what it sent (MQTT, Sparkplug). */
  sentKeys?: () => Promise<SentKeys>;
  /** Kill check: mosquitto's log file. */
  brokerLog?: string | null;
  /** Sparkplug with a Primary Host: values the edge node stored (now, at most) and forwarded as is_historical. */
  storeAndForward?: () => Promise<{ stored: number; storedMax: number; forwarded: number } | null>;
  stop(): Promise<void>;
}

async function startSource(p: Protocol, n: number, dir: string): Promise<Source> {
  if (p === 'opcua' && OPCUA_SERVER === 'open62541') {
    const plant = await startPlantServer({ n, intervalMs: INTERVAL_MS, port: await freePort() });
    const nodeIds = Array.from({ length: n }, (_, i) => plantNodeId(i + 1));
    const sampling = INTERVAL_MS === 1_000 ? {} : { sampling_interval: `${INTERVAL_MS}ms` };
    return {
      config: { opcua: { pki_dir: join(tmpdir(), 'plant-scale-gw-pki'), servers: [{ name: 'plant', endpoint: plant.endpointUrl, security_mode: 'None', publishing_interval: '1s', ...sampling, nodes: nodeIds.map((node_id, i) => ({ node_id, variable: variableOf(p, i) })) }] } },
      bare: async () => {
        const cp = child('bare-opcua-raw', { endpointUrl: plant.endpointUrl, nodeIds, samplingMs: INTERVAL_MS });
        return { cp, setupMs: (await nextMessage<{ setupMs: number }>(cp)).setupMs };
      },
      pids: [plant.pid],
      plant,
      stop: () => plant.stop(),
    };
  }
  if (p === 'opcua') {
    const server = child('opcua-server', { n });
    const { endpointUrl, nodeIds } = await nextMessage<{ endpointUrl: string; nodeIds: string[] }>(server);
    return {
      // The gateway's certificate kept between runs (opcua.pki_dir): the set-up time is the session's, not key generation's.
      config: { opcua: { pki_dir: join(tmpdir(), 'plant-scale-gw-pki'), servers: [{ name: 'plant', endpoint: endpointUrl, security_mode: 'None', publishing_interval: '1s', nodes: nodeIds.map((node_id, i) => ({ node_id, variable: variableOf(p, i) })) }] } },
      bare: async () => {
        const cp = child('bare-opcua', { endpointUrl, nodeIds });
        return { cp, setupMs: (await nextMessage<{ setupMs: number }>(cp)).setupMs };
      },
      pids: [server.pid!],
      serverStats: async () => {
        const answer = nextMessage<{ stats: BulkStats }>(server);
        server.send('stats');
        return (await answer).stats;
      },
      profile: (what) => server.send({ profile: what }),
      stop: () => stopChild(server),
    };
  }
  if (p === 'mqtt' || p === 'sparkplug') {
    const broker = await startMosquitto(dir);
    const hostId = p === 'sparkplug' && PRIMARY_HOST ? 'plant-scale-gateway' : null;
    const pub = child(p === 'mqtt' ? 'mqtt-publisher' : 'sparkplug-publisher', { n, url: broker.url, hostId });
    await nextMessage(pub);
    const subscription =
      p === 'mqtt'
        ? { topic: 'plant/json/#', format: 'metrics', qos: 1, payload_variables: ['mvr_mqtt_*'] }
        : { topic: 'spBv1.0/plant/#', format: 'sparkplug', qos: 1, payload_variables: ['mvr_sparkplug_*'] };
    // Kill check, JSON at QoS 1: a persistent session (clean: false, the gateway's default), so the
    // broker keeps what the killed gateway never acknowledged and what arrives while it is away
    // (MQTT 3.1.1 §3.1.2.4). Sparkplug keeps clean: true as Sparkplug 3.0 asks: its DDATA is QoS 0,
    // which a broker neither redelivers nor (mosquitto's default) queues for an absent session.
    const clean = !(KILL && p === 'mqtt');
    return {
      config: { mqtt: { connections: [{ name: 'plant', url: broker.url, client_id: `plant-scale-gw-${p}`, clean, subscriptions: [subscription], ...(hostId === null ? {} : { primary_host_id: hostId }) }] } },
      bare: async () => {
        const cp = child('bare-mqtt', { url: broker.url, topic: p === 'mqtt' ? 'plant/json/#' : 'spBv1.0/plant/DDATA/#', perMessage: PER_MESSAGE, hostId });
        return { cp, setupMs: (await nextMessage<{ setupMs: number }>(cp)).setupMs };
      },
      pids: [pub.pid!, broker.pid],
      published: () => countOf(pub),
      sentKeys: async () => {
        const answer = nextMessage<{ keys: SentKeys }>(pub);
        pub.send('keys');
        return (await answer).keys;
      },
      brokerLog: broker.log,
      ...(hostId === null
        ? {}
        : {
            storeAndForward: async () => {
              const answer = nextMessage<{ stats: { stored: number; storedMax: number; forwarded: number } | null }>(pub);
              pub.send('stats');
              return (await answer).stats;
            },
          }),
      stop: async () => {
        await stopChild(pub);
        await broker.stop();
      },
    };
  }
  const sims = child('modbus-devices', { n });
  const { ports } = await nextMessage<{ ports: number[] }>(sims);
  const per = Math.ceil(n / MODBUS_DEVICES);
  return {
    config: {
      modbus: {
        name: 'plant',
        devices: ports.map((port, d) => ({ name: `dev${d + 1}`, transport: 'tcp', host: '127.0.0.1', port, unit_id: 1, registers: Array.from({ length: per }, (_, a) => ({ variable: variableOf(p, d * per + a), table: 'holding', address: a, type: 'uint16' })) })),
      },
    },
    bare: async () => {
      const cp = child('bare-modbus', { ports, per });
      return { cp, setupMs: (await nextMessage<{ setupMs: number }>(cp)).setupMs };
    },
    pids: [sims.pid!],
    stop: () => stopChild(sims),
  };
}

interface GatewayFigures extends Measured {
  freshP50: number;
  freshP99: number;
  backlogMax: number;
  oldestMax: number;
  /** Samples read and not yet committed (buffer.pending_commit + the sources' pending_samples): a gateway falling behind. */
  pendingMax: number;
  loopP99Max: number;
  loopMaxMax: number;
  /** /metrics scrapes the loop figures come from (one per 5 s of window): none in a window under 5 s. */
  loopScrapes: number;
  /** OPC UA: most notifications the server held harvested and unsent for the gateway (5 s samples). */
  serverBacklogMax: number;
  /** OPC UA: share of the 1 s looks where the server held notifications and no Publish request of the gateway's. */
  serverStarvedShare: number;
  /** BENCH_KILL: the SIGKILL, the restart and what arrived (MQTT, Sparkplug), else null. */
  kill: KillFigures | null;
  /** The open62541 server: every value of the window's ticks looked up upstream, else null. */
  values: PlantCheck | null;
}

interface PlantCheck extends ValueCheck {
  fromTick: number;
  toTick: number;
  drained: boolean;
  drainS: number;
  leftover: string;
}

/**
 * The value-by-value check of the open62541 server's values (bench/open62541.ts): the ticks whose
 * time lies in the window, the server kept running DRAIN_LIVE_S more (what it queued for the
 * gateway arrives), then stopped; once the gateway holds nothing (three looks in a row, at most
 * DRAIN_DEADLINE_MS) every (variable, tick) is looked up in the emulator.
 */
async function plantValueCheck(plant: PlantServer, emuBase: string, status: () => Promise<Status>, fromMs: number, toMs: number): Promise<PlantCheck> {
  const ticks = [...plant.tickAt].filter(([, at]) => at >= fromMs && at <= toMs).map(([k]) => k);
  const fromTick = Math.min(...ticks);
  const toTick = Math.max(...ticks);
  await sleep(DRAIN_LIVE_S * 1_000);
  await plant.stop();
  const t = performance.now();
  const { drained, last } = await untilDrained(status);
  const leftover = drained || !last ? '' : `backlog ${last.buffer.samples}, pending ${last.buffer.pending_commit}, inflight ${last.buffer.inflight}, jobs ${last.backfill.jobs_in_flight}`;
  const check = await checkPlantValues(emuBase, `mvr_opcua_`, plant, fromTick, toTick);
  return { ...check, fromTick, toTick, drained, drainS: (performance.now() - t) / 1_000, leftover };
}

/** Waits until the gateway holds nothing (backlog 0, nothing pending a commit, no batch or import job in flight, three looks in a row 0.5 s apart), at most DRAIN_DEADLINE_MS. */
async function untilDrained(status: () => Promise<Status>): Promise<{ drained: boolean; last: Status | null }> {
  const t = performance.now();
  let idleLooks = 0;
  let last: Status | null = null;
  while (idleLooks < 3 && performance.now() - t < DRAIN_DEADLINE_MS) {
    await sleep(500);
    last = await status().catch(() => null);
    const idle = last !== null && last.buffer.samples === 0 && last.buffer.pending_commit === 0 && last.buffer.inflight === 0 && last.backfill.jobs_in_flight === 0 && sourcesPending(last) === 0;
    idleLooks = idle ? idleLooks + 1 : 0;
  }
  return { drained: idleLooks >= 3, last };
}

interface Status {
  buffer: { samples: number; committed_total: number; oldest_unsent_age_s: number | null; pending_commit: number; inflight: number };
  uplink: { freshest_delivered_age_s: number | null; sync: { delivered_total: number } };
  backfill: { jobs_in_flight: number; delivered_total: number };
  sources: Array<{ detail?: Record<string, unknown> }>;
}

/** Values a source read and has not handed to the buffer yet (OPC UA pending_samples; MQTT messages awaiting their commit). */
const sourcesPending = (s: Status) => s.sources.reduce((t, x) => t + Number(x.detail?.pending_samples ?? 0) + Number(x.detail?.pending_messages ?? 0), 0);

async function runGateway(p: Protocol, n: number, src: Source, dir: string): Promise<GatewayFigures> {
  const { DEMO_FIXTURE } = await import('../src/emulator/demo-fixture.js');
  const fixture = { ...DEMO_FIXTURE, machine_variables: [...DEMO_FIXTURE.machine_variables, ...Array.from({ length: n }, (_, i) => ({ id: variableOf(p, i), name: variableOf(p, i), machine: 'mch_gen1', unit: '' }))] };
  const emu = await startEmulatorProcess({ port: await freePort(), dir, fixture, jobDelayMs: 200 });
  const httpPort = await freePort();
  const base = `http://127.0.0.1:${httpPort}`;
  let gw: Proc | null = null;
  try {
    const profDir = process.env.BENCH_CPU_PROF;
    if (profDir) mkdirSync(profDir, { recursive: true });
    const config = {
      gateway: { name: `scale-${p}`, data_dir: join(dir, 'data'), status_interval: 0 },
      log: { level: 'info', format: 'json' },
      service: { base_url: `${emu.base}/tracking/v1`, auth_url: emu.base, organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'demo-gateway', client_secret: 'demo-secret' } },
      buffer: { path: join(dir, 'buffer.db') },
      http: { enabled: true, host: '127.0.0.1', port: httpPort },
      ...src.config,
    };
    const t0 = performance.now();
    const gwStartedAt = Date.now();
    gw = await startGatewayProcess(config, dir, profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, `--cpu-prof-name=${p}-${n}.cpuprofile`] : []);
    // Set-up: every variable read at least once (OPC UA: every item monitored).
    let setupS: number | null = null;
    for (;;) {
      const s = await getJson<Status>(`${base}/status`).catch(() => null);
      const monitored = Number(s?.sources[0]?.detail?.nodes_monitored ?? -1);
      if (p === 'opcua' ? monitored === n : (s?.buffer.committed_total ?? 0) >= n) {
        setupS = (performance.now() - t0) / 1_000;
        break;
      }
      if (performance.now() - t0 > SETUP_DEADLINE_MS) throw new Error(`${p} ${n}: not set up after ${SETUP_DEADLINE_MS / 1000} s (monitored ${monitored}, committed ${s?.buffer.committed_total})`);
      await sleep(250);
    }
    await sleep(WARMUP * 1_000);
    const fresh: number[] = [];
    let backlogMax = 0;
    let oldestMax = 0;
    let pendingMax = 0;
    let loopP99Max = 0;
    let loopMaxMax = 0;
    let serverBacklogMax = 0;
    let serverLooks = 0;
    let serverStarved = 0;
    const status = () => getJson<Status>(`${base}/status`);
    let scrape = 0;
    // Kill check: what the killed process used and committed is added to its successor's figures.
    const killing = KILL && src.sentKeys !== undefined;
    let deadCpu = 0;
    let deadCommitted = 0;
    let restarted: Restart | null = null;
    let backlogAfterRestartMax = 0;
    const proc: Watched = { pid: () => gw!.child.pid!, cpuSeconds: () => deadCpu + cpuSecondsOf(gw!.child.pid!) };
    const windowFromMs = Date.now();
    const killTask = killing
      ? sleep((SECONDS * 1_000) / 2).then(async () => {
          const before = await status();
          const old = gw!;
          deadCommitted += before.buffer.committed_total;
          deadCpu += cpuSecondsOf(old.child.pid!);
          const prof = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`, `--cpu-prof-name=${p}-${n}-restarted.cpuprofile`] : [];
          restarted = { ...(await killAndRestart(old, before.buffer.samples, async () => (gw = await startGatewayProcess(config, dir, prof)), status)), pendingBefore: sourcesPending(before) * PER_MESSAGE };
        })
      : Promise.resolve();
    const m = await window(
      proc,
      src,
      async () => {
        // A restart still under way at the window's end: wait for the new process's /status.
        for (;;) {
          const s = await status().catch(() => null);
          if (s) return deadCommitted + s.buffer.committed_total;
          await sleep(100);
        }
      },
      async () => {
        const s = await status().catch(() => null);
        if (s) {
          if (s.uplink.freshest_delivered_age_s !== null) fresh.push(s.uplink.freshest_delivered_age_s);
          backlogMax = Math.max(backlogMax, s.buffer.samples);
          if (restarted) backlogAfterRestartMax = Math.max(backlogAfterRestartMax, s.buffer.samples);
          oldestMax = Math.max(oldestMax, s.buffer.oldest_unsent_age_s ?? 0);
          pendingMax = Math.max(pendingMax, s.buffer.pending_commit + s.sources.reduce((t, x) => t + Number(x.detail?.pending_samples ?? 0), 0));
        }
        // prom-client resets its event-loop histogram at every scrape: one scrape every 5 s.
        if (++scrape % 5 === 0) {
          const text = await fetch(`${base}/metrics`).then((r) => r.text()).catch(() => '');
          const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
          loopP99Max = Math.max(loopP99Max, read('gateway_process_nodejs_eventloop_lag_p99_seconds'));
          loopMaxMax = Math.max(loopMaxMax, read('gateway_process_nodejs_eventloop_lag_max_seconds'));
        }
        // What the server holds for the gateway (notifications harvested and not yet sent), and
        // whether it then had a Publish request of the gateway's to answer with.
        const st = await src.serverStats?.().catch(() => null);
        for (const sub of st?.subscriptions ?? []) {
          if (!sub.session.startsWith('edge-gateway')) continue;
          serverBacklogMax = Math.max(serverBacklogMax, sub.pendingNotifications + sub.queuedInItems);
          serverLooks += 1;
          if (sub.pendingNotifications > 0 && sub.queuedPublishRequests === 0) serverStarved += 1;
        }
      },
      () => opcuaSnapshotIf(p, src, `${base}/metrics`),
      `${p}-${n}-gateway`,
    );
    const windowToMs = Date.now();
    // A profile covers the process's life; this says which part of it the window was (seconds from the process's start).
    if (profDir) console.log(`  ${p} ${n}: measured window ${((windowFromMs - gwStartedAt) / 1_000).toFixed(1)}–${((windowToMs - gwStartedAt) / 1_000).toFixed(1)} s after the gateway process started (for the profile)`);
    await killTask;
    const kill = killing && restarted ? await killCheck(p, n, src, emu, status, restarted, backlogAfterRestartMax, windowFromMs) : null;
    const values = src.plant ? await plantValueCheck(src.plant, emu.base, status, windowFromMs, windowToMs) : null;
    return { ...m, setupS, freshP50: percentile(fresh, 50), freshP99: percentile(fresh, 99), backlogMax, oldestMax, pendingMax, loopP99Max, loopMaxMax, loopScrapes: Math.floor(scrape / 5), serverBacklogMax, serverStarvedShare: serverLooks > 0 ? serverStarved / serverLooks : 0, kill, values };
  } finally {
    await gw?.stop();
    await emu.stop();
  }
}

// ================================================================ kill check (BENCH_KILL)

interface Restart {
  /** Wall-clock ms of the SIGKILL and of the first commit of the restarted gateway. */
  killedAt: number;
  resumedAt: number;
  /** Seconds from the SIGKILL to: the new process's "gateway started", /status answering, its first commit, its first delivery upstream. */
  startedS: number;
  statusS: number;
  firstCommitS: number;
  firstDeliveryS: number;
  backlogBefore: number;
  /** buffer.samples at the restarted gateway's first /status: what the killed one left in the file. */
  backlogAtRestart: number;
  /** Values in messages the gateway had received and not committed at its last /status before the kill (MQTT: pending_messages × 100). */
  pendingBefore?: number;
}

/**
 * SIGKILLs the gateway (the whole process, no handler runs: a crash), starts it again on the same
 * data dir, buffer and config while the publisher keeps publishing, and times its way back:
 * polling /status every 50 ms, never waiting a fixed time.
 */
async function killAndRestart(old: Proc, backlogBefore: number, start: () => Promise<Proc>, status: () => Promise<Status>): Promise<Restart> {
  const killedAt = Date.now();
  const t = performance.now();
  await old.stop('SIGKILL');
  await start();
  const startedS = (performance.now() - t) / 1_000;
  const since = () => (performance.now() - t) / 1_000;
  let statusS = NaN;
  let backlogAtRestart = NaN;
  let firstCommitS = NaN;
  let resumedAt = NaN;
  let firstDeliveryS = NaN;
  while (Number.isNaN(firstCommitS) || Number.isNaN(firstDeliveryS)) {
    if (since() > SETUP_DEADLINE_MS / 1_000) throw new Error(`gateway restarted after SIGKILL: no commit or no delivery within ${SETUP_DEADLINE_MS / 1000} s`);
    const s = await status().catch(() => null);
    if (s) {
      if (Number.isNaN(statusS)) {
        statusS = since();
        backlogAtRestart = s.buffer.samples;
      }
      if (Number.isNaN(firstCommitS) && s.buffer.committed_total > 0) {
        firstCommitS = since();
        resumedAt = Date.now();
      }
      if (Number.isNaN(firstDeliveryS) && s.uplink.sync.delivered_total + s.backfill.delivered_total > 0) firstDeliveryS = since();
    }
    await sleep(50);
  }
  return { killedAt, resumedAt, startedS, statusS, firstCommitS, firstDeliveryS, backlogBefore, backlogAtRestart };
}

interface KillFigures extends Restart {
  sent: number;
  delivered: number;
  lost: number;
  /** Lost values by their timestamp: before the kill, between the kill and the first commit after it, after that. */
  lostBefore: number;
  lostOutage: number;
  lostAfter: number;
  lostFirst: number | null;
  lostLast: number | null;
  /** Delivered in the checked range with a timestamp the publisher never sent (should be 0). */
  unexpected: number;
  /** Writes that replaced a value at the same (variable, timestamp): delivered twice (whole run). */
  duplicates: number;
  publishFailed: number;
  backlogAfterRestartMax: number;
  drained: boolean;
  drainS: number;
  /** What was still held at the drain deadline when not drained. */
  leftover: string;
  refusedAfterRestart: Record<string, number>;
  brokerDrops: number;
  /** Primary Host runs: the edge node's store and forward (values), else null. */
  storeAndForward: { stored: number; storedMax: number; forwarded: number } | null;
  emulatorRss: number;
  emulatorValues: number;
}

/**
 * After the window: stops the publisher, waits until the gateway holds nothing (backlog 0, nothing
 * pending a commit, no batch or import job in flight, three looks in a row 0.5 s apart) and then
 * compares, per variable, the timestamps the publisher sent since the window began with those the
 * emulator stores (GET /_emulator/value-keys).
 */
async function killCheck(p: Protocol, n: number, src: Source, emu: { base: string; child: ChildProcess }, status: () => Promise<Status>, r: Restart, backlogAfterRestartMax: number, fromMs: number): Promise<KillFigures> {
  const keys = await src.sentKeys!();
  const t = performance.now();
  const { drained, last } = await untilDrained(status);
  const drainS = (performance.now() - t) / 1_000;
  const leftover = drained || !last ? '' : `backlog ${last.buffer.samples}, pending ${last.buffer.pending_commit}, inflight ${last.buffer.inflight}, jobs ${last.backfill.jobs_in_flight}, source pending ${sourcesPending(last)}`;

  const sentOf = keys.groups.map((ts) => [...new Set(ts)].filter((x) => x >= fromMs).sort((a, b) => a - b));
  // The latest instant the publisher reported: an edge node births again when the gateway comes back
  // after the report (a reconnect during the drain), and those DBIRTH values are later than every key.
  const until = keys.groups.reduce((m, ts) => ts.reduce((a, b) => Math.max(a, b), m), -Infinity);
  const f = { sent: 0, delivered: 0, lost: 0, lostBefore: 0, lostOutage: 0, lostAfter: 0, lostFirst: null as number | null, lostLast: null as number | null, unexpected: 0, duplicates: 0 };
  const compare = (k: number, stored: number[]) => {
    const want = sentOf[Math.floor(k / PER_MESSAGE)] ?? [];
    const got = stored.filter((x) => x >= fromMs && x <= until);
    f.sent += want.length;
    let i = 0;
    let j = 0;
    while (i < want.length || j < got.length) {
      if (j >= got.length || (i < want.length && want[i] < got[j])) {
        const ts = want[i++];
        f.lost += 1;
        if (ts < r.killedAt) f.lostBefore += 1;
        else if (ts < r.resumedAt) f.lostOutage += 1;
        else f.lostAfter += 1;
        f.lostFirst = Math.min(f.lostFirst ?? ts, ts);
        f.lostLast = Math.max(f.lostLast ?? ts, ts);
      } else if (i >= want.length || got[j] < want[i]) {
        f.unexpected += 1;
        j += 1;
      } else {
        f.delivered += 1;
        i += 1;
        j += 1;
      }
    }
  };
  const prefix = `mvr_${p}_`;
  const seen = new Uint8Array(n);
  let cursor: string | null = null;
  do {
    const page: { variables: Array<{ id: string; epoch_ms: number[]; overwritten: number }>; next_cursor: string | null } = await getJson(`${emu.base}/_emulator/value-keys?prefix=${prefix}&limit=2000${cursor ? `&starting_after=${cursor}` : ''}`);
    for (const v of page.variables) {
      const k = Number(v.id.slice(prefix.length)) - 1;
      if (!(k >= 0 && k < n)) continue;
      seen[k] = 1;
      compare(k, v.epoch_ms);
      f.duplicates += v.overwritten;
    }
    cursor = page.next_cursor;
  } while (cursor !== null);
  for (let k = 0; k < n; k++) if (!seen[k]) compare(k, []);

  // Values the restarted gateway refused, by reason (Sparkplug: aliases unknown until the rebirth).
  const refusedAfterRestart: Record<string, number> = {};
  for (const sub of ((last?.sources[0]?.detail?.subscriptions ?? []) as Array<{ refused?: Record<string, number> }>)) {
    for (const [reason, count] of Object.entries(sub.refused ?? {})) refusedAfterRestart[reason] = (refusedAfterRestart[reason] ?? 0) + count;
  }
  const brokerDrops = src.brokerLog && existsSync(src.brokerLog) ? (readFileSync(src.brokerLog, 'utf8').match(/messages are being dropped/gi) ?? []).length : 0;
  const stats = await getJson<{ values_stored: number }>(`${emu.base}/_emulator/stats`);
  const storeAndForward = (await src.storeAndForward?.()) ?? null;
  return { ...r, ...f, publishFailed: keys.failed, backlogAfterRestartMax, drained, drainS, leftover, refusedAfterRestart, brokerDrops, storeAndForward, emulatorRss: rssOf(emu.child.pid!), emulatorValues: stats.values_stored };
}

async function runBare(p: Protocol, n: number, src: Source): Promise<Measured> {
  const { cp, setupMs } = await src.bare();
  try {
    await sleep(WARMUP * 1_000);
    const m = await window(watch(cp.pid!), src, () => countOf(cp), undefined, async () => (p === 'opcua' ? { ...(await opcuaSnapshot(src)), 'bare client received': await countOf(cp) } : {}), `${p}-${n}-bare`);
    return { ...m, setupS: setupMs > 0 ? setupMs / 1_000 : null };
  } finally {
    await stopChild(cp);
  }
}

function valueRow(step: string, v: PlantCheck): Record<string, string | number> {
  const produced = v.expected - v.skipped;
  const pct = (x: number, of: number) => (of > 0 ? `${((x / of) * 100).toFixed(3)} %` : '-');
  return {
    step,
    ticks: `${v.ticks} (${v.fromTick}–${v.toTick})`,
    'expected (N × ticks)': v.expected,
    'never sampled by the server': v.skipped,
    delivered: v.delivered,
    'of produced': pct(v.delivered, produced),
    'of expected': pct(v.delivered, v.expected),
    wrong: v.wrong,
    unexpected: v.unexpected,
    duplicates: v.duplicates,
    'variables short': v.variablesShort,
    'drain s': `${v.drainS.toFixed(0)}${v.drained ? '' : ` (NOT drained: ${v.leftover})`}`,
  };
}

function killRow(step: string, k: KillFigures): Record<string, string | number> {
  const pctOf = (x: number) => (k.sent > 0 ? `${((x / k.sent) * 100).toFixed(3)} %` : '-');
  return {
    step,
    sent: k.sent,
    delivered: k.delivered,
    // Not drained: the gateway still holds some, so "lost" counts those too (an upper bound).
    'lost (before / outage / after kill)': `${k.drained ? '' : 'NOT drained, ≤ '}${k.lost} (${k.lostBefore} / ${k.lostOutage} / ${k.lostAfter}), ${pctOf(k.lost)}`,
    duplicates: k.duplicates,
    unexpected: k.unexpected,
    'kill → started / status / commit / delivery s': `${k.startedS.toFixed(1)} / ${k.statusS.toFixed(1)} / ${k.firstCommitS.toFixed(1)} / ${k.firstDeliveryS.toFixed(1)}`,
    'backlog before / at restart / max after': `${k.backlogBefore} / ${k.backlogAtRestart} / ${k.backlogAfterRestartMax}`,
    'drain s': `${k.drainS.toFixed(0)}${k.drained ? '' : ' (NOT drained)'}`,
    'emulator RSS MB (values)': `${mb(k.emulatorRss)} (${k.emulatorValues.toLocaleString('en-US')})`,
  };
}

function killNotes(k: KillFigures): string {
  const at = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString().slice(11, 23));
  const lines = [`  killed at ${at(k.killedAt)}, first commit after restart at ${at(k.resumedAt)}; values received and not committed at the last /status before the kill: ${k.pendingBefore ?? '-'}`];
  if (k.lost > 0) lines.push(`  lost values' timestamps from ${at(k.lostFirst)} to ${at(k.lostLast)}`);
  if (!k.drained) lines.push(`  not drained after ${DRAIN_DEADLINE_MS / 1000} s: ${k.leftover}`);
  const refused = Object.entries(k.refusedAfterRestart).filter(([, c]) => c > 0);
  if (refused.length > 0) lines.push(`  refused by the restarted gateway: ${refused.map(([r, c]) => `${r} ${c}`).join(', ')}`);
  const saf = k.storeAndForward;
  if (saf) lines.push(`  edge node store and forward (Primary Host STATE): at most ${saf.storedMax.toLocaleString('en-US')} values held while the gateway was offline, ${saf.forwarded.toLocaleString('en-US')} forwarded as is_historical, ${saf.stored.toLocaleString('en-US')} still held at the end`);
  lines.push(`  publishes failed: ${k.publishFailed}; mosquitto "messages are being dropped" notices: ${k.brokerDrops}`);
  return lines.join('\n');
}

// ================================================================ main

async function main(): Promise<void> {
  const role = process.argv[2];
  const a = role ? await new Promise<Record<string, unknown>>((r) => process.once('message', (m) => r(m as Record<string, unknown>))) : {};
  switch (role) {
    case 'opcua-server':
      return opcuaServer(a.n as number);
    case 'mqtt-publisher':
      return mqttPublisher(a.n as number, a.url as string);
    case 'sparkplug-publisher':
      return sparkplugPublisher(a.n as number, a.url as string, (a.hostId as string | null) ?? null);
    case 'modbus-devices':
      return modbusDevices(a.n as number);
    case 'bare-opcua':
      return bareOpcua(a.endpointUrl as string, a.nodeIds as string[]);
    case 'bare-opcua-raw':
      return bareOpcuaRaw(a.endpointUrl as string, a.nodeIds as string[], a.samplingMs as number);
    case 'bare-mqtt':
      return bareMqtt(a.url as string, a.topic as string, a.perMessage as number, (a.hostId as string | null) ?? null);
    case 'bare-modbus':
      return bareModbus(a.ports as number[], a.per as number);
  }

  if (!existsSync(join(import.meta.dirname, '..', 'dist', 'cli.js'))) throw new Error('run `npm run build` first: the gateway runs from dist/');
  smokeBanner(`BENCH_STEPS ${STEPS.join(',')}, BENCH_SECONDS ${SECONDS}, BENCH_WARMUP ${WARMUP}`);
  requirePeer(!PROTOCOLS.includes('opcua') || OPCUA_SERVER !== 'open62541' || open62541BuildScript() !== null, 'the open62541 build script (../shared/tools/open62541/build.sh) is missing: OPC UA values come from its plant server (set OPEN62541_BUILD, or BENCH_OPCUA_SERVER=node-opcua)');
  requirePeer(!PROTOCOLS.some((p) => p === 'mqtt' || p === 'sparkplug') || existsSync(MOSQUITTO), `${MOSQUITTO} is missing: MQTT and Sparkplug B go through a real mosquitto (apt-get install mosquitto; scripts/install-test-deps)`);
  console.log(`Plant scale: ${PROTOCOLS.join(', ')} at ${STEPS.map((s) => s.toLocaleString('en-US')).join(', ')} variables changing at 1 Hz; ${WARMUP} s warm-up, ${SECONDS} s measured per side.\n`);
  const rows: Array<Record<string, string | number>> = [];
  const accounting: Array<Record<string, string | number>> = [];
  const kills: Array<Record<string, string | number>> = [];
  const valueRows: Array<Record<string, string | number>> = [];
  if (KILL) {
    const unchecked = PROTOCOLS.filter((p) => p === 'opcua' || p === 'modbus');
    if (unchecked.length > 0) console.log(`BENCH_KILL: no kill check for ${unchecked.join(', ')} (a polled or sampled source has no "sent" set: a value nobody read while the gateway was dead was never a sample); they run without a kill.\n`);
  }
  for (const p of PROTOCOLS as Protocol[]) {
    if (!['opcua', 'mqtt', 'sparkplug', 'modbus'].includes(p)) throw new Error(`BENCH_PROTOCOLS: unknown protocol ${JSON.stringify(p)} (opcua, mqtt, sparkplug, modbus)`);
    for (const n of STEPS) {
      if (p === 'modbus' && n > 10_000 && process.env.BENCH_MODBUS_ANY !== '1') continue;
      const dir = mkdtempSync(join(tmpdir(), `plant-scale-${p}-${n}-`));
      const src = await startSource(p, n, dir);
      try {
        process.stdout.write(`${p} ${n}: bare client ... (load ${load()})\n`);
        const loadBare = load();
        const bare = await runBare(p, n, src);
        process.stdout.write(`${p} ${n}: gateway ... (load ${load()})\n`);
        const g = await runGateway(p, n, src, dir);
        const loadGw = load();
        const pct = (r: number) => `${((r / n) * 100).toFixed(1)} %`;
        const pub = (m: Measured) => (m.published === null ? '' : `, sent ${Math.round(m.published)}`);
        const usPer = (m: Measured) => (m.rate > 0 ? ((m.cores * 1e6) / m.rate).toFixed(2) : '-');
        rows.push({ step: `${p} ${n.toLocaleString('en-US')}`, side: 'bare client', 'CPU cores': bare.cores.toFixed(3), 'µs CPU / value': usPer(bare), 'source CPU': bare.sourceCores.toFixed(2), 'RSS peak/steady MB': `${mb(bare.peakRss)} / ${mb(bare.steadyRss)}`, 'rate /s (of expected)': `${Math.round(bare.rate)} (${pct(bare.rate)}${pub(bare)})`, 'set-up s': bare.setupS === null ? '-' : bare.setupS.toFixed(1), 'fresh p50/p99 s': '-', 'backlog max': '-', 'pending max': '-', 'oldest unsent s': '-', 'loop p99/max ms': '-', load: loadBare });
        rows.push({ step: `${p} ${n.toLocaleString('en-US')}`, side: 'gateway', 'CPU cores': g.cores.toFixed(3), 'µs CPU / value': usPer(g), 'source CPU': g.sourceCores.toFixed(2), 'RSS peak/steady MB': `${mb(g.peakRss)} / ${mb(g.steadyRss)}`, 'rate /s (of expected)': `${Math.round(g.rate)} (${pct(g.rate)}${pub(g)})`, 'set-up s': g.setupS === null ? '-' : g.setupS.toFixed(1), 'fresh p50/p99 s': `${g.freshP50.toFixed(1)} / ${g.freshP99.toFixed(1)}`, 'backlog max': g.backlogMax, 'pending max': g.pendingMax, 'oldest unsent s': Math.round(g.oldestMax), 'loop p99/max ms': g.loopScrapes > 0 ? `${Math.round(g.loopP99Max * 1000)} / ${Math.round(g.loopMaxMax * 1000)}` : 'not measured (window < 5 s)', load: loadGw });
        rows.push({ step: '', side: 'ratio gateway/bare', 'CPU cores': ratioText(g.cores, bare.cores), 'µs CPU / value': bare.rate > 0 && g.rate > 0 ? ratioText(g.cores / g.rate, bare.cores / bare.rate) : '-', 'source CPU': '', 'RSS peak/steady MB': `${ratioText(g.peakRss, bare.peakRss)} / ${ratioText(g.steadyRss, bare.steadyRss)}`, 'rate /s (of expected)': ratioText(g.rate, bare.rate, 3), 'set-up s': '', 'fresh p50/p99 s': '', 'backlog max': '', 'pending max': '', 'oldest unsent s': '', 'loop p99/max ms': '', load: '' });
        process.stdout.write(`${table(rows.slice(-3))}\n\n`);
        if (g.kill) {
          kills.push(killRow(`${p} ${n.toLocaleString('en-US')}`, g.kill));
          process.stdout.write(`SIGKILL at full load (values sent from the window's start to the publisher's stop):\n${table(kills.slice(-1))}\n${killNotes(g.kill)}\n\n`);
        }
        if (g.values) {
          valueRows.push(valueRow(`${p} ${n.toLocaleString('en-US')}`, g.values));
          process.stdout.write(`Every value of the open62541 server's ticks in the window, looked up upstream:\n${table(valueRows.slice(-1))}\n\n`);
        }
        if (p === 'opcua') {
          const step = `${p} ${n.toLocaleString('en-US')}`;
          const acc = [...accountingRows(step, 'bare client', bare.counters, n), ...accountingRows(step, 'gateway', g.counters, n)];
          acc.push({ step, side: 'gateway', stage: 'server backlog for the gateway, max (values harvested or queued in items)', 'per s': g.serverBacklogMax, 'of N/s': '' });
          acc.push({ step, side: 'gateway', stage: 'server had a backlog and no Publish request (share of 1 s looks)', 'per s': '', 'of N/s': `${(g.serverStarvedShare * 100).toFixed(0)} %` });
          accounting.push(...acc);
          process.stdout.write(`Where the values went (rates over the measured window):\n${table(acc)}\n\n`);
        }
      } finally {
        await src.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  console.log(`\n${table(rows)}\n`);
  if (kills.length > 0) console.log(`SIGKILL at full load (BENCH_KILL):\n${table(kills)}\n`);
  if (valueRows.length > 0) console.log(`OPC UA value by value (open62541 server, value(i, k) = k + i/1e6):\n${table(valueRows)}\n`);
  if (accounting.length > 0) console.log(`OPC UA loss accounting (per second over the window; server counters cover every session):\n${table(accounting)}\n`);
  console.log('Targets (issue 25, 2-core machine): every change committed (100 %), gateway ≤ 1 core and ≤ 400 MB RSS, freshness ≤ 5 s (p99), oldest unsent ≤ 120 s, event-loop p99 ≤ 100 ms.');
  console.log('Load average (1/5/15 min) at the end of each side: the machine is shared.');
  console.log(NOISY_MACHINE_NOTE);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
