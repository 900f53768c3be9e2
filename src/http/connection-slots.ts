import type { ConnectionLimits } from './config.js';

/** Why a request was turned away by ConnectionSlots; also the `reason` label of gateway_http_busy_total. */
export type BusyReason = 'streams_per_client' | 'streams_total' | 'reserved_connections';

/**
 * Who may hold the local HTTP server's connections. Node closes every connection
 * beyond http.max_connections as it is accepted, whatever it is for; before this, one client with
 * 256 console event streams took them all and /healthz and the operator page went dark.
 *
 * - Streams (routes that answer with a response that stays open, the console's live events) are
 *   counted per client address and in total: http.max_streams_per_client, http.max_streams.
 * - The last http.reserved_connections below max_connections are only for essential routes
 *   (/healthz, /readyz, the operator page and its buttons): once more connections are in a
 *   request, other requests are answered 503 and their connection closed, which frees the slot.
 *
 * The reserve protects against requests that hold a connection (streams, slow reads). Idle and
 * half-sent connections do not count: connection-guard.ts closes them for newcomers (the address
 * holding the most first) and at http.header_timeout.
 */
export class ConnectionSlots {
  private streams = 0;
  private readonly streamsOf = new Map<string, number>();

  /** `open` counts the connections in a request now (connection-guard.ts keeps them). */
  constructor(
    readonly limits: ConnectionLimits,
    private readonly open: () => number,
  ) {}

  get openConnections(): number {
    return this.open();
  }

  get openStreams(): number {
    return this.streams;
  }

  /** The connections in a request reach into the reserve: only essential routes are served. */
  get inReserve(): boolean {
    return this.limits.reservedConnections > 0 && this.open() > this.limits.maxConnections - this.limits.reservedConnections;
  }

  /** A stream slot for `client`, with its release (call it once, when the response closes); or why not. */
  takeStream(client: string): { release: () => void } | { refused: BusyReason } {
    const mine = this.streamsOf.get(client) ?? 0;
    if (mine >= this.limits.maxStreamsPerClient) return { refused: 'streams_per_client' };
    if (this.streams >= this.limits.maxStreams) return { refused: 'streams_total' };
    this.streams += 1;
    this.streamsOf.set(client, mine + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.streams -= 1;
        const left = (this.streamsOf.get(client) ?? 1) - 1;
        if (left <= 0) this.streamsOf.delete(client);
        else this.streamsOf.set(client, left);
      },
    };
  }
}
