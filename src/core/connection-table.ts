import { remoteKey } from './remote-address.js';

/**
 * How many connections a listener holds, in all and per remote address (remote-address.ts: an
 * IPv4 address or an IPv6 /64). "Pending" connections are those that have not yet shown they are
 * wanted: an MQTT connection before its CONNECT passed authentication, an HTTP connection between
 * requests or before its headers are complete. Every limit is at least 1.
 */
export interface TableLimits {
  /** Connections in all. */
  max: number;
  /** Connections of one address. */
  maxPerAddress: number;
  /** Pending connections in all. */
  maxPending: number;
  /** Pending connections of one address. */
  maxPendingPerAddress: number;
}

/**
 * Which limit turned a connection away or closed one: `address` (maxPerAddress), `address_pending`
 * (maxPendingPerAddress), `total` (max), `pending` (maxPending).
 */
export type TableLimit = 'address' | 'address_pending' | 'total' | 'pending';

/** A connection closed to make room, with the limit that closed it; the table has already forgotten it. */
export interface Shed<C> {
  conn: C;
  address: string;
  limit: TableLimit;
}

export type Admission<C> = { admitted: true; address: string; shed: Shed<C>[] } | { admitted: false; address: string; limit: TableLimit };

interface Group<C> {
  total: number;
  /** Pending connections, oldest first (a Map keeps insertion order), with the order they became pending in. */
  pending: Map<C, number>;
}

/**
 * The connections of one listener, counted per remote address, so that a flood from one address
 * costs that address and not the others. A newcomer arrives pending and is admitted by these
 * rules, in order:
 *
 * 1. Its address holds maxPerAddress: that address's oldest pending connection is closed for it,
 *    or, when all of them are settled (authenticated, in a request), the newcomer is refused.
 * 2. Its address holds maxPendingPerAddress pending ones: that address's oldest is closed.
 * 3. The listener holds max: the oldest pending connection of the address holding the most is
 *    closed; the newcomer is refused only when no connection is pending.
 * 4. The listener holds maxPending pending ones: the oldest of the address with the most pending
 *    is closed.
 *
 * So pending connections never keep a settled one out, and whoever opens the most pays first:
 * a PLC sending CONNECT or a health check sending its request is never the one closed while
 * another address holds more. Shed connections leave the table at once (the caller destroys
 * them; their later 'close' finds nothing to remove), so a burst of newcomers cannot overshoot.
 */
export class ConnectionTable<C> {
  private readonly entries = new Map<C, { address: string; pending: boolean }>();
  private readonly groups = new Map<string, Group<C>>();
  private pendingCount = 0;
  /** Orders pending connections across addresses (who has waited longest). */
  private seq = 0;

  constructor(readonly limits: TableLimits) {}

  get size(): number {
    return this.entries.size;
  }

  get pending(): number {
    return this.pendingCount;
  }

  /** Addresses holding connections now. */
  get addresses(): number {
    return this.groups.size;
  }

  /** Connections of one remote address (raw, as the socket reports it). */
  heldBy(remote: string | undefined): number {
    return this.groups.get(remoteKey(remote))?.total ?? 0;
  }

  connections(): IterableIterator<C> {
    return this.entries.keys();
  }

  has(conn: C): boolean {
    return this.entries.has(conn);
  }

  /** Admits `conn` from `remote` as pending, closing others by the rules above; or refuses it. */
  admit(conn: C, remote: string | undefined): Admission<C> {
    const address = remoteKey(remote);
    const l = this.limits;
    const shed: Shed<C>[] = [];
    const own = this.groups.get(address);
    // A per-address limit at or above its overall one never applies first: the overall rule names the limit reached.
    if (own && own.total >= l.maxPerAddress && l.maxPerAddress < l.max) {
      if (own.pending.size === 0) return { admitted: false, address, limit: 'address' };
      shed.push(this.shedOldest(address, own, 'address'));
    } else if (own && own.pending.size >= l.maxPendingPerAddress && l.maxPendingPerAddress < l.maxPending) {
      shed.push(this.shedOldest(address, own, 'address_pending'));
    }
    if (this.entries.size >= l.max) {
      const victim = this.heaviest((g) => g.total);
      // Rules 1 and 2 closed one of the newcomer's own address when they applied, so here nothing was shed yet.
      if (!victim) return { admitted: false, address, limit: 'total' };
      shed.push(this.shedOldest(victim[0], victim[1], 'total'));
    } else if (this.pendingCount >= l.maxPending) {
      const victim = this.heaviest((g) => g.pending.size);
      if (victim) shed.push(this.shedOldest(victim[0], victim[1], 'pending'));
    }
    this.entries.set(conn, { address, pending: true });
    const group = this.groups.get(address) ?? { total: 0, pending: new Map<C, number>() };
    this.groups.set(address, group);
    group.total += 1;
    group.pending.set(conn, this.seq++);
    this.pendingCount += 1;
    return { admitted: true, address, shed };
  }

  /** `conn` showed it is wanted (authenticated, started a request): no longer closed for others. */
  settle(conn: C): void {
    const e = this.entries.get(conn);
    if (!e || !e.pending) return;
    e.pending = false;
    this.groups.get(e.address)!.pending.delete(conn);
    this.pendingCount -= 1;
  }

  /** `conn` is pending again (an HTTP connection between requests), counted as the newest. */
  unsettle(conn: C): void {
    const e = this.entries.get(conn);
    if (!e || e.pending) return;
    e.pending = true;
    this.groups.get(e.address)!.pending.set(conn, this.seq++);
    this.pendingCount += 1;
  }

  isPending(conn: C): boolean {
    return this.entries.get(conn)?.pending === true;
  }

  /** Forgets `conn` (it closed); false when it was not in the table (shed, or never admitted). */
  remove(conn: C): boolean {
    const e = this.entries.get(conn);
    if (!e) return false;
    this.entries.delete(conn);
    const g = this.groups.get(e.address)!;
    g.total -= 1;
    if (e.pending) {
      g.pending.delete(conn);
      this.pendingCount -= 1;
    }
    if (g.total === 0) this.groups.delete(e.address);
    return true;
  }

  clear(): void {
    this.entries.clear();
    this.groups.clear();
    this.pendingCount = 0;
  }

  /** The address with the largest `weight` among those holding a pending connection; ties go to the longest-waiting. */
  private heaviest(weight: (g: Group<C>) => number): [string, Group<C>] | null {
    let best: [string, Group<C>] | null = null;
    for (const entry of this.groups) {
      if (entry[1].pending.size === 0) continue;
      const w = weight(entry[1]);
      const b = best ? weight(best[1]) : -1;
      if (w > b || (w === b && oldestSeq(entry[1]) < oldestSeq(best![1]))) best = entry;
    }
    return best;
  }

  private shedOldest(address: string, group: Group<C>, limit: TableLimit): Shed<C> {
    const conn = group.pending.keys().next().value as C;
    this.remove(conn);
    return { conn, address, limit };
  }
}

function oldestSeq<C>(g: Group<C>): number {
  return g.pending.values().next().value as number;
}
