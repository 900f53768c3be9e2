import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { pbkdf2Sync, randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { Aedes } from 'aedes';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { pino, type Logger } from 'pino';
import { systemClock } from '../../../src/core/clock.js';
import { silentLogger } from '../../../src/core/logger.js';
import { createMetrics, type Metrics } from '../../../src/core/metrics.js';
import type { Sample, SampleSink } from '../../../src/core/sample.js';
import { SourceStats, type SourceKind } from '../../../src/core/source.js';
import type { SourceContext } from '../../../src/sources/context.js';
import type { EmbeddedBrokerSource } from '../../../src/sources/mqtt/broker-source.js';
import { mqttSectionSchema, type MqttSection } from '../../../src/sources/mqtt/config.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import { openTestBuffer } from '../../helpers/buffer.js';
import { waitFor } from '../../helpers/wait.js';

export { waitFor, delay } from '../../helpers/wait.js';

/** A logger that keeps every line (parsed) so tests can assert on log content and absence of secrets. */
export function captureLogger(): { logger: Logger; lines: Array<Record<string, unknown>>; text: () => string } {
  const lines: Array<Record<string, unknown>> = [];
  let raw = '';
  const stream = new Writable({
    write(chunk, _enc, cb) {
      const s = chunk.toString();
      raw += s;
      for (const line of s.split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      cb();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines, text: () => raw };
}

export interface TestContexts {
  metrics: Metrics;
  makeContext: (name: string, kind: SourceKind) => SourceContext;
  contexts: Map<string, SourceContext>;
}

/** SourceContext factory over one sink, with real SourceStats and metrics. */
export function contexts(sink: SampleSink, logger: Logger = silentLogger()): TestContexts {
  const metrics = createMetrics();
  const map = new Map<string, SourceContext>();
  return {
    metrics,
    contexts: map,
    makeContext: (name, kind) => {
      const ctx: SourceContext = { sink, logger, stats: new SourceStats(name, kind, metrics, systemClock), metrics, clock: systemClock, dataDir: tmpdir() };
      map.set(name, ctx);
      return ctx;
    },
  };
}

export function section(raw: unknown): MqttSection {
  return mqttSectionSchema.parse(raw);
}

/**
 * The embedded broker on 127.0.0.1 (free ports) with user plc / right-pass-1 and `broker` merged
 * over that, over a test buffer, with its log kept; `cleanup` receives what stops it.
 */
export async function startEmbeddedBroker(broker: Record<string, unknown>, cleanup: Array<() => Promise<unknown>>) {
  const tb = openTestBuffer();
  cleanup.push(async () => tb.destroy());
  const log = captureLogger();
  const ctxs = contexts(tb.buffer, log.logger);
  const sources = createMqttSources(section({ broker: { enabled: true, host: '127.0.0.1', port: 0, username: 'plc', password: 'right-pass-1', ...broker } }), ctxs.makeContext);
  for (const s of sources) await s.start();
  cleanup.push(() => Promise.all(sources.map((s) => s.close())));
  const src = sources[0] as EmbeddedBrokerSource;
  await waitFor(() => src.broker.address, { what: 'broker listening' });
  const port = src.broker.address!.port;
  return { src, port, address: src.broker.address!, url: `mqtt://127.0.0.1:${port}`, metrics: ctxs.metrics, log };
}

/** A sink that records appends and can hold them back (to prove acknowledgement waits for the commit). */
export class GatedSink implements SampleSink {
  readonly appended: Sample[] = [];
  private held: Array<{ samples: readonly Sample[]; resolve: () => void; reject: (e: Error) => void }> = [];
  /** Commits run one after the other, in append order, as the real buffer's group commit does. */
  private tail: Promise<void> = Promise.resolve();
  gate = false;
  failWith: Error | null = null;

  constructor(private readonly inner?: SampleSink) {}

  append(samples: readonly Sample[]): Promise<void> {
    if (this.failWith) return Promise.reject(this.failWith);
    if (this.gate) return new Promise((resolve, reject) => this.held.push({ samples, resolve, reject }));
    return this.commit(samples);
  }

  private commit(samples: readonly Sample[]): Promise<void> {
    const done = this.tail.then(async () => {
      if (this.inner) await this.inner.append(samples);
      this.appended.push(...samples);
    });
    this.tail = done.catch(() => undefined);
    return done;
  }

  /** Appends held at the gate (the pipeline appends all messages of one event-loop turn at once). */
  get heldCount(): number {
    return this.held.length;
  }

  /** Samples held at the gate; with one value per message, the number of messages waiting for their commit. */
  get heldSamples(): number {
    return this.held.reduce((n, h) => n + h.samples.length, 0);
  }

  /** Opens the gate and commits everything held, in order, ahead of later appends. */
  async release(): Promise<void> {
    this.gate = false;
    const held = this.held.splice(0);
    const done = held.map((h) => this.commit(h.samples).then(h.resolve, h.reject));
    await Promise.all(done);
  }

  /** Opens the gate and fails everything held (the buffer refused them). */
  failHeld(err: Error): void {
    this.gate = false;
    for (const h of this.held.splice(0)) h.reject(err);
  }
}

export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** A standalone aedes broker on TCP, standing in for a plant broker ("the in-process broker"). */
export interface TestAedes {
  url: string;
  port: number;
  aedes: Aedes;
  close(): Promise<void>;
}

export async function startAedes(port = 0): Promise<TestAedes> {
  const aedes = await Aedes.createBroker({ maxClientsIdLength: 256 });
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    aedes.handle(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `mqtt://127.0.0.1:${actual}`,
    port: actual,
    aedes,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => aedes.close(() => r()));
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A plain mqtt.js client (a PLC, an HMI panel, a test publisher). */
export async function connectClient(url: string, options: IClientOptions = {}): Promise<MqttClient> {
  return mqtt.connectAsync(url, { reconnectPeriod: 0, connectTimeout: 5_000, ...options });
}

export async function endClient(client: MqttClient | undefined | null): Promise<void> {
  if (!client) return;
  await new Promise<void>((r) => client.end(true, () => r()));
}

// ------------------------------------------------------------------ mosquitto

export const MOSQUITTO = '/usr/sbin/mosquitto';

/**
 * Whether mosquitto tests run. Without the binary they are skipped with a visible message, except
 * under CI (`.ci/run` installs mosquitto), where a missing binary must fail the run.
 */
export function mosquittoAvailable(): boolean {
  if (existsSync(MOSQUITTO)) return true;
  if (process.env.CI) throw new Error(`${MOSQUITTO} is missing but CI is set: the MQTT tests against mosquitto must run in CI`);
  console.warn(`\n*** SKIPPING mosquitto tests: ${MOSQUITTO} is not installed (apt-get install mosquitto) ***\n`);
  return false;
}

export interface MosquittoOptions {
  port?: number;
  /** username → password; turns off anonymous access. */
  users?: Record<string, string>;
  /** Adds a TLS listener requiring client certificates signed by the test CA. */
  tls?: Certificates;
  websocket?: boolean;
  /** Extra lines for mosquitto.conf. */
  extra?: string[];
}

export interface Mosquitto {
  port: number;
  tlsPort: number | null;
  wsPort: number | null;
  url: string;
  dir: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts again on the same ports with the same configuration (sessions are kept in memory only while running). */
  restart(): Promise<void>;
  log(): string;
}

/** Mosquitto 2 password file line: `$7$` = PBKDF2-SHA512 (mosquitto_passwd's default, 101 iterations). */
function passwordLine(user: string, password: string): string {
  const salt = randomBytes(12);
  const hash = pbkdf2Sync(password, salt, 101, 64, 'sha512');
  return `${user}:$7$101$${salt.toString('base64')}$${hash.toString('base64')}`;
}

export async function startMosquitto(options: MosquittoOptions = {}): Promise<Mosquitto> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-mosquitto-'));
  const port = options.port ?? (await freePort());
  const tlsPort = options.tls ? await freePort() : null;
  const wsPort = options.websocket ? await freePort() : null;
  // Run as whoever runs the tests (as root, mosquitto would otherwise switch to user "mosquitto"
  // and lose access to the temp directory).
  const lines = [`user ${userInfo().username}`, 'per_listener_settings true', 'persistence false', `log_dest file ${join(dir, 'mosquitto.log')}`, 'log_type all', 'max_inflight_messages 100', 'max_queued_messages 100000'];
  const auth = () => {
    if (options.users) {
      writeFileSync(join(dir, 'passwd'), Object.entries(options.users).map(([u, p]) => passwordLine(u, p)).join('\n') + '\n', { mode: 0o600 });
      return ['allow_anonymous false', `password_file ${join(dir, 'passwd')}`];
    }
    return [`allow_anonymous true`];
  };
  lines.push(`listener ${port} 127.0.0.1`, ...auth());
  if (options.tls && tlsPort) {
    lines.push(`listener ${tlsPort} 127.0.0.1`, `cafile ${options.tls.ca}`, `certfile ${options.tls.serverCert}`, `keyfile ${options.tls.serverKey}`, 'require_certificate true', 'use_identity_as_username true', 'allow_anonymous true');
  }
  if (wsPort) lines.push(`listener ${wsPort} 127.0.0.1`, 'protocol websockets', ...auth());
  lines.push(...(options.extra ?? []));
  const confPath = join(dir, 'mosquitto.conf');
  writeFileSync(confPath, lines.join('\n') + '\n');

  let child: ChildProcess | null = null;
  const launch = async () => {
    child = spawn(MOSQUITTO, ['-c', confPath], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d) => (stderr += d.toString()));
    const exited = new Promise<never>((_, reject) => child?.once('exit', (code) => reject(new Error(`mosquitto exited with ${code}: ${stderr}`))));
    await Promise.race([
      waitFor(() => canConnect(port), { timeoutMs: 10_000, what: `mosquitto on ${port}` }),
      exited,
    ]);
    if (tlsPort) await waitFor(() => canConnect(tlsPort), { timeoutMs: 10_000, what: 'mosquitto TLS port' });
    if (wsPort) await waitFor(() => canConnect(wsPort), { timeoutMs: 10_000, what: 'mosquitto WebSocket port' });
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const c = child as ChildProcess | null;
    child = null;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((r) => {
      c.once('exit', () => r());
      c.kill(signal);
    });
  };
  await launch();
  return {
    port,
    tlsPort,
    wsPort,
    url: `mqtt://127.0.0.1:${port}`,
    dir,
    stop,
    restart: async () => {
      await stop();
      await launch();
    },
    log: () => {
      try {
        return execFileSync('cat', [join(dir, 'mosquitto.log')]).toString();
      } catch {
        return '';
      }
    },
  };
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}


// ------------------------------------------------------------------ certificates

export interface Certificates {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A CA that signed nothing here (for "untrusted broker" tests). */
  otherCa: string;
}

/** A test CA, a server certificate for 127.0.0.1/localhost and a client certificate, made with the openssl CLI. */
export function makeCertificates(): Certificates {
  const dir = mkdtempSync(join(tmpdir(), 'gw-certs-'));
  const p = (f: string) => join(dir, f);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('ca.key'), '-out', p('ca.pem'), '-days', '2', '-subj', '/CN=Test CA');
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('other-ca.key'), '-out', p('other-ca.pem'), '-days', '2', '-subj', '/CN=Other CA');
  writeFileSync(p('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('server.key'), '-out', p('server.csr'), '-subj', '/CN=localhost');
  ssl('x509', '-req', '-in', p('server.csr'), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial', '-out', p('server.pem'), '-days', '2', '-extfile', p('server.ext'));
  writeFileSync(p('client.ext'), 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', p('client.key'), '-out', p('client.csr'), '-subj', '/CN=edge-gateway');
  ssl('x509', '-req', '-in', p('client.csr'), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial', '-out', p('client.pem'), '-days', '2', '-extfile', p('client.ext'));
  return { dir, ca: p('ca.pem'), serverCert: p('server.pem'), serverKey: p('server.key'), clientCert: p('client.pem'), clientKey: p('client.key'), otherCa: p('other-ca.pem') };
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

// ------------------------------------------------------------------ wire recorder

/** One MQTT control packet seen on the wire: its type (3 PUBLISH, 4 PUBACK, 5 PUBREC ...), QoS and packet id. */
export interface WirePacket {
  type: number;
  qos: number;
  id: number | null;
}

/**
 * A TCP proxy in front of a broker that keeps every byte in both directions, so a test can check
 * what the gateway actually sent (which acknowledgements, in which order) rather than what the
 * broker made of it.
 */
export interface WireRecorder {
  url: string;
  /** Packets the client sent to the broker. */
  sent(): WirePacket[];
  /** Packets the broker sent to the client. */
  received(): WirePacket[];
  close(): Promise<void>;
}

export async function startWireRecorder(brokerPort: number): Promise<WireRecorder> {
  const up: Buffer[] = [];
  const down: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const broker = createConnection(brokerPort, '127.0.0.1');
    for (const s of [client, broker]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        client.destroy();
        broker.destroy();
      });
    }
    client.on('data', (d) => {
      up.push(Buffer.from(d));
      broker.write(d);
    });
    broker.on('data', (d) => {
      down.push(Buffer.from(d));
      client.write(d);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `mqtt://127.0.0.1:${port}`,
    sent: () => parseMqttPackets(Buffer.concat(up)),
    received: () => parseMqttPackets(Buffer.concat(down)),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Splits a byte stream into MQTT control packets (fixed header, remaining length, §2.2). */
export function parseMqttPackets(bytes: Buffer): WirePacket[] {
  const packets: WirePacket[] = [];
  let at = 0;
  while (at < bytes.length) {
    const type = bytes[at] >> 4;
    const flags = bytes[at] & 0x0f;
    let length = 0;
    let shift = 0;
    let i = at + 1;
    for (;;) {
      if (i >= bytes.length) return packets; // a partial packet at the end
      const b = bytes[i++];
      length += (b & 0x7f) << shift;
      shift += 7;
      if ((b & 0x80) === 0) break;
    }
    if (i + length > bytes.length) return packets;
    const body = bytes.subarray(i, i + length);
    const qos = type === 3 ? (flags >> 1) & 3 : 0;
    let id: number | null = null;
    if (type === 3 && qos > 0) id = body.readUInt16BE(2 + body.readUInt16BE(0));
    else if (type >= 4 && type <= 7) id = body.readUInt16BE(0);
    packets.push({ type, qos, id });
    at = i + length;
  }
  return packets;
}
