import type { Duplex } from 'node:stream';
import { ConnectionTable, type Shed, type TableLimit } from '../../core/connection-table.js';

/** The connection limits of the embedded broker in force (mqtt.broker settings, max_clients lowered to what the open-file limit leaves). */
export interface BrokerConnectionLimits {
  maxClients: number;
  maxClientsPerAddress: number;
  maxUnauthenticated: number;
  maxUnauthenticatedPerAddress: number;
  connectDeadlineMs: number;
}

/** Reports one refused or closed connection: reason label, log fields (with the address), message. */
export type RefusalReport = (reason: string, fields: Record<string, unknown>, message: string) => void;

/** A socket as accepted: a TCP socket, or the one under a WebSocket. */
type RawSocket = Duplex & { remoteAddress?: string };

/**
 * Who may hold the embedded broker's connections, counted on the raw socket as it is accepted, on
 * the TCP port and the WebSocket port alike: a WebSocket connection counts from its TCP accept, not
 * from its upgrade, so sockets that never upgrade (or never finish the HTTP request) are limited
 * like idle TCP ones. A connection is pending until aedes has accepted its CONNECT credentials.
 *
 * Per remote address (core/connection-table.ts): at max_unauthenticated_per_address or
 * max_clients_per_address, the address's own oldest pending connection is closed for its newcomer;
 * at max_unauthenticated or max_clients, the oldest pending one of the address holding the most.
 * So 500 idle sockets a second from one address close that address's sockets, never a PLC's from
 * another address that is about to send CONNECT; a newcomer is refused only when every connection
 * (of its address, or in all) is an authenticated client.
 *
 * Every connection must be authenticated within connect_deadline of its accept, WebSocket upgrade
 * included, however steadily its bytes arrive.
 */
export class BrokerConnections {
  private readonly table: ConnectionTable<RawSocket>;
  /** The stream aedes reads (a WebSocket's) → the socket under it, counted in the table. */
  private readonly rawOf = new WeakMap<Duplex, RawSocket>();
  private readonly deadlines = new Map<RawSocket, NodeJS.Timeout>();

  constructor(
    readonly limits: BrokerConnectionLimits,
    private readonly report: RefusalReport,
  ) {
    const max = limits.maxClients;
    this.table = new ConnectionTable<RawSocket>({
      max,
      maxPerAddress: Math.min(limits.maxClientsPerAddress, max),
      maxPending: Math.min(limits.maxUnauthenticated, max),
      maxPendingPerAddress: Math.min(limits.maxUnauthenticatedPerAddress, limits.maxUnauthenticated, max),
    });
  }

  get open(): number {
    return this.table.size;
  }

  get unauthenticated(): number {
    return this.table.pending;
  }

  get addresses(): number {
    return this.table.addresses;
  }

  /** Admits a socket just accepted; false when it was refused (it is destroyed). */
  admit(socket: RawSocket): boolean {
    const result = this.table.admit(socket, socket.remoteAddress);
    socket.on('error', () => {
      /* reported through aedes' clientError; never an uncaught exception */
    });
    if (!result.admitted) {
      socket.destroy();
      this.refused(result.limit, result.address);
      return false;
    }
    socket.once('close', () => this.forget(socket));
    const timer = setTimeout(() => this.expire(socket, result.address), this.limits.connectDeadlineMs);
    timer.unref();
    this.deadlines.set(socket, timer);
    for (const s of result.shed) this.shed(s, result.address);
    return true;
  }

  /** `stream` (what aedes reads) runs over `raw` (a WebSocket over its TCP socket). */
  alias(stream: Duplex, raw: RawSocket): void {
    this.rawOf.set(stream, raw);
  }

  /** The remote address of the client reading `conn` (a WebSocket's: of the socket under it), for log lines. */
  remoteOf(conn: Duplex | undefined): string | undefined {
    if (!conn) return undefined;
    return (this.rawOf.get(conn) ?? (conn as RawSocket)).remoteAddress;
  }

  /** aedes accepted the CONNECT of the client reading `conn`: it is no longer closed for others. */
  authenticated(conn: Duplex): void {
    const raw = this.rawOf.get(conn) ?? (conn as RawSocket);
    this.table.settle(raw);
    this.clearDeadline(raw);
  }

  /** Destroys every connection (the listeners close). */
  closeAll(): void {
    for (const s of [...this.table.connections()]) s.destroy();
    this.table.clear();
    for (const t of this.deadlines.values()) clearTimeout(t);
    this.deadlines.clear();
  }

  private forget(socket: RawSocket): void {
    this.table.remove(socket);
    this.clearDeadline(socket);
  }

  private clearDeadline(socket: RawSocket): void {
    const t = this.deadlines.get(socket);
    if (t === undefined) return;
    clearTimeout(t);
    this.deadlines.delete(socket);
  }

  private expire(socket: RawSocket, address: string): void {
    this.deadlines.delete(socket);
    if (!this.table.isPending(socket)) return;
    this.table.remove(socket);
    socket.destroy();
    this.report('connect_deadline', { remote: address, connect_deadline_ms: this.limits.connectDeadlineMs }, `embedded MQTT broker closed a connection from ${address}: no CONNECT with valid credentials within mqtt.broker.connect_deadline`);
  }

  private shed(s: Shed<RawSocket>, newcomer: string): void {
    this.clearDeadline(s.conn);
    s.conn.destroy();
    const fields = { remote: s.address, for_remote: newcomer };
    const oldest = `embedded MQTT broker closed the oldest connection from ${s.address} that had not authenticated`;
    if (s.limit === 'address') this.report('address_limit', fields, `${oldest}: mqtt.broker.max_clients_per_address reached for that address`);
    else if (s.limit === 'address_pending') this.report('address_unauthenticated_limit', fields, `${oldest}: mqtt.broker.max_unauthenticated_per_address reached for that address`);
    else if (s.limit === 'total') this.report('client_limit', fields, `${oldest}, the address holding the most connections: mqtt.broker.max_clients reached`);
    else this.report('unauthenticated_limit', fields, `${oldest}, the address holding the most of them: mqtt.broker.max_unauthenticated reached`);
  }

  private refused(limit: TableLimit, address: string): void {
    if (limit === 'address') this.report('address_limit', { remote: address }, `embedded MQTT broker refused a connection from ${address}: mqtt.broker.max_clients_per_address reached for that address (all of them authenticated)`);
    else this.report('too_many_clients', { remote: address }, `embedded MQTT broker refused a connection from ${address}: mqtt.broker.max_clients reached (all of them authenticated)`);
  }
}
