import { parseState, stateTopic } from '../sources/mqtt/primary-host.js';

/**
 * What a simulated Sparkplug B 3.0 edge node configured with a Primary Host id makes of the host's
 * STATE messages (spec chapter 5 "Operational Behavior", "Edge Node Session Establishment" and
 * "Sparkplug Host Application Session Termination"):
 *
 * - it publishes its BIRTH only after an online:true STATE (tck-id-operational-behavior-edge-node-birth-sequence-wait);
 * - an offline STATE whose timestamp is older than the last online one is ignored: it is the Will
 *   of a connection the host has already replaced (tck-id-operational-behavior-edge-node-termination-host-offline-timestamp);
 * - an online STATE with a newer timestamp while the host was thought online is a new host session
 *   whose offline the node missed: the host has no alias table for this node any more, so the node
 *   births again.
 *
 * The spec has an edge node end its MQTT session when its Primary Host goes offline and look for
 * another server (tck-id-operational-behavior-edge-node-termination-host-offline); with the one
 * broker of the demo and the benches, the simulated nodes stay connected and only stop publishing,
 * which the host cannot tell apart.
 */
export class PrimaryHostWatch {
  readonly topic: string;
  private online = false;
  private lastTimestamp = -Infinity;

  constructor(hostId: string) {
    this.topic = stateTopic(hostId);
  }

  get hostOnline(): boolean {
    return this.online;
  }

  /** The edge node's own MQTT session ended: the next online STATE (even the same, retained one) means birth again. */
  sessionLost(): void {
    this.online = false;
  }

  /** 'online': (re)birth now and forward what was stored; 'offline': store from now on; null: nothing changes. */
  onState(payload: Buffer): 'online' | 'offline' | null {
    const s = parseState(payload);
    if (s === null || s.timestamp < this.lastTimestamp) return null;
    if (s.online) {
      const newSession = !this.online || s.timestamp > this.lastTimestamp;
      this.online = true;
      this.lastTimestamp = s.timestamp;
      return newSession ? 'online' : null;
    }
    this.lastTimestamp = s.timestamp;
    if (!this.online) return null;
    this.online = false;
    return 'offline';
  }
}
