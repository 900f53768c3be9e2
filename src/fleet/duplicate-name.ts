import type { Logger } from 'pino';
import { backoffDelay, type BackoffPolicy } from '../core/backoff.js';
import type { Clock } from '../core/clock.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { FleetStatusDoc } from './status-doc.js';

/** Reconnect period of the fleet link while no duplicate is suspected. */
export const RECONNECT_MS = 2_000;
/** Wait before reconnecting once a duplicate is seen: 10 s, doubling with each connection that sees it again, up to 5 min, ±20 %. */
const DUPLICATE_BACKOFF: BackoffPolicy = { initialMs: 10_000, maxMs: 5 * 60_000, factor: 2, jitterRatio: 0.2 };
/** Connected this long without a new sign of the other gateway: the duplicate is considered gone. Longer than the longest backoff, so a twin that waits is not forgotten. */
const DUPLICATE_CLEAR_MS = 15 * 60_000;
/** MQTT 5 DISCONNECT reason code "Session taken over" (MQTT 5 §3.14.2.1). */
export const SESSION_TAKEN_OVER = 0x8e;

/**
 * Two gateways with the same gateway.name write the same topics and, with the default client id,
 * knock each other off the broker in turn: the broker closes the older connection when the same
 * client id connects again (MQTT 3.1.1 §3.1.4, MQTT 5 session takeover), and each reconnects
 * 2 s later. This notices it and says so, and calms the ping-pong:
 *
 * - every gateway process has a random instance id, carried in its status documents and will;
 * - the link subscribes to its own status topic. A status there from another instance (online, or
 *   its will, which the broker publishes when it hands the connection over) is a twin if it arrived
 *   live after this process's own status was acknowledged, or retained on a connection after the
 *   one where that happened (a predecessor's retained status or will, seen at the first connection
 *   after a restart, never counts: it was published before ours);
 * - on MQTT 5, a DISCONNECT with reason 0x8E (session taken over) is a twin too;
 * - then: an error naming the name (and from then on once a minute), the finding in the status
 *   and the published status document, and the reconnect period backs off from 2 s to 10 s,
 *   doubling with each connection that sees the twin again, up to 5 min (±20 % jitter, so the
 *   two drift apart). After 15 min connected without a new sign it is cleared.
 */
export class DuplicateNameWatch {
  private connection = 0;
  private connected = false;
  /** The connection number on which this process's own status was first acknowledged. */
  private ackedOn: number | null = null;
  private found: { since: number; detail: string; level: number; onConnection: number } | null = null;
  private clearTimer: NodeJS.Timeout | null = null;
  private readonly throttle: LogThrottle;

  constructor(
    private readonly o: {
      gateway: string;
      clientId: string;
      instance: string;
      clock: Clock;
      logger: Logger;
      /** Called whenever the reconnect period to use changes. */
      onReconnectPeriod: (ms: number) => void;
      random?: () => number;
    },
  ) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  /** What was seen, while a twin is suspected; else null. */
  get detail(): string | null {
    return this.found?.detail ?? null;
  }

  get since(): number | null {
    return this.found?.since ?? null;
  }

  onConnected(): void {
    this.connection += 1;
    this.connected = true;
    if (this.found) this.armClear();
  }

  onClosed(): void {
    this.connected = false;
    if (this.clearTimer) clearTimeout(this.clearTimer);
    this.clearTimer = null;
  }

  /** The broker acknowledged one of this process's own status messages (PUBACK). */
  onOwnStatusAcked(): void {
    if (this.ackedOn === null) this.ackedOn = this.connection;
  }

  /** A status document on this gateway's own status topic; `retained`: the RETAIN flag (sent because of a new subscription, §3.3.1.3). */
  onOwnStatus(doc: FleetStatusDoc, retained: boolean): void {
    if (doc.instance === this.o.instance || this.ackedOn === null) return;
    if (retained && this.ackedOn >= this.connection) return;
    // Any state: when the broker hands the connection to the twin it publishes our twin's will, so
    // what we find on reconnecting is often its `offline`, published after our own status.
    const who = doc.instance ? `instance ${doc.instance}` : 'a gateway version without instance ids';
    this.report(`another process publishes the status of "${this.o.gateway}" on the plant broker (${who}, ${doc.state}; this one is ${this.o.instance})`);
  }

  /** MQTT 5: the broker closed this connection with reason 0x8E, another client connected with our client id. */
  onTakenOver(): void {
    this.report(`the plant broker closed this connection because another client connected with the same client id "${this.o.clientId}" (MQTT 5 reason 0x8E, session taken over)`);
  }

  stop(): void {
    if (this.clearTimer) clearTimeout(this.clearTimer);
    this.clearTimer = null;
  }

  private report(detail: string): void {
    const first = this.found === null;
    if (!this.found) this.found = { since: this.o.clock.now(), detail, level: 0, onConnection: -1 };
    this.found.detail = detail;
    // One step per connection that sees the twin, however many signs it sees.
    if (this.found.onConnection !== this.connection) {
      this.found.level += 1;
      this.found.onConnection = this.connection;
    }
    const waitMs = this.reconnectPeriod();
    this.o.onReconnectPeriod(waitMs);
    const fields = { gateway: this.o.gateway, client_id: this.o.clientId, instance: this.o.instance, reconnect_after_ms: waitMs, detail };
    const message = `two gateways use the name "${this.o.gateway}" on the plant broker: ${detail}. They overwrite each other's fleet status and take the broker connection from each other in turn (same client id, MQTT 3.1.1 §3.1.4). Give each gateway its own gateway.name. Until then this one waits ${Math.round(waitMs / 1000)} s before reconnecting`;
    if (first) this.o.logger.error(fields, message);
    else this.throttle.error('duplicate-name', fields, message);
    if (this.connected) this.armClear();
  }

  private reconnectPeriod(): number {
    if (!this.found) return RECONNECT_MS;
    return backoffDelay(DUPLICATE_BACKOFF, this.found.level, this.o.random);
  }

  private armClear(): void {
    if (this.clearTimer) clearTimeout(this.clearTimer);
    this.clearTimer = setTimeout(() => {
      this.clearTimer = null;
      if (!this.found) return;
      this.o.logger.info({ gateway: this.o.gateway }, `no sign of another gateway named "${this.o.gateway}" for ${DUPLICATE_CLEAR_MS / 60_000} min: reconnecting every ${RECONNECT_MS / 1000} s again`);
      this.found = null;
      this.o.onReconnectPeriod(RECONNECT_MS);
    }, DUPLICATE_CLEAR_MS);
    this.clearTimer.unref();
  }
}
