import modbusSerial from 'modbus-serial';
import type { Logger } from 'pino';
import { Backoff, type BackoffPolicy } from '../../core/backoff.js';
import { sleepUnlessAborted, type Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import { TABLE_INFO, type Table } from './address.js';
import { ModbusRequestError, toRequestError } from './errors.js';
import { endpointKey, type Endpoint } from './plan.js';

const ModbusRTU = modbusSerial.default;
type Client = InstanceType<typeof ModbusRTU>;

export interface ReadRequest {
  unitId: number;
  table: Table;
  address: number;
  count: number;
  timeoutMs: number;
  /** Pause before sending (device quirk `request_delay`). */
  delayMs?: number;
}

export interface ReadResponse {
  /** Data bytes as received: 2 per register, or packed bits (LSB first, §6.1). */
  bytes: Buffer;
  /** Wall-clock ms when the response arrived: the samples' timestamp. */
  at: number;
}

export interface LinkOptions {
  logger: Logger;
  clock: Clock;
  reconnect: BackoffPolicy;
  /** Longest wait for a TCP connect or serial open. */
  connectTimeoutMs: number;
  /** Called on each reconnect attempt after the first connect (for the shared reconnect metric). */
  onReconnectAttempt?: () => void;
  /** Called when a connect attempt fails. */
  onConnectError?: (err: unknown) => void;
  /** Called when the link comes up or goes down. */
  onStateChange?: (connected: boolean) => void;
}

/**
 * After this many requests in a row got no answer, the connection is closed and opened again: a
 * TCP connection whose peer vanished without a FIN (cable pulled, device power-cycled behind a
 * switch) otherwise looks open forever, and a wedged USB serial adapter often recovers on reopen.
 */
const TIMEOUTS_BEFORE_RECONNECT = 3;

/**
 * Receive limits of an RTU-over-TCP link (~13 MB/s of garbage drove the CPU to 265 %
 * and /healthz to 4.7 s, because modbus-serial concatenates and JSON-encodes its whole receive
 * buffer on every chunk). An RTU frame is at most 256 bytes (Modbus over Serial Line v1.02
 * §2.5.1) and one request is outstanding at a time, so more than a few frames waiting is a peer
 * flooding the link: it is dropped. The rate bound catches garbage that happens to be consumed as
 * frames; it is far above what one-request-at-a-time polling can produce (256 bytes per round
 * trip; a serial line behind a device server carries ~11.5 KB/s at 115,200 baud).
 */
export const RTU_MAX_HELD_BYTES = 4 * 256;
export const RTU_MAX_BYTES_PER_SECOND = 1024 * 1024;

/**
 * One connection to one endpoint (a TCP address or a serial port), shared by every device
 * configured on it, with its own reconnect loop.
 *
 * Requests are sent one at a time. That is required on a serial line (Modbus over Serial Line
 * v1.02 §2.1: one master, one outstanding request) and for RTU over TCP (no transaction id to
 * match answers), and it is what many Modbus TCP devices and gateways expect even though MBAP
 * transaction ids would allow more (Modbus Messaging on TCP/IP v1.0b §4.2.1).
 */
export class ModbusLink {
  readonly key: string;
  private client: Client | null = null;
  private connected = false;
  private closed = false;
  private readonly abort = new AbortController();
  private loop: Promise<void> | null = null;
  /** Resolves the wait of the connect loop when the current connection is lost. */
  private lost: ((reason: string) => void) | null = null;
  /** Rejects requests in flight when the current connection is lost. */
  private lostSignal: AbortController = new AbortController();
  private readonly connectWaiters = new Set<() => void>();
  private tail: Promise<unknown> = Promise.resolve();
  private consecutiveTimeouts = 0;
  private readonly backoff: Backoff;
  private readonly throttle: LogThrottle;
  private everConnected = false;
  private lastError: string | null = null;
  /** A flapping connection logs "lost" at most once a minute, and "connected" only after a logged loss. */
  private lostLog = { at: -Infinity, suppressed: 0 };
  private announceConnect = true;
  /** The last connection was dropped for flooding: keep backing off until a read succeeds. */
  private flooded = false;

  constructor(readonly endpoint: Endpoint, private readonly options: LinkOptions) {
    this.key = endpointKey(endpoint);
    this.backoff = new Backoff(options.reconnect);
    this.throttle = new LogThrottle(options.logger, 60_000, () => options.clock.monotonic());
  }

  start(): void {
    if (this.loop || this.closed) return;
    this.loop = this.connectLoop();
  }

  isConnected(): boolean {
    return this.connected;
  }

  status(): { endpoint: string; connected: boolean; last_error: string | null } {
    return { endpoint: this.key, connected: this.connected, last_error: this.lastError };
  }

  /** Resolves true once connected, false when `signal` aborts or the link closes first. */
  waitUntilConnected(signal: AbortSignal): Promise<boolean> {
    if (this.connected) return Promise.resolve(true);
    if (this.closed || signal.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (v: boolean) => {
        this.connectWaiters.delete(onConnect);
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      };
      const onConnect = () => done(!this.closed);
      const onAbort = () => done(false);
      this.connectWaiters.add(onConnect);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Reads one range; requests from all devices of the link are queued and sent one at a time. */
  read(req: ReadRequest): Promise<ReadResponse> {
    const run = this.tail.then(() => this.send(req));
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Closes the current connection; the loop opens a new one after the backoff delay. */
  dropConnection(reason: string): void {
    this.lost?.(reason);
  }

  async close(): Promise<void> {
    if (this.closed) {
      await this.loop;
      return;
    }
    this.closed = true;
    this.abort.abort();
    this.lost?.('closing');
    for (const w of [...this.connectWaiters]) w();
    await this.loop;
  }

  private async send(req: ReadRequest): Promise<ReadResponse> {
    const client = this.client;
    if (!this.connected || !client) throw new ModbusRequestError('connection', 'MODBUS_NOT_CONNECTED', `not connected to ${this.key}`);
    if (req.delayMs && req.delayMs > 0) await sleepUnlessAborted(req.delayMs, this.lostSignal.signal);
    const lost = this.lostSignal.signal;
    if (lost.aborted) throw new ModbusRequestError('connection', 'MODBUS_CONNECTION_LOST', `connection to ${this.key} lost`);
    discardStaleBytes(client);
    client.setID(req.unitId);
    client.setTimeout(req.timeoutMs);
    try {
      const bytes = await guarded(issueRead(client, req), req.timeoutMs + 1_000, lost, this.key);
      this.consecutiveTimeouts = 0;
      if (this.flooded) {
        this.flooded = false;
        this.backoff.reset();
      }
      const at = this.options.clock.now();
      checkLength(bytes, req);
      return { bytes, at };
    } catch (err) {
      const e = toRequestError(err);
      if (e.kind === 'timeout') {
        // RTU answers carry no transaction id: give a late answer a moment to arrive while the
        // line is still ours, so that discardStaleBytes drops it instead of the next request
        // taking it for its own.
        if (this.endpoint.transport !== 'tcp') await sleepUnlessAborted(Math.min(req.timeoutMs, 200), lost);
        this.consecutiveTimeouts += 1;
        if (this.consecutiveTimeouts >= TIMEOUTS_BEFORE_RECONNECT) {
          this.consecutiveTimeouts = 0;
          this.dropConnection(`${TIMEOUTS_BEFORE_RECONNECT} requests in a row got no answer`);
        }
      } else {
        this.consecutiveTimeouts = 0;
      }
      if (e.kind === 'connection') this.dropConnection(e.message);
      throw e;
    }
  }

  private logLost(reason: string): void {
    const now = this.options.clock.monotonic();
    if (now - this.lostLog.at < 60_000) {
      this.lostLog.suppressed += 1;
      return;
    }
    const suppressed = this.lostLog.suppressed;
    this.lostLog = { at: now, suppressed: 0 };
    this.announceConnect = true;
    this.options.logger.warn({ endpoint: this.key, reason, ...(suppressed > 0 ? { suppressed_since_last: suppressed } : {}) }, 'modbus connection lost; reconnecting');
  }

  private async connectLoop(): Promise<void> {
    const { logger } = this.options;
    while (!this.closed) {
      if (this.everConnected) this.options.onReconnectAttempt?.();
      let client: Client | null = null;
      try {
        client = await openClient(this.endpoint, this.options.connectTimeoutMs, this.abort.signal);
        if (this.closed) {
          await closeClient(client);
          break;
        }
      } catch (err) {
        if (client) await closeClient(client);
        if (this.closed) break;
        this.lastError = describeError(err);
        this.options.onConnectError?.(err);
        this.throttle.warn(`connect:${this.lastError}`, { endpoint: this.key, err: this.lastError }, 'modbus connection failed; retrying with backoff');
        await sleepUnlessAborted(this.backoff.next(), this.abort.signal);
        continue;
      }

      // Connected: serve requests until the connection is lost or dropped.
      const reason = await new Promise<string>((resolve) => {
        this.client = client;
        this.lostSignal = new AbortController();
        this.lost = (why) => {
          this.lost = null;
          resolve(why);
        };
        const current = client!;
        current.on('close', () => {
          if (this.client === current) this.lost?.('connection closed by the peer or the port went away');
        });
        if (this.endpoint.transport === 'rtu_over_tcp') {
          guardReceive(current, this.options.clock, (why) => {
            if (this.client !== current) return;
            this.flooded = true;
            this.throttle.warn('flood', { endpoint: this.key, reason: why }, 'modbus peer floods the link; connection dropped');
            this.lost?.(why);
          });
        }
        this.connected = true;
        this.everConnected = true;
        this.consecutiveTimeouts = 0;
        if (!this.flooded) this.backoff.reset();
        this.lastError = null;
        if (this.announceConnect) logger.info({ endpoint: this.key }, 'modbus connected');
        this.announceConnect = false;
        this.options.onStateChange?.(true);
        for (const w of [...this.connectWaiters]) w();
      });
      this.connected = false;
      this.client = null;
      this.lostSignal.abort();
      await closeClient(client!);
      this.options.onStateChange?.(false);
      if (this.closed) break;
      this.lastError = reason;
      this.logLost(reason);
      await sleepUnlessAborted(this.backoff.next(), this.abort.signal);
    }
    this.connected = false;
  }
}

/** Opens a modbus-serial client for the endpoint, or rejects (never hangs past `timeoutMs`). */
async function openClient(endpoint: Endpoint, timeoutMs: number, signal: AbortSignal): Promise<Client> {
  const client = new ModbusRTU();
  // modbus-serial re-emits port errors as 'error' events; without a listener Node would throw
  // them and end the process. Failures reach us through rejected requests and 'close' instead.
  client.on('error', () => undefined);
  client.setTimeout(timeoutMs);
  let opening: Promise<void>;
  switch (endpoint.transport) {
    case 'tcp':
      opening = client.connectTCP(endpoint.host, { port: endpoint.port });
      break;
    case 'rtu_over_tcp':
      // modbus-serial's TelnetPort sends bare RTU frames (with CRC, no MBAP header) over a TCP
      // socket: what serial device servers in "transparent"/"raw TCP" mode expect.
      // (connectTcpRTUBuffered, despite its name, frames requests with MBAP headers.)
      opening = client.connectTelnet(endpoint.host, { port: endpoint.port, timeout: timeoutMs });
      break;
    case 'rtu':
      opening = client.connectRTUBuffered(endpoint.path, {
        baudRate: endpoint.baudRate,
        parity: endpoint.parity,
        dataBits: endpoint.dataBits,
        stopBits: endpoint.stopBits,
      });
      break;
  }
  try {
    await guarded(opening, timeoutMs + 1_000, signal, endpointKey(endpoint), 'connect');
  } catch (err) {
    await closeClient(client);
    throw err;
  }
  return client;
}

async function closeClient(client: Client): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 2_000);
    try {
      const c = client as unknown as { destroy(cb: () => void): void; close(cb: () => void): void };
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      // destroy() drops a TCP socket at once; serial ports only have close().
      const port = (client as unknown as { _port?: { destroy?: unknown } })._port;
      if (port && typeof port.destroy === 'function') c.destroy(done);
      else c.close(done);
    } catch {
      clearTimeout(timer);
      resolve();
    }
  });
}

function issueRead(client: Client, req: ReadRequest): Promise<Buffer> {
  switch (req.table) {
    case 'coil':
      return client.readCoils(req.address, req.count).then((r) => r.buffer);
    case 'discrete_input':
      return client.readDiscreteInputs(req.address, req.count).then((r) => r.buffer);
    case 'holding':
      return client.readHoldingRegisters(req.address, req.count).then((r) => r.buffer);
    case 'input':
      return client.readInputRegisters(req.address, req.count).then((r) => r.buffer);
  }
}

/** §6.1–§6.4: the byte count must match the quantity asked for. */
function checkLength(bytes: Buffer, req: ReadRequest): void {
  const expected = TABLE_INFO[req.table].bits ? Math.ceil(req.count / 8) : req.count * 2;
  if (bytes.length !== expected) {
    throw new ModbusRequestError('malformed', 'MODBUS_BAD_RESPONSE', `response has ${bytes.length} data bytes, expected ${expected}`);
  }
}

/**
 * Puts a gate in front of modbus-serial's TelnetPort 'data' handler: a chunk that would push the
 * held bytes past RTU_MAX_HELD_BYTES, or the bytes of the last second past
 * RTU_MAX_BYTES_PER_SECOND, never reaches it; the socket is paused and `onFlood` drops the link.
 */
function guardReceive(client: Client, clock: Clock, onFlood: (why: string) => void): void {
  const port = (client as unknown as { _port?: { _buffer?: Buffer; _client?: NodeJS.EventEmitter & { pause?(): void } } })._port;
  const socket = port?._client;
  if (!port || !socket || typeof socket.listeners !== 'function') return;
  const handlers = socket.listeners('data') as Array<(chunk: Buffer) => void>;
  socket.removeAllListeners('data');
  let windowStart = clock.monotonic();
  let windowBytes = 0;
  let tripped = false;
  socket.on('data', (chunk: Buffer) => {
    if (tripped) return;
    const now = clock.monotonic();
    if (now - windowStart >= 1_000) {
      windowStart = now;
      windowBytes = 0;
    }
    windowBytes += chunk.length;
    const held = (Buffer.isBuffer(port._buffer) ? port._buffer.length : 0) + chunk.length;
    const why =
      held > RTU_MAX_HELD_BYTES
        ? `${held} bytes received without a complete answer (an RTU frame is at most 256 bytes)`
        : windowBytes > RTU_MAX_BYTES_PER_SECOND
          ? `more than ${RTU_MAX_BYTES_PER_SECOND} bytes in one second`
          : null;
    if (why) {
      tripped = true;
      port._buffer = Buffer.alloc(0);
      socket.pause?.();
      onFlood(`peer floods the link: ${why}`);
      return;
    }
    for (const h of handlers) h.call(socket, chunk);
  });
}

/**
 * Bytes left in a serial/RTU-over-TCP receive buffer before a new request can only be a late
 * answer to an earlier, timed-out request (a single master has one request outstanding, §2.1 of
 * the serial line spec). Dropping them keeps that late answer from being taken for the next one.
 * modbus-serial keeps this buffer in the private `_buffer` of its RTU ports.
 */
function discardStaleBytes(client: Client): void {
  const port = (client as unknown as { _port?: { _buffer?: unknown } })._port;
  if (port && Buffer.isBuffer(port._buffer) && port._buffer.length > 0) port._buffer = Buffer.alloc(0);
}

/**
 * Settles with `work`, or rejects when `signal` aborts (connection lost) or after `ms` (a guard in
 * case the library never calls back).
 */
function guarded<T>(work: Promise<T>, ms: number, signal: AbortSignal, endpoint: string, what = 'request'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new ModbusRequestError('timeout', 'MODBUS_TIMEOUT', `${what} to ${endpoint} did not complete in ${ms} ms`));
    }, ms);
    const onAbort = () => {
      cleanup();
      reject(new ModbusRequestError('connection', 'MODBUS_CONNECTION_LOST', `connection to ${endpoint} lost during the ${what}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (err) => {
        cleanup();
        reject(err);
      },
    );
  });
}
