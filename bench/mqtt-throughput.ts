/**
 * MQTT throughput benchmark: messages per second from a broker into the committed buffer.
 *
 * Each round publishes N QoS 1 messages once to a topic two persistent sessions subscribe to, so the
 * broker holds the same N messages for each; then the two subscribers drain them one after the
 * other (which goes first alternates between rounds). Measured from connect to the end:
 *   - baseline: a bare mqtt.js subscriber with default options (counts messages, mqtt.js
 *               acknowledges each at once, stores nothing), until the last message arrived;
 *   - gateway:  the MQTT source (decode, append to the SQLite buffer with group commit, PUBACK after
 *               the commit), until the commit holding the last sample (seen by the buffer's change
 *               listener, not by polling).
 * Same broker, same queue, same run, same process; the ratio gateway / baseline is the figure
 * (target >= 0.8 for single-value payloads). The table also gives the median of the per-round
 * ratios and the CPU this process spent per message: on a shared machine the rates swing with the
 * neighbours' load, the CPU per message much less.
 *
 * The broker is mosquitto in its own process when /usr/sbin/mosquitto exists, else aedes in a child
 * process. Acknowledging after the commit makes the in-flight window the limit: a subscriber can
 * hold at most W unacknowledged QoS 1 messages (mosquitto max_inflight_messages, the gateway's
 * max_pending_messages), so it cannot exceed about W per group-commit interval. The benchmark sets
 * both to MQTT_BENCH_INFLIGHT / MQTT_BENCH_PENDING (default 20,000, the high-rate tuning the
 * README describes); with mosquitto's default of 20 the gateway would be held to ~200 msg/s. The
 * window applies to both subscribers; the bare one, acknowledging at once, never fills it.
 *
 *   npx tsx bench/mqtt-throughput.ts
 *   MQTT_BENCH_MESSAGES=20000 npx tsx bench/mqtt-throughput.ts      # quick run
 *
 * A quick run measures mostly latency, not throughput: 20,000 messages drain in about 0.2 s and
 * the gateway's last commit waits up to one commit interval (100 ms) after the last message, so
 * its ratio is lower (about 0.7) whatever the per-message cost. Judge the target on the default.
 *
 * Env: MQTT_BENCH_MESSAGES (single-value messages per round, default 200000; the 100-metric case
 *      uses a twentieth), MQTT_BENCH_ROUNDS (default 5), MQTT_BENCH_BROKER (mosquitto | aedes),
 *      MQTT_BENCH_INFLIGHT (mosquitto max_inflight_messages, default 20000),
 *      MQTT_BENCH_PENDING (the source's max_pending_messages, default 20000),
 *      MQTT_BENCH_COMMIT_MS (buffer.commit_interval, default 100),
 *      MQTT_BENCH_CPU_PROFILE (path prefix: writes <prefix>.<round>.cpuprofile for each gateway drain
 *      of the single-value case, for Chrome DevTools or `node --cpu-prof` tooling).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { Session } from 'node:inspector/promises';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt from 'mqtt';
import { openBufferDatabase } from '../src/store/file/database.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { SourceStats } from '../src/core/source.js';
import type { SourceContext } from '../src/sources/context.js';
import { mqttSectionSchema } from '../src/sources/mqtt/config.js';
import { createMqttSources } from '../src/sources/mqtt/index.js';
import { envNumber, smokeBanner, table } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

const SELF = fileURLToPath(import.meta.url);
const MESSAGES = envNumber('MQTT_BENCH_MESSAGES', 200_000, 2_000);
const ROUNDS = envNumber('MQTT_BENCH_ROUNDS', 5, 1);
const INFLIGHT = envNumber('MQTT_BENCH_INFLIGHT', 20_000);
const COMMIT_MS = envNumber('MQTT_BENCH_COMMIT_MS', 100);
const PENDING = envNumber('MQTT_BENCH_PENDING', 20_000);
const MOSQUITTO = '/usr/sbin/mosquitto';
const CPU_PROFILE = process.env.MQTT_BENCH_CPU_PROFILE;

// ---------------------------------------------------------------- broker child (aedes fallback)

async function aedesChild(): Promise<void> {
  const { Aedes } = await import('aedes');
  const aedes = await Aedes.createBroker({ maxClientsIdLength: 256 });
  const server = createServer((s) => {
    s.on('error', () => undefined);
    aedes.handle(s);
  });
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
}

interface Broker {
  url: string;
  name: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function startBroker(): Promise<Broker> {
  const want = process.env.MQTT_BENCH_BROKER ?? (existsSync(MOSQUITTO) ? 'mosquitto' : 'aedes');
  if (want === 'mosquitto') {
    const dir = mkdtempSync(join(tmpdir(), 'mqtt-bench-'));
    const port = await freePort();
    const conf = join(dir, 'mosquitto.conf');
    writeFileSync(conf, [`user ${userInfo().username}`, `listener ${port} 127.0.0.1`, 'allow_anonymous true', 'persistence false', 'max_queued_messages 0', `max_inflight_messages ${INFLIGHT}`, 'log_dest none'].join('\n') + '\n');
    const child = spawn(MOSQUITTO, ['-c', conf], { stdio: 'ignore' });
    await waitForPort(port);
    return {
      url: `mqtt://127.0.0.1:${port}`,
      name: `mosquitto (own process, max_inflight_messages ${INFLIGHT})`,
      stop: async () => {
        await new Promise<void>((r) => {
          child.once('exit', () => r());
          child.kill('SIGTERM');
        });
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const child: ChildProcess = fork(SELF, ['aedes-child'], { execArgv: ['--import', 'tsx'], stdio: 'ignore' });
  const port = await new Promise<number>((resolve) => child.once('message', (m) => resolve((m as { port: number }).port)));
  return {
    url: `mqtt://127.0.0.1:${port}`,
    name: 'aedes (own process)',
    stop: async () => {
      child.kill('SIGKILL');
    },
  };
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((r) => {
      const s = createConnection(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        r(true);
      });
      s.once('error', () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`broker did not start on ${port}`);
}

// ---------------------------------------------------------------- payloads

interface Case {
  name: string;
  messages: number;
  samplesPerMessage: number;
  payload(i: number): string;
  subscription: Record<string, unknown>;
}

const T0 = Date.now() - 86_400_000;
const CASES: Case[] = [
  {
    name: 'single-value JSON',
    messages: MESSAGES,
    samplesPerMessage: 1,
    payload: (i) => `{"ts":${T0 + i},"v":${(i % 1000) / 10}}`,
    subscription: { format: 'json', qos: 1, timestamp: { path: 'ts', format: 'epoch_ms' }, values: [{ path: 'v', variable: 'mvr_bench_v' }] },
  },
  {
    name: '100-metric JSON',
    messages: Math.max(100, Math.round(MESSAGES / 20)),
    samplesPerMessage: 100,
    payload: (i) => JSON.stringify({ timestamp: T0 + i, metrics: Array.from({ length: 100 }, (_, m) => ({ name: `mvr_bench_m${m}`, value: (i + m) % 500, datatype: 'Float' })) }),
    subscription: { format: 'metrics', qos: 1 },
  },
];

/**
 * Creates one persistent session per client id, each subscribed to `topic`, then publishes the n
 * messages once: every session's queue at the broker holds the same n messages.
 */
async function queue(url: string, clientIds: string[], topic: string, c: Case, n: number): Promise<void> {
  for (const clientId of clientIds) {
    const sub = await mqtt.connectAsync(url, { clientId, clean: false, reconnectPeriod: 0 });
    await sub.subscribeAsync(topic, { qos: 1 });
    await sub.endAsync();
  }
  const pub = await mqtt.connectAsync(url, { clientId: `${clientIds[0]}-pub`, clean: true, reconnectPeriod: 0 });
  const batch = 500;
  for (let i = 0; i < n; i += batch) {
    const sends: Array<Promise<unknown>> = [];
    for (let j = i; j < Math.min(n, i + batch); j++) sends.push(pub.publishAsync(topic, c.payload(j), { qos: 1 }));
    await Promise.all(sends);
  }
  await pub.endAsync();
}

/**
 * One round: both subscribers drain the same n messages, queued once, back to back; which one
 * goes first alternates between rounds so that neither always meets the broker in the same state.
 */
async function round(url: string, ids: () => string, topicPrefix: string, c: Case, n: number, gatewayFirst: boolean, profile?: string): Promise<{ bare: Drain; gw: Drain }> {
  const bareId = ids();
  const gwId = ids();
  const topic = `${topicPrefix}/${bareId}`;
  await queue(url, [bareId, gwId], topic, c, n);
  const runBare = () => bare(url, bareId, n);
  const runGateway = () => gateway(url, gwId, topic, c, n, profile);
  if (gatewayFirst) {
    const gw = await runGateway();
    return { gw, bare: await runBare() };
  }
  const b = await runBare();
  return { bare: b, gw: await runGateway() };
}

/**
 * One drain: messages per second (wall clock, the figure), and the CPU this process spent per
 * message meanwhile. On a shared machine the rate swings with the neighbours' load; the CPU per
 * message hardly does, so it tells a slower gateway from a busier machine.
 */
interface Drain {
  rate: number;
  cpuUs: number;
}

function drainMeter(n: number): { stop(): Drain } {
  const start = performance.now();
  const cpu = process.cpuUsage();
  return {
    stop: () => {
      const seconds = (performance.now() - start) / 1000;
      const used = process.cpuUsage(cpu);
      return { rate: n / seconds, cpuUs: (used.user + used.system) / n };
    },
  };
}

async function bare(url: string, clientId: string, n: number): Promise<Drain> {
  const meter = drainMeter(n);
  let count = 0;
  const client = mqtt.connect(url, { clientId, clean: false, reconnectPeriod: 0 });
  await new Promise<void>((resolve) => {
    client.on('message', () => {
      count += 1;
      if (count === n) resolve();
    });
  });
  const drain = meter.stop();
  await client.endAsync();
  return drain;
}

async function gateway(url: string, clientId: string, topic: string, c: Case, n: number, profile?: string): Promise<Drain> {
  const dir = mkdtempSync(join(tmpdir(), 'mqtt-bench-buffer-'));
  const metrics = createMetrics();
  const logger = silentLogger();
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: COMMIT_MS, maxBytes: 10_000_000_000, whenFull: 'drop_oldest', logger, metrics, clock: systemClock });
  const section = mqttSectionSchema.parse({ connections: [{ name: 'bench', url, client_id: clientId, clean: false, max_pending_messages: PENDING, subscriptions: [{ topic, ...c.subscription }] }] });
  const ctx: SourceContext = { sink: buffer, logger, stats: new SourceStats('bench', 'mqtt', metrics, systemClock), metrics, clock: systemClock, dataDir: dir };
  const [source] = createMqttSources(section, () => ctx);
  const expected = n * c.samplesPerMessage;
  const session = profile ? new Session() : null;
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.start');
  }
  // The end is seen at the commit itself (the buffer's change listener), not by polling: a poll
  // every few milliseconds would add its own queries to the gateway's side only and round its end up.
  const meter = drainMeter(n);
  const allCommitted = new Promise<Drain>((resolve) => {
    const stop = buffer.onChange(() => {
      if (buffer.stats().committedTotal < expected) return;
      stop();
      resolve(meter.stop());
    });
  });
  await source.start();
  const drain = await allCommitted;
  if (session && profile) {
    const { profile: p } = await session.post('Profiler.stop');
    writeFileSync(profile, JSON.stringify(p));
    session.disconnect();
  }
  const refused = Object.values(source.status().samplesRefused).reduce((a, b) => a + b, 0);
  if (refused > 0) throw new Error(`gateway refused ${refused} samples: ${JSON.stringify(source.status().samplesRefused)}`);
  await source.close();
  await buffer.close();
  rmSync(dir, { recursive: true, force: true });
  return drain;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  smokeBanner(`MQTT_BENCH_MESSAGES ${MESSAGES.toLocaleString('en-US')}, MQTT_BENCH_ROUNDS ${ROUNDS}`);
  const broker = await startBroker();
  console.log(`MQTT throughput: broker → committed buffer (QoS 1, PUBACK after commit), ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})`);
  console.log(`broker: ${broker.name}; gateway max_pending_messages ${PENDING}; buffer: SQLite synchronous=full, commit_interval ${COMMIT_MS} ms; ${ROUNDS} rounds, median shown`);
  console.log('The machine is shared and noisy: run twice before trusting a small difference.\n');
  let run = 0;
  const id = () => `bench-${process.pid}-${run++}`;
  const load = () => loadavg().map((x) => x.toFixed(1)).join(' ');
  const loadBefore = load();
  try {
    // Warm-up: JIT, SQLite page cache, broker.
    for (const c of CASES) await round(broker.url, id, 'warm', c, Math.max(200, Math.round(c.messages / 10)), false);
    const rows: Array<{ c: Case; bare: Drain[]; gw: Drain[] }> = [];
    for (const c of CASES) {
      const row = { c, bare: [] as Drain[], gw: [] as Drain[] };
      for (let r = 0; r < ROUNDS; r++) {
        const profile = CPU_PROFILE && c === CASES[0] ? `${CPU_PROFILE}.${r}.cpuprofile` : undefined;
        const result = await round(broker.url, id, 'bench', c, c.messages, r % 2 === 1, profile);
        row.bare.push(result.bare);
        row.gw.push(result.gw);
      }
      rows.push(row);
      console.log(`  ${c.name}: bare ${row.bare.map((d) => Math.round(d.rate)).join(', ')} msg/s; gateway ${row.gw.map((d) => Math.round(d.rate)).join(', ')} msg/s`);
    }
    const fmt = (x: number) => Math.round(x).toLocaleString('en-US');
    console.log('');
    console.log(
      table(
        rows.map(({ c, bare: b, gw: g }) => {
          const rate = (ds: Drain[]) => median(ds.map((d) => d.rate));
          const cpu = (ds: Drain[]) => median(ds.map((d) => d.cpuUs));
          return {
            case: c.name,
            messages: c.messages,
            'bare msg/s': fmt(rate(b)),
            'gateway msg/s': fmt(rate(g)),
            'samples/s': fmt(rate(g) * c.samplesPerMessage),
            ratio: (rate(g) / rate(b)).toFixed(2),
            'round ratios': g.map((d, i) => (d.rate / b[i].rate).toFixed(2)).join(' '),
            'CPU µs/msg bare': cpu(b).toFixed(1),
            'CPU µs/msg gateway': cpu(g).toFixed(1),
          };
        }),
      ),
    );
    const single = rows[0];
    const ratio = median(single.gw.map((d) => d.rate)) / median(single.bare.map((d) => d.rate));
    const paired = median(single.gw.map((d, i) => d.rate / single.bare[i].rate));
    console.log(`\nsingle-value ratio gateway/bare = ${ratio.toFixed(2)} (median of the round ratios: ${paired.toFixed(2)}; target >= 0.80)`);
    console.log(`window limit: ${PENDING.toLocaleString('en-US')} messages in flight per ~${COMMIT_MS} ms commit = at most ~${Math.round((PENDING * 1000) / COMMIT_MS).toLocaleString('en-US')} msg/s`);
    console.log(`load average (1, 5, 15 min): ${loadBefore} at the start, ${load()} at the end (${cpus().length} CPUs); CPU µs/msg is this process's CPU per message (subscriber, decoding, SQLite), the broker's not included`);
  } finally {
    await broker.stop();
  }
}

if (process.argv[2] === 'aedes-child') await aedesChild();
else await main();
