/**
 * What a Sparkplug host application has to remember about each edge node (Sparkplug B 3.0,
 * chapter 5 "Operational Behavior" and chapter 6 "Payloads"):
 *
 * - the alias table from NBIRTH and DBIRTH. Aliases are unique across the edge node and all its
 *   devices, and NDATA/DDATA may carry only the alias, so data can be read only after the BIRTH;
 * - the bdSeq of the NBIRTH, to tell whether an NDEATH (the broker's Will, which may arrive late)
 *   ends the current session or an earlier one ("Edge Node Session Establishment");
 * - the message sequence number `seq` (0-255, wrapping) to notice lost or reordered messages
 *   ("Sparkplug Host Application Message Ordering").
 */

export interface AliasEntry {
  name: string;
  /** null for the edge node's own metrics. */
  device: string | null;
}

export interface DeviceState {
  online: boolean;
  since: number;
}

export class EdgeNodeState {
  /** True between an NBIRTH and the NDEATH of the same session. */
  born = false;
  online = false;
  bdSeq: number | null = null;
  lastSeq: number | null = null;
  /** Sequence numbers skipped over, with when the gap was noticed (monotonic ms). */
  readonly missing = new Map<number, number>();
  readonly aliases = new Map<number, AliasEntry>();
  readonly devices = new Map<string, DeviceState>();
  births = 0;
  lastBirthAt: number | null = null;
  unknownAliases = 0;
  seqGaps = 0;
  /** Monotonic ms of the last Rebirth request sent for this node. */
  lastRebirthRequest: number | null = null;
  rebirthRequests = 0;
  /**
   * Origin numbers of this edge node and of each of its devices (Decoded.origin): what an NDEATH or
   * a DDEATH makes stale. Kept across sessions, so a variable delivered before a rebirth still goes
   * stale with the next death.
   */
  readonly deviceOrigins = new Map<string, number>();

  constructor(
    readonly group: string,
    readonly edgeNode: string,
    readonly origin = 0,
    private readonly newOrigin: () => number = () => 0,
  ) {}

  deviceOrigin(device: string): number {
    let o = this.deviceOrigins.get(device);
    if (o === undefined) this.deviceOrigins.set(device, (o = this.newOrigin()));
    return o;
  }

  /** NBIRTH: a new session; everything learned before is void, devices must send DBIRTH again. */
  birth(bdSeq: number | null, seq: number | null, at: number): void {
    this.born = true;
    this.online = true;
    this.bdSeq = bdSeq;
    this.lastSeq = seq;
    this.missing.clear();
    this.aliases.clear();
    this.devices.clear();
    this.births += 1;
    this.lastBirthAt = at;
  }

  /** NDEATH of the current session (or of an unknown one): the node and its devices are offline. */
  death(): void {
    this.born = false;
    this.online = false;
    this.lastSeq = null;
    this.missing.clear();
    this.aliases.clear();
    for (const d of this.devices.values()) d.online = false;
  }

  deviceBirth(device: string, at: number): void {
    this.forgetDeviceAliases(device);
    this.devices.set(device, { online: true, since: at });
  }

  deviceDeath(device: string, at: number): void {
    this.forgetDeviceAliases(device);
    this.devices.set(device, { online: false, since: at });
  }

  private forgetDeviceAliases(device: string): void {
    for (const [alias, entry] of this.aliases) if (entry.device === device) this.aliases.delete(alias);
  }

  /**
   * Records `seq` of a message after NBIRTH and returns the sequence numbers it skipped over
   * (empty when it is the expected next one). A late message fills its gap.
   */
  observeSeq(seq: number, now: number): number[] {
    if (this.missing.delete(seq)) return [];
    if (this.lastSeq === null) {
      this.lastSeq = seq;
      return [];
    }
    const expected = (this.lastSeq + 1) % 256;
    const skipped: number[] = [];
    if (seq !== expected) {
      // Count forward from the expected number; more than 128 ahead is read as a late (old) message.
      const distance = (seq - expected + 256) % 256;
      if (distance > 128) return [];
      for (let s = expected; s !== seq; s = (s + 1) % 256) {
        skipped.push(s);
        this.missing.set(s, now);
      }
      this.seqGaps += 1;
    }
    this.lastSeq = seq;
    return skipped;
  }

  /** True when a skipped message is still missing after `timeoutMs` (the Reorder Timeout). */
  gapExpired(now: number, timeoutMs: number): boolean {
    for (const since of this.missing.values()) if (now - since >= timeoutMs) return true;
    return false;
  }

  clearGaps(): void {
    this.missing.clear();
  }

  summary(): Record<string, unknown> {
    return {
      group: this.group,
      edge_node: this.edgeNode,
      online: this.online,
      born: this.born,
      bd_seq: this.bdSeq,
      births: this.births,
      last_birth_at: this.lastBirthAt === null ? null : new Date(this.lastBirthAt).toISOString(),
      aliases: this.aliases.size,
      devices: Object.fromEntries([...this.devices].map(([id, d]) => [id, d.online ? 'online' : 'offline'])),
      unknown_aliases: this.unknownAliases,
      seq_gaps: this.seqGaps,
      rebirth_requests: this.rebirthRequests,
    };
  }
}

/** Edge nodes by `group/edge_node`, bounded so a misbehaving network cannot grow it forever. */
export class EdgeNodeTable {
  private readonly nodes = new Map<string, EdgeNodeState>();

  constructor(
    private readonly newOrigin: () => number = () => 0,
    private readonly maxNodes = 10_000,
  ) {}

  get(group: string, edgeNode: string): EdgeNodeState | undefined {
    return this.nodes.get(`${group}/${edgeNode}`);
  }

  getOrCreate(group: string, edgeNode: string): EdgeNodeState {
    const key = `${group}/${edgeNode}`;
    let n = this.nodes.get(key);
    if (!n) {
      if (this.nodes.size >= this.maxNodes) {
        const oldest = this.nodes.keys().next().value;
        if (oldest !== undefined) this.nodes.delete(oldest);
      }
      n = new EdgeNodeState(group, edgeNode, this.newOrigin(), this.newOrigin);
      this.nodes.set(key, n);
    }
    return n;
  }

  get size(): number {
    return this.nodes.size;
  }

  all(): IterableIterator<EdgeNodeState> {
    return this.nodes.values();
  }
}
