import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Aedes, type AedesPublishPacket, type Client, type PublishPacket } from 'aedes';
import { WebSocketServer, createWebSocketStream } from 'ws';
import { capToDescriptors, openFileLimit } from '../../core/descriptors.js';
import { describeError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import type { SourceContext } from '../context.js';
import type { MqttBrokerConfig } from './config.js';
import type { InboundMessage } from './decoding.js';
import { guardPacketSize } from './packet-size-guard.js';
import { boundedMemoryPersistence } from './bounded-persistence.js';
import { BrokerConnections } from './broker-connections.js';

/**
 * Something inside the gateway that reads messages published to the embedded broker, without a
 * network hop: the `url: embedded` connections. `handle` resolves when the publisher may be
 * acknowledged (for QoS 1/2: after the samples are committed).
 */
export interface BrokerTap {
  matches(topic: string): boolean;
  handle(msg: InboundMessage): Promise<void>;
}

export interface BrokerEndpoints {
  host: string;
  port: number;
  websocket: { host: string; port: number; path: string } | null;
}

/**
 * The embedded MQTT broker (aedes), so PLCs and HMI panels can publish straight to the gateway.
 *
 * Ack-after-commit for in-process delivery: aedes calls `authorizePublish` before it acknowledges
 * a client's PUBLISH (PUBACK for QoS 1, PUBREC for QoS 2, aedes lib/handlers/publish.js). The taps
 * run there, and the callback is called only once their samples are committed, so a publisher
 * keeps (and resends on reconnect) every QoS 1/2 message the gateway has not yet made durable.
 * A failed commit fails the authorisation: aedes then closes that client's connection without
 * acknowledging (MQTT-3.3.5-2), and the client resends after reconnecting.
 *
 * Sessions and retained messages live in memory (aedes-persistence): after a gateway restart
 * publishers' sessions are gone; their unacknowledged messages are resent by the publishers.
 */
export class EmbeddedBroker {
  private aedes: Aedes | null = null;
  private server: Server | null = null;
  private http: HttpServer | null = null;
  private wss: WebSocketServer | null = null;
  private readonly taps = new Set<BrokerTap>();
  private readonly stateListeners = new Set<(listening: boolean) => void>();
  private readonly throttle: LogThrottle;
  private readonly expectedUser: Buffer | null;
  private readonly expectedPassword: Buffer | null;
  private endpoints: BrokerEndpoints | null = null;
  private refused: Record<string, number> = {};
  private dropped: Record<string, number> = {};
  private messages = 0;
  /** Every connection, TCP and WebSocket, per remote address; who is closed for whom (broker-connections.ts). */
  private readonly connections: BrokerConnections;
  /** Why max_clients is lowered (the open-file limit), said when the broker starts; or null. */
  private readonly lowered: string | null;
  private persistenceStats: (() => Record<string, number>) | null = null;

  /** `fileLimit`: the process's open-file limit (core/descriptors.ts); default: read from the process. */
  constructor(private readonly cfg: MqttBrokerConfig, private readonly ctx: SourceContext, fileLimit: number | null = openFileLimit()) {
    this.throttle = new LogThrottle(ctx.logger, 60_000, () => ctx.clock.monotonic());
    const { cap, lowered } = capToDescriptors('broker', 'mqtt.broker.max_clients', cfg.max_clients, fileLimit);
    this.lowered = lowered;
    this.connections = new BrokerConnections(
      { maxClients: cap, maxClientsPerAddress: cfg.max_clients_per_address, maxUnauthenticated: cfg.max_unauthenticated, maxUnauthenticatedPerAddress: cfg.max_unauthenticated_per_address, connectDeadlineMs: cfg.connect_deadline },
      (reason, fields, message) => this.refuse(reason, fields, message),
    );
    // Digests of equal length make the comparison constant-time whatever the lengths.
    this.expectedUser = cfg.username !== undefined ? digest(Buffer.from(cfg.username, 'utf8')) : null;
    this.expectedPassword = cfg.password !== undefined ? digest(Buffer.from(cfg.password.reveal(), 'utf8')) : null;
  }

  addTap(tap: BrokerTap): void {
    this.taps.add(tap);
  }

  removeTap(tap: BrokerTap): void {
    this.taps.delete(tap);
  }

  onListeningChange(listener: (listening: boolean) => void): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  get listening(): boolean {
    return this.endpoints !== null;
  }

  get address(): BrokerEndpoints | null {
    return this.endpoints;
  }

  /** Starts aedes and the listeners. Throws (with the port named) when a port cannot be bound. */
  async start(): Promise<BrokerEndpoints> {
    if (this.endpoints) return this.endpoints;
    if (!this.aedes) this.aedes = await this.createAedes();
    try {
      // No server.maxConnections: Node would close a PLC's connection at accept while idle sockets
      // that never sent CONNECT held every slot. broker-connections.ts admits them.
      const server = createServer((socket) => {
        if (this.connections.admit(socket)) this.accept(socket, socket.remoteAddress ?? '?');
      });
      this.server = server;
      const port = await listen(server, this.cfg.port, this.cfg.host, 'mqtt.broker.port', this.onServerError);
      const websocket = this.cfg.websocket ? await this.listenWebSocket(this.cfg.websocket) : null;
      this.endpoints = { host: this.cfg.host, port, websocket };
      for (const l of this.stateListeners) l(true);
      this.ctx.logger.info({ source: this.cfg.name, host: this.cfg.host, port, websocket, anonymous: this.cfg.allow_anonymous }, 'embedded MQTT broker listening');
      if (this.lowered) this.ctx.logger.warn({ source: this.cfg.name, max_clients: this.connections.limits.maxClients }, this.lowered);
      return this.endpoints;
    } catch (err) {
      await this.closeListeners();
      throw err;
    }
  }

  /**
   * MQTT over WebSocket. Its sockets are admitted at the TCP accept like the MQTT port's (before,
   * only upgraded ones were counted: 1,100 idle sockets on this port took every descriptor).
   */
  private async listenWebSocket(ws: NonNullable<MqttBrokerConfig['websocket']>): Promise<BrokerEndpoints['websocket']> {
    const http = createHttpServer((_req, res) => {
      res.statusCode = 426;
      res.setHeader('connection', 'close');
      res.end('MQTT over WebSocket: connect with a WebSocket client\n');
    });
    http.on('connection', (socket: Socket) => {
      this.connections.admit(socket);
    });
    this.http = http;
    // ws' own frame limit, on top of the MQTT packet guard.
    const wss = new WebSocketServer({ server: http, path: ws.path, maxPayload: this.cfg.max_packet_size + 16, handleProtocols: (protocols) => (protocols.has('mqtt') ? 'mqtt' : protocols.has('mqttv3.1') ? 'mqttv3.1' : false) });
    this.wss = wss;
    wss.on('connection', (socket, req) => {
      const stream = createWebSocketStream(socket);
      this.connections.alias(stream, req.socket);
      this.accept(stream, req.socket.remoteAddress ?? '?');
    });
    wss.on('error', (err) => this.throttle.error('wss-error', { err: describeError(err) }, 'embedded MQTT broker WebSocket error'));
    const host = ws.host ?? this.cfg.host;
    const port = await listen(http, ws.port, host, 'mqtt.broker.websocket.port', this.onServerError);
    return { host, port, path: ws.path };
  }

  /** accept() fails with EMFILE when descriptors run out; unhandled, that error would end the process. */
  private readonly onServerError = (err: Error): void => {
    this.throttle.error(`server-error|${(err as NodeJS.ErrnoException).code ?? ''}`, { source: this.cfg.name, err: describeError(err) }, 'embedded MQTT broker listener error; it keeps listening');
  };

  private async createAedes(): Promise<Aedes> {
    const bounded = boundedMemoryPersistence({
      maxRetained: this.cfg.max_retained,
      maxRetainedBytes: this.cfg.max_retained_bytes,
      maxQueuedMessages: this.cfg.max_queued_messages,
      maxQueuedBytes: this.cfg.max_queued_bytes,
      onDrop: (reason, detail) => {
        this.dropped[reason] = (this.dropped[reason] ?? 0) + 1;
        this.ctx.metrics.brokerMessagesDropped.inc({ reason });
        const what = reason === 'retained_limit' ? 'a retained message was not kept: mqtt.broker.max_retained or max_retained_bytes reached' : 'a message was not queued for a persistent session: mqtt.broker.max_queued_messages or max_queued_bytes reached';
        this.throttle.warn(`drop|${reason}`, { source: this.cfg.name, reason, ...detail }, `embedded MQTT broker: ${what}`);
      },
    });
    this.persistenceStats = bounded.stats;
    const aedes = await Aedes.createBroker({
      persistence: bounded.persistence as never,
      // Aedes' 30 s default let idle sockets hold their slots long enough to lock out PLCs.
      // broker-connections.ts closes them at connect_deadline (and says from where); this is the backstop.
      connectTimeout: this.cfg.connect_deadline + 1_000,
      // MQTT 3.1.1 §3.1.3.1 lets a server accept client ids longer than 23 characters; PLCs use them.
      maxClientsIdLength: 256,
      authenticate: (client, username, password, done) => this.authenticate(client, username, password, done),
      authorizePublish: (client, packet, done) => this.authorizePublish(client, packet, done),
    });
    aedes.on('client', (client) => {
      this.connections.authenticated(client.conn as unknown as Duplex);
      this.ctx.metrics.brokerClients.set(aedes.connectedClients);
    });
    aedes.on('clientDisconnect', () => this.ctx.metrics.brokerClients.set(aedes.connectedClients));
    aedes.on('clientError', (client, err) => {
      this.throttle.warn(`client-error|${describeError(err).slice(0, 40)}`, { source: this.cfg.name, client_id: client?.id, err: describeError(err) }, 'embedded MQTT broker: client error, connection closed');
    });
    aedes.on('connectionError', (client, err) => {
      this.throttle.warn(`connection-error|${describeError(err).slice(0, 40)}`, { source: this.cfg.name, client_id: client?.id, err: describeError(err) }, 'embedded MQTT broker: connection error');
    });
    return aedes;
  }

  /** Hands an admitted connection (a TCP socket, or a WebSocket's stream) to aedes. */
  private accept(conn: Duplex, remote: string): void {
    const aedes = this.aedes;
    if (!aedes) {
      conn.destroy();
      return;
    }
    conn.on('error', () => {
      /* reported through aedes' clientError; never an uncaught exception */
    });
    aedes.handle(conn as Socket);
    guardPacketSize(conn, this.cfg.max_packet_size, (problem) => {
      this.refuse('packet_too_large', { remote, problem }, 'embedded MQTT broker closed a connection: packet larger than max_packet_size');
    });
  }

  private authenticate(client: Client, username: Readonly<string | undefined>, password: Readonly<Buffer | undefined>, done: (error: (Error & { returnCode: number }) | null, success: boolean | null) => void): void {
    const credentialsSet = this.expectedUser !== null && this.expectedPassword !== null;
    const presented = username !== undefined || password !== undefined;
    let ok: boolean;
    if (!presented) ok = this.cfg.allow_anonymous || !credentialsSet;
    else if (!credentialsSet) ok = this.cfg.allow_anonymous;
    else {
      const u = digest(Buffer.from(username ?? '', 'utf8'));
      const p = digest(password ? Buffer.from(password) : Buffer.alloc(0));
      // Both comparisons always run, so timing does not tell which part was wrong.
      const userOk = timingSafeEqual(u, this.expectedUser as Buffer);
      const passOk = timingSafeEqual(p, this.expectedPassword as Buffer);
      ok = userOk && passOk;
    }
    if (ok) {
      done(null, true);
      return;
    }
    const remote = this.connections.remoteOf(client.conn as unknown as Duplex | undefined);
    this.refuse('bad_credentials', { client_id: client.id, username: username ?? null, remote }, 'embedded MQTT broker refused a client: bad user name or password');
    // CONNACK return code 4 "bad user name or password" (MQTT 3.1.1 §3.2.2.3).
    done(Object.assign(new Error('bad user name or password'), { returnCode: 4 }), null);
  }

  private authorizePublish(client: Client | null, packet: PublishPacket, done: (error?: Error | null) => void): void {
    if (packet.topic.startsWith('$SYS')) {
      done(new Error('$SYS topics are reserved'));
      return;
    }
    const payload = toBuffer(packet.payload);
    // The size guard closes the connection at the header, but aedes may already hold a whole
    // packet that arrived in the same read; refuse it here as well.
    if (payload.length + Buffer.byteLength(packet.topic) + 4 > this.cfg.max_packet_size) {
      this.refuse('packet_too_large', { client_id: client?.id, topic: packet.topic, bytes: payload.length }, 'embedded MQTT broker refused a message larger than max_packet_size');
      done(new Error('packet larger than max_packet_size'));
      return;
    }
    this.messages += 1;
    const matching = [...this.taps].filter((t) => t.matches(packet.topic));
    if (matching.length === 0) {
      done(null);
      return;
    }
    // A publisher's retain flag marks a live value it wants kept for later subscribers, not an old
    // one (that meaning only exists on delivery to a new subscription, MQTT §3.3.1.3); only an empty
    // retained message (a delete) stays marked so the pipeline skips it.
    const msg: InboundMessage = { topic: packet.topic, payload, qos: packet.qos, retain: packet.retain === true && payload.length === 0, receivedAt: this.ctx.clock.now() };
    let handled: Promise<unknown>;
    try {
      handled = matching.length === 1 ? matching[0].handle(msg) : Promise.all(matching.map((t) => t.handle(msg)));
    } catch (err) {
      handled = Promise.reject(err);
    }
    handled.then(
      () => done(null),
      (err: unknown) => done(err instanceof Error ? err : new Error(describeError(err))),
    );
  }

  private refuse(reason: string, fields: Record<string, unknown>, message: string): void {
    this.refused[reason] = (this.refused[reason] ?? 0) + 1;
    this.ctx.metrics.brokerConnectionsRefused.inc({ reason });
    this.throttle.warn(`refuse|${reason}|${String(fields.remote ?? fields.client_id ?? '')}`, { source: this.cfg.name, reason, ...fields }, message);
  }

  /** Publishes on behalf of the gateway (Sparkplug Rebirth requests). QoS 0, not retained. */
  publish(topic: string, payload: Buffer): boolean {
    const aedes = this.aedes;
    if (!aedes || !this.endpoints) return false;
    const packet = { cmd: 'publish', topic, payload, qos: 0, retain: false, dup: false } as unknown as PublishPacket;
    aedes.publish(packet, (err?: Error) => {
      if (err) this.throttle.warn(`publish|${topic}`, { source: this.cfg.name, topic, err: describeError(err) }, 'embedded MQTT broker publish failed');
    });
    return true;
  }

  detail(): Record<string, unknown> {
    return {
      listening: this.endpoints,
      clients: this.aedes?.connectedClients ?? 0,
      messages: this.messages,
      refused: { ...this.refused },
      dropped: { ...this.dropped },
      unauthenticated: this.connections.unauthenticated,
      connections: this.connections.open,
      addresses: this.connections.addresses,
      max_clients: this.connections.limits.maxClients,
      ...(this.persistenceStats ? { stored: this.persistenceStats() } : {}),
      authentication: this.expectedUser ? (this.cfg.allow_anonymous ? 'password or anonymous' : 'password') : 'anonymous',
      max_packet_size: this.cfg.max_packet_size,
      persistence: 'memory (sessions and retained messages are lost on restart)',
    };
  }

  private async closeListeners(): Promise<void> {
    const wasListening = this.endpoints !== null;
    this.endpoints = null;
    this.connections.closeAll();
    if (this.wss) {
      for (const c of this.wss.clients) c.terminate();
      await new Promise<void>((r) => this.wss?.close(() => r()));
      this.wss = null;
    }
    await Promise.all([closeServer(this.server), closeServer(this.http)]);
    this.server = null;
    this.http = null;
    if (wasListening) for (const l of this.stateListeners) l(false);
  }

  async close(): Promise<void> {
    const aedes = this.aedes;
    this.aedes = null;
    if (aedes) await new Promise<void>((resolve) => aedes.close(() => resolve()));
    await this.closeListeners();
    this.ctx.metrics.brokerClients.set(0);
  }
}

function digest(b: Buffer): Buffer {
  return createHash('sha256').update(b).digest();
}

function toBuffer(p: AedesPublishPacket['payload'] | PublishPacket['payload']): Buffer {
  if (Buffer.isBuffer(p)) return p;
  if (typeof p === 'string') return Buffer.from(p, 'utf8');
  return Buffer.from(p as Uint8Array);
}

function listen(server: Server | HttpServer, port: number, host: string, setting: string, onLaterError: (err: Error) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.removeListener('listening', onListening);
      const why = err.code === 'EADDRINUSE' ? 'is already in use by another program' : err.code === 'EACCES' ? 'needs more privileges (ports below 1024)' : `cannot be opened (${err.code ?? err.message})`;
      reject(Object.assign(new Error(`${setting}: ${host}:${port} ${why}`), { code: 'BROKER_LISTEN_FAILED', cause: err }));
    };
    const onListening = () => {
      server.removeListener('error', onError);
      server.on('error', onLaterError);
      resolve((server.address() as AddressInfo).port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

function closeServer(server: Server | HttpServer | null): Promise<void> {
  if (!server || !server.listening) return Promise.resolve();
  return new Promise((resolve) => server.close(() => resolve()));
}
