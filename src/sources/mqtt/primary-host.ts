/**
 * The Sparkplug B 3.0 Primary Host Application's STATE messages (spec chapter 4 "Topics and
 * Messages", section "Sparkplug Host Application", and chapter 5 "Operational Behavior", "Host
 * Application Session Establishment"). The clauses are cited by their tck-id. Only the payloads and
 * the rules live here; remote-connection.ts sends them.
 *
 * Why a gateway wants this: an edge node configured with a Primary Host id publishes its BIRTH and
 * its data only while that host's STATE says online (tck-id-operational-behavior-edge-node-birth-sequence-wait),
 * and keeps its values (store and forward, sent later as is_historical metrics) while it says
 * offline. Without STATE, the values an edge node publishes at QoS 0 while the gateway is down are
 * lost at the broker.
 */

/** Why a host id cannot be used, or null. It is the last level of spBv1.0/STATE/<host id>. */
export function hostIdProblem(id: string): string | null {
  if (id.length === 0) return 'is empty; set the Sparkplug Host Application id (the last level of spBv1.0/STATE/<host id>)';
  // tck-id-host-topic-phid-birth-topic: the topic is spBv1.0/STATE/sparkplug_host_id, one level; like
  // the other Sparkplug ids it must not hold the MQTT reserved characters + / # (spec chapter 4,
  // "Topic Namespace Elements"). U+0000 is not allowed in any MQTT topic (MQTT 3.1.1 §4.7.3).
  const bad = [...new Set([...id].filter((ch) => ch === '/' || ch === '+' || ch === '#' || ch === '\u0000'))];
  if (bad.length > 0) return `contains ${bad.map((c) => (c === '\u0000' ? 'U+0000' : `"${c}"`)).join(', ')}: a host id is one topic level (spBv1.0/STATE/<host id>) and must not contain "/", "+", "#" or U+0000`;
  if (Buffer.byteLength(id, 'utf8') > 65_000) return 'is too long for an MQTT topic';
  return null;
}

/** tck-id-host-topic-phid-birth-topic, tck-id-host-topic-phid-death-topic. */
export function stateTopic(hostId: string): string {
  return `spBv1.0/STATE/${hostId}`;
}

/**
 * tck-id-host-topic-phid-birth-payload / -death-payload: UTF-8 JSON with exactly "online" (boolean)
 * and "timestamp" (UTC epoch milliseconds); Sparkplug B protobuf is not used for STATE.
 */
export function statePayload(online: boolean, timestamp: number): Buffer {
  return Buffer.from(JSON.stringify({ online, timestamp }), 'utf8');
}

export interface StateMessage {
  online: boolean;
  timestamp: number;
}

/** A STATE payload, or null when it is not one (anything a client publishes on the topic may arrive here). */
export function parseState(payload: Buffer): StateMessage | null {
  try {
    const v = JSON.parse(payload.toString('utf8')) as unknown;
    if (typeof v !== 'object' || v === null) return null;
    const { online, timestamp } = v as Record<string, unknown>;
    if (typeof online !== 'boolean' || typeof timestamp !== 'number' || !Number.isFinite(timestamp)) return null;
    return { online, timestamp };
  } catch {
    return null;
  }
}

/**
 * One network connection's STATE session: the timestamp t chosen when the CONNECT is built goes
 * into the Will (death) and into every birth of that connection.
 */
export class PrimaryHostSession {
  readonly topic: string;
  /** Set once the birth went out on this connection; until then nothing else is published (NCMD). */
  born = false;

  constructor(hostId: string, readonly timestamp: number) {
    this.topic = stateTopic(hostId);
  }

  /**
   * The MQTT Will of the CONNECT packet: tck-id-host-topic-phid-death-required (a Will is MUST),
   * -death-qos (1), -death-retain (true), -death-payload-timestamp-connect (the time the CONNECT is sent).
   */
  will(): { topic: string; payload: Buffer; qos: 1; retain: true } {
    return { topic: this.topic, payload: statePayload(false, this.timestamp), qos: 1, retain: true };
  }

  /**
   * The birth: tck-id-host-topic-phid-birth-qos (1), -birth-retain (true), and
   * tck-id-host-topic-phid-birth-payload-timestamp: the same timestamp as the Will of this CONNECT.
   * An edge node takes an offline STATE as real only when its timestamp is not older than the last
   * online one it saw (tck-id-operational-behavior-edge-node-termination-host-offline-timestamp), so
   * the Will stays effective after every birth of this connection.
   */
  birth(): Buffer {
    return statePayload(true, this.timestamp);
  }

  /**
   * tck-id-message-flow-hid-sparkplug-state-message-delivered: once its birth is out, a host that is
   * delivered an online:false STATE for its own id MUST republish its birth at once, with the
   * timestamp of its current CONNECT Will. That covers a forged or mistaken offline and the Will of
   * this host's previous connection, which the broker publishes when the new connection takes the
   * client id over and which would otherwise replace the retained birth.
   */
  mustRepublish(payload: Buffer): boolean {
    if (!this.born) return false;
    const s = parseState(payload);
    return s !== null && !s.online;
  }
}
