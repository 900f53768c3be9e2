import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { LogThrottle } from '../core/log-throttle.js';
import { ConnectionTable, type Shed, type TableLimit } from '../core/connection-table.js';
import { remoteKey } from '../core/remote-address.js';

/** The `reason` label of gateway_http_connections_refused_total. */
export type RefusedReason = 'max_connections' | 'max_connections_per_client' | 'header_timeout';

export interface ConnectionGuardLimits {
  /** http.max_connections, lowered to what the open-file limit leaves (core/descriptors.ts). */
  maxConnections: number;
  /** http.max_connections_per_client. */
  maxConnectionsPerClient: number;
}

/** How log lines name the server and its limits (the emulator names its command-line flags). */
export interface GuardNames {
  server: string;
  maxConnections: string;
  maxConnectionsPerClient: string;
  headerTimeout: string;
}

const LOCAL_SERVER: GuardNames = { server: 'local HTTP server', maxConnections: 'http.max_connections', maxConnectionsPerClient: 'http.max_connections_per_client', headerTimeout: 'http.header_timeout' };

/**
 * Node's own header deadline, checked every second: with Node's default check every 30 s, a
 * connection that never finished its headers lived up to 30 s past its deadline.
 */
export function headerTimeoutOptions(headersTimeoutMs: number): { headersTimeout: number; connectionsCheckingInterval: number } {
  return { headersTimeout: headersTimeoutMs, connectionsCheckingInterval: Math.min(1_000, headersTimeoutMs) };
}

/**
 * Admits the local HTTP server's connections by remote address (core/connection-table.ts), so one
 * host's flood costs that host: a connection is "pending" from accept until its request's headers
 * are complete, and again between keep-alive requests; it is settled while a request is being
 * answered. At http.max_connections_per_client the client's own oldest pending connection is
 * closed for its newcomer; at http.max_connections, the oldest pending one of the client holding
 * the most. So 300 half-sent requests from one address hold at most max_connections_per_client
 * slots, and /healthz, the operator page and the API from elsewhere still get in (before, Node
 * closed every connection beyond max_connections at accept, whoever it came from).
 *
 * Headers that never end are closed at http.header_timeout by Node's own check (run every second
 * here; Node's default runs it every 30 s), counted and logged here with the address.
 */
export class ConnectionGuard {
  readonly table: ConnectionTable<Socket>;

  private readonly names: GuardNames;

  /** `count` counts one refusal (gateway_http_connections_refused_total); refusals are logged through `throttle`. */
  constructor(
    readonly limits: ConnectionGuardLimits,
    private readonly o: { count: (reason: RefusedReason) => void; throttle: LogThrottle; names?: GuardNames },
  ) {
    this.names = o.names ?? LOCAL_SERVER;
    const perClient = Math.min(limits.maxConnectionsPerClient, limits.maxConnections);
    this.table = new ConnectionTable<Socket>({ max: limits.maxConnections, maxPerAddress: perClient, maxPending: limits.maxConnections, maxPendingPerAddress: perClient });
  }

  get open(): number {
    return this.table.size;
  }

  /** Connections with a request being answered (streams included). */
  get inRequest(): number {
    return this.table.size - this.table.pending;
  }

  /** Watches `server`'s connections and requests. */
  attach(server: Server): void {
    server.on('connection', (socket: Socket) => this.admit(socket));
    // Before the server's own handler: the request being handled counts as in a request (the reserve).
    server.prependListener('request', (req, res) => {
      const socket = req.socket;
      this.table.settle(socket);
      res.once('close', () => {
        if (!socket.destroyed) this.table.unsettle(socket);
      });
    });
    server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => this.clientError(err, socket));
  }

  private admit(socket: Socket): void {
    const result = this.table.admit(socket, socket.remoteAddress);
    if (result.admitted) {
      socket.once('close', () => this.table.remove(socket));
      for (const s of result.shed) this.close(s, result.address);
      return;
    }
    socket.on('error', () => undefined);
    socket.destroy();
    const reason = refusedReason(result.limit);
    const setting = reason === 'max_connections' ? this.names.maxConnections : this.names.maxConnectionsPerClient;
    this.refused(reason, result.address, {}, `${this.names.server} refused a connection from ${result.address}: ${setting} reached, every one of them in a request`);
  }

  /** Closes a connection the table gave up for a newcomer from `newcomer`. */
  private close(s: Shed<Socket>, newcomer: string): void {
    s.conn.on('error', () => undefined);
    s.conn.destroy();
    const reason = refusedReason(s.limit);
    const n = this.names;
    if (reason === 'max_connections_per_client') this.refused(reason, s.address, {}, `${n.server} closed the oldest idle or half-sent connection from ${s.address}: ${n.maxConnectionsPerClient} reached for that address`);
    else this.refused(reason, s.address, { for_remote: newcomer }, `${n.server} closed the oldest idle or half-sent connection from ${s.address}, the address holding the most: ${n.maxConnections} reached`);
  }

  /** Counts a refusal and logs it (a line per reason and address a minute, at most 10 a minute per reason). */
  private refused(reason: RefusedReason, address: string, extra: Record<string, unknown>, message: string): void {
    this.o.count(reason);
    const l = this.limits;
    const limit = reason === 'max_connections' ? { max_connections: l.maxConnections } : reason === 'max_connections_per_client' ? { max_connections_per_client: l.maxConnectionsPerClient } : {};
    this.o.throttle.warn(`refused|${reason}|${address}`, { remote: address, reason, ...extra, ...limit }, message);
  }

  /**
   * Node's answers to a malformed or timed-out request (it writes them only without a listener):
   * 408 for headers not complete within the header timeout, 431 for headers too large, else 400.
   */
  private clientError(err: NodeJS.ErrnoException, socket: Socket): void {
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      const remote = remoteKey(socket.remoteAddress);
      this.refused('header_timeout', remote, {}, `${this.names.server} closed a connection from ${remote}: its request headers did not arrive within ${this.names.headerTimeout}`);
    }
    // As Node does without a listener: answer only when no response of this connection has begun.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && !inFlight?.headersSent && err.code !== 'ECONNRESET') {
      const status = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? '408 Request Timeout' : err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
      socket.write(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    }
    socket.destroy();
  }
}

function refusedReason(limit: TableLimit): RefusedReason {
  return limit === 'address' || limit === 'address_pending' ? 'max_connections_per_client' : 'max_connections';
}
