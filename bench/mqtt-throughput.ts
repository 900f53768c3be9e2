/**
 * MQTT throughput benchmark: messages per second from a broker into the committed buffer.
 *
 * For each payload case, N QoS 1 messages are queued at the broker for a persistent session, then
 * a subscriber connects and drains them. Measured from connect to the last message:
 *   - baseline: a bare mqtt.js subscriber (counts messages, acknowledges at once, stores nothing);
 *   - gateway:  the MQTT source (decode, append to the SQLite buffer with group commit, PUBACK after
 *               the commit), until every sample is committed.
 * Both drain the same queue on the same broker in the same run; the ratio gateway / baseline is the
 * figure (target >= 0.8 for single-value payloads).
 *
 * The broker is mosquitto in its own process when /usr/sbin/mosquitto exists, else aedes in a child
 * process. Acknowledging after the commit makes the in-flight window the limit: a subscriber can
 * hold at most W unacknowledged QoS 1 messages (mosquitto max_inflight_messages, the gateway's
 * max_pending_messages), so it cannot exceed about W per group-commit interval. The benchmark sets
 * both to MQTT_BENCH_INFLIGHT / MQTT_BENCH_PENDING (default 20,000, the high-rate tuning the
 * README describes); with mosquitto's default of 20 the gateway would be held to ~200 msg/s.
 *
 *   npx tsx bench/mqtt-throughput.ts
 *   MQTT_BENCH_MESSAGES=5000 npx tsx bench/mqtt-throughput.ts      # quick run
 *
 * Env: MQTT_BENCH_MESSAGES (single-value messages per round, default 200000; the 100-metric case
 *      uses a twentieth), MQTT_BENCH_ROUNDS (default 5), MQTT_BENCH_BROKER (mosquitto | aedes),
 *      MQTT_BENCH_INFLIGHT (mosquitto max_inflight_messages, default 20000),
 *      MQTT_BENCH_PENDING (the source's max_pending_messages, default 20000),
 *      MQTT_BENCH_COMMIT_MS (buffer.commit_interval, default 100).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { cpus, tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt from 'mqtt';
import { openBufferDatabase } from '../src/buffer/database.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { SourceStats, type SourceContext } from '../src/core/source.js';
import { mqttSectionSchema } from '../src/sources/mqtt/config.js';
import { createMqttSources } from '../src/sources/mqtt/index.js';

const SELF = fileURLToPath(import.meta.url);
const MESSAGES = Number(process.env.MQTT_BENCH_MESSAGES ?? 200_000);
const ROUNDS = Number(process.env.MQTT_BENCH_ROUNDS ?? 5);
const INFLIGHT = Number(process.env.MQTT_BENCH_INFLIGHT ?? 20_000);
const COMMIT_MS = Number(process.env.MQTT_BENCH_COMMIT_MS ?? 100);
const PENDING = Number(process.env.MQTT_BENCH_PENDING ?? 20_000);
const MOSQUITTO = '/usr/sbin/mosquitto';

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

/** Creates the persistent session, then queues the messages at the broker for it. */
async function queue(url: string, clientId: string, topic: string, c: Case, n: number): Promise<void> {
  const sub = await mqtt.connectAsync(url, { clientId, clean: false, reconnectPeriod: 0 });
  await sub.subscribeAsync(topic, { qos: 1 });
  await sub.endAsync();
  const pub = await mqtt.connectAsync(url, { clientId: `${clientId}-pub`, clean: true, reconnectPeriod: 0 });
  const batch = 500;
  for (let i = 0; i < n; i += batch) {
    const sends: Array<Promise<unknown>> = [];
    for (let j = i; j < Math.min(n, i + batch); j++) sends.push(pub.publishAsync(topic, c.payload(j), { qos: 1 }));
    await Promise.all(sends);
  }
  await pub.endAsync();
}

async function bare(url: string, clientId: string, n: number): Promise<number> {
  const start = performance.now();
  let count = 0;
  const client = mqtt.connect(url, { clientId, clean: false, reconnectPeriod: 0 });
  await new Promise<void>((resolve) => {
    client.on('message', () => {
      count += 1;
      if (count === n) resolve();
    });
  });
  const seconds = (performance.now() - start) / 1000;
  await client.endAsync();
  return n / seconds;
}

async function gateway(url: string, clientId: string, topic: string, c: Case, n: number): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'mqtt-bench-buffer-'));
  const metrics = createMetrics();
  const logger = silentLogger();
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { synchronous: 'full', logger });
  const buffer = new SampleBuffer(db, { commitIntervalMs: COMMIT_MS, maxBytes: 10_000_000_000, whenFull: 'drop_oldest', logger, metrics, clock: systemClock });
  const section = mqttSectionSchema.parse({ connections: [{ name: 'bench', url, client_id: clientId, clean: false, max_pending_messages: PENDING, subscriptions: [{ topic, ...c.subscription }] }] });
  const ctx: SourceContext = { sink: buffer, logger, stats: new SourceStats('bench', 'mqtt', metrics, systemClock), metrics, clock: systemClock, dataDir: dir };
  const [source] = createMqttSources(section, () => ctx);
  const expected = n * c.samplesPerMessage;
  const start = performance.now();
  await source.start();
  while (buffer.stats().committedTotal < expected) await new Promise((r) => setTimeout(r, 2));
  const seconds = (performance.now() - start) / 1000;
  const refused = Object.values(source.status().samplesRefused).reduce((a, b) => a + b, 0);
  if (refused > 0) throw new Error(`gateway refused ${refused} samples: ${JSON.stringify(source.status().samplesRefused)}`);
  await source.close();
  await buffer.close();
  rmSync(dir, { recursive: true, force: true });
  return n / seconds;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  const broker = await startBroker();
  console.log(`MQTT throughput: broker → committed buffer (QoS 1, PUBACK after commit), ${cpus().length} CPUs (${cpus()[0]?.model ?? '?'})`);
  console.log(`broker: ${broker.name}; gateway max_pending_messages ${PENDING}; buffer: SQLite synchronous=full, commit_interval ${COMMIT_MS} ms; ${ROUNDS} rounds, median shown`);
  console.log('The machine is shared and noisy: run twice before trusting a small difference.\n');
  let run = 0;
  const id = () => `bench-${process.pid}-${run++}`;
  try {
    // Warm-up: JIT, SQLite page cache, broker.
    for (const c of CASES) {
      const n = Math.max(200, Math.round(c.messages / 10));
      let cid = id();
      await queue(broker.url, cid, `warm/${cid}`, c, n);
      await bare(broker.url, cid, n);
      cid = id();
      await queue(broker.url, cid, `warm/${cid}`, c, n);
      await gateway(broker.url, cid, `warm/${cid}`, c, n);
    }
    const rows: Array<{ name: string; messages: number; samples: number; baseline: number; gw: number; ratios: number[] }> = [];
    for (const c of CASES) {
      const b: number[] = [];
      const g: number[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        let cid = id();
        await queue(broker.url, cid, `bench/${cid}`, c, c.messages);
        b.push(await bare(broker.url, cid, c.messages));
        cid = id();
        await queue(broker.url, cid, `bench/${cid}`, c, c.messages);
        g.push(await gateway(broker.url, cid, `bench/${cid}`, c, c.messages));
      }
      rows.push({ name: c.name, messages: c.messages, samples: c.samplesPerMessage, baseline: median(b), gw: median(g), ratios: b.map((x, i) => g[i] / x) });
      console.log(`  ${c.name}: bare ${b.map((x) => Math.round(x)).join(', ')} msg/s; gateway ${g.map((x) => Math.round(x)).join(', ')} msg/s`);
    }
    const pad = (s: string, n: number) => s.padStart(n);
    console.log('');
    console.log(`${'case'.padEnd(20)}${pad('messages', 10)}${pad('bare msg/s', 13)}${pad('gateway msg/s', 15)}${pad('samples/s', 12)}${pad('ratio', 8)}${pad('round ratios', 28)}`);
    for (const r of rows) {
      console.log(`${r.name.padEnd(20)}${pad(String(r.messages), 10)}${pad(Math.round(r.baseline).toLocaleString('en-US'), 13)}${pad(Math.round(r.gw).toLocaleString('en-US'), 15)}${pad(Math.round(r.gw * r.samples).toLocaleString('en-US'), 12)}${pad((r.gw / r.baseline).toFixed(2), 8)}${pad(r.ratios.map((x) => x.toFixed(2)).join(' '), 28)}`);
    }
    const single = rows[0];
    console.log(`\nsingle-value ratio gateway/bare = ${(single.gw / single.baseline).toFixed(2)} (median of rounds: ${median(single.ratios).toFixed(2)}; target >= 0.80)`);
    console.log(`window limit: ${PENDING.toLocaleString('en-US')} messages in flight per ~${COMMIT_MS} ms commit = at most ~${Math.round((PENDING * 1000) / COMMIT_MS).toLocaleString('en-US')} msg/s`);
  } finally {
    await broker.stop();
  }
}

if (process.argv[2] === 'aedes-child') await aedesChild();
else await main();
