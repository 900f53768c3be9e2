import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Metrics } from '../core/metrics.js';
import type { RequestBudget } from './budget.js';
import { fairShares } from './fair-share.js';

/**
 * Sharing one address's request budget among the gateways behind it (issue 17; interface §8: the
 * service limits requests per IP, all endpoints together) without a coordinator of our own.
 *
 * Each gateway announces its demand on the plant's MQTT broker (retained, refreshed every
 * `intervalMs`, valid for `leaseMs`) and reads everyone else's. Every member computes the same
 * max-min fair division of `totalPerMinute` from the same table (fair-share.ts) and paces its own
 * RequestBudget at its part. So:
 * - a gateway that joins announces itself, and the others shrink as soon as the broker delivers
 *   the announcement (milliseconds); the joiner starts small until it has read the table;
 * - one that stops withdraws its announcement (graceful) or its lease runs out / its last will
 *   says offline (crash), and the others grow at once;
 * - one that idles announces a small demand, and the others use what it leaves.
 * A 429 still arrives sometimes (another client behind the address, a table that is seconds out of
 * date): the share is a ceiling, and under it the budget's rate finder (rate-finder.ts) lowers the
 * pace from the service's answers and probes upward again, in this mode as in every other.
 * While the broker is unreachable the table is frozen (peers are not expired: they are still
 * there, we just cannot hear them), and the rate finder alone reacts.
 *
 * Anyone who may publish under the fleet prefix can announce demand under made-up names (issue 21
 * §5: 300 fakes cut a share of 1,400/min to 5/min, 15,000 stalled the gateway 21 s). So:
 * - at most `maxGateways` members are counted, this gateway included: the peers that have been in
 *   the table longest (incumbents keep their places; newcomers beyond the cap wait for a slot);
 * - the floor: this gateway's share is never below min(its demand, total / maxGateways), whatever
 *   the table says (a 429 still slows it down: the rate finder paces under the share);
 * - announcements only update the table (O(1) each); the division is recomputed at most once a
 *   second (RECOMPUTE_MIN_INTERVAL_MS; at once for an isolated change), and costs one pass over the table plus a sort of the counted
 *   members: O(N + M log M) per second, where it was O(N log N) per announcement.
 * The real fix for strangers on the broker is its ACL (docs/scale-out.md); these bound the damage.
 */

export interface Announcement {
  group: string;
  /** Requests per minute this gateway would use; `totalPerMinute` when it has more work than budget. */
  demand_per_min: number;
  /** How long this announcement stays valid without a refresh. */
  lease_ms: number;
}

/** The transport (src/fleet/ implements it over the plant's MQTT broker). */
export interface ShareChannel {
  /** Connected to the broker now. */
  readonly connected: boolean;
  /** Subscribed, and the retained announcements had time to arrive at least once. */
  readonly synced: boolean;
  /** Publishes this gateway's announcement; null withdraws it (graceful stop). */
  announce(a: Announcement | null): void;
  /** Calls `listener` for every peer announcement; null when the peer withdrew or went offline. Returns an unsubscribe. */
  onPeer(listener: (name: string, a: Announcement | null) => void): () => void;
}

export interface BudgetSharingOptions {
  budget: RequestBudget;
  channel: ShareChannel;
  self: string;
  group: string;
  /** The address's whole budget (uplink.requests_per_minute in fleet mode). */
  totalPerMinute: number;
  intervalMs: number;
  leaseMs: number;
  /** Most gateways of the group counted, this one included (uplink.budget_sharing.max_gateways). */
  maxGateways: number;
  clock: Clock;
  logger: Logger;
  metrics?: Metrics;
}

/** Share used before the member table has been read: small, so a joiner never causes a 429 wave. */
const STARTUP_FRACTION = 1 / 8;
/** Without a broker for this long after start, act alone (AIMD only). */
const ALONE_AFTER_MS = 10_000;
/** Smallest demand announced: enough for a token call, polls and an annotation now and then. */
const MIN_DEMAND_PER_MIN = 6;
/** Head room on measured use for an unsaturated gateway's demand. */
const DEMAND_HEADROOM = 1.5;
/** The division is recomputed at most this often, however fast announcements arrive. */
export const RECOMPUTE_MIN_INTERVAL_MS = 1_000;
/** Peers remembered beyond the counted ones (waiting for a slot); more are not even stored. */
const MAX_TRACKED_PEERS = 20_000;

interface Peer {
  demand: number;
  expiresAt: number;
}

export interface SharingStatus {
  group: string;
  total_per_minute: number;
  share_per_minute: number;
  demand_per_minute: number;
  /** The pace under the share: lower when the service's 429s found less room (rate-finder.ts). */
  pace_per_minute: number;
  /** The members counted (this gateway first), at most max_gateways. */
  members: Array<{ name: string; demand_per_minute: number }>;
  max_gateways: number;
  /** Live peers of the group beyond max_gateways, not counted (fake or misconfigured, or max_gateways too low). */
  ignored_peers: number;
  /** The least this gateway paces at (before the 429 factor): total / max_gateways, or its demand if lower. */
  floor_per_minute: number;
  broker_connected: boolean;
}

export class BudgetSharing {
  private readonly peers = new Map<string, Peer>();
  private readonly startedAt: number;
  private timer: NodeJS.Timeout | null = null;
  private unsubscribe: (() => void) | null = null;
  private recomputeTimer: NodeJS.Timeout | null = null;
  private lastRecomputeAt = -Infinity;
  private readonly throttle: LogThrottle;
  private demand: number;
  private lastTick: number;
  private lastGranted: number;
  private lastWaited: number;
  private stopped = false;

  constructor(private readonly o: BudgetSharingOptions) {
    this.startedAt = o.clock.monotonic();
    this.lastTick = this.startedAt;
    this.lastGranted = o.budget.totalGranted;
    this.lastWaited = o.budget.waitedTotalMs();
    // Until measured, assume there is work: a gateway with nothing to do says so one interval later.
    this.demand = o.totalPerMinute;
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
  }

  start(): void {
    if (this.timer || this.stopped) return;
    this.unsubscribe = this.o.channel.onPeer((name, a) => this.onPeer(name, a));
    this.recompute();
    this.o.channel.announce(this.announcement());
    this.timer = setInterval(() => this.tick(), this.o.intervalMs);
    this.timer.unref();
  }

  /** Withdraws this gateway's announcement, so the others take its share back at once. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.recomputeTimer) clearTimeout(this.recomputeTimer);
    this.recomputeTimer = null;
    this.unsubscribe?.();
    this.o.channel.announce(null);
  }

  status(): SharingStatus {
    const { counted, ignored } = this.table();
    return {
      group: this.o.group,
      total_per_minute: this.o.totalPerMinute,
      share_per_minute: Math.round(this.o.budget.sharePerMinute),
      demand_per_minute: Math.round(this.demand),
      pace_per_minute: Math.round(this.o.budget.ratePerMinute),
      members: [{ name: this.o.self, demand_per_minute: this.demand }, ...counted.map((m) => ({ name: m.name, demand_per_minute: m.demand }))],
      max_gateways: this.o.maxGateways,
      ignored_peers: ignored,
      floor_per_minute: Math.round(this.floor() * 100) / 100,
      broker_connected: this.o.channel.connected,
    };
  }

  private announcement() {
    return { group: this.o.group, demand_per_min: Math.round(this.demand), lease_ms: this.o.leaseMs };
  }

  private tick(): void {
    const now = this.o.clock.monotonic();
    const dt = now - this.lastTick;
    if (dt <= 0) return;
    const granted = this.o.budget.totalGranted;
    const waited = this.o.budget.waitedTotalMs();
    const usedPerMin = ((granted - this.lastGranted) / dt) * 60_000;
    // Saturated: calls waited for the budget a good part of the interval, or it used nearly all of it.
    const saturated = waited - this.lastWaited > 0.25 * dt || usedPerMin >= 0.85 * this.o.budget.ratePerMinute;
    this.lastTick = now;
    this.lastGranted = granted;
    this.lastWaited = waited;
    this.demand = saturated ? this.o.totalPerMinute : Math.min(this.o.totalPerMinute, Math.max(MIN_DEMAND_PER_MIN, Math.ceil(usedPerMin * DEMAND_HEADROOM)));
    this.requestRecompute();
    this.o.channel.announce(this.announcement());
  }

  /** O(1): only the table changes here; the division follows within RECOMPUTE_MIN_INTERVAL_MS. */
  private onPeer(name: string, a: Announcement | null): void {
    if (name === this.o.self) return;
    if (a === null || a.group !== this.o.group) {
      if (this.peers.delete(name)) this.requestRecompute();
      return;
    }
    const before = this.peers.get(name);
    if (!before && this.peers.size >= MAX_TRACKED_PEERS) return;
    // An existing key keeps its place in the Map's insertion order: its seniority (table()).
    this.peers.set(name, { demand: a.demand_per_min, expiresAt: this.o.clock.monotonic() + a.lease_ms });
    if (!before || before.demand !== a.demand_per_min) this.requestRecompute();
  }

  /**
   * The live peers, expired ones dropped (one pass, O(N)); the counted ones are the first
   * `maxGateways - 1` in the Map's insertion order, i.e. those present longest.
   */
  private table(): { counted: Array<{ name: string; demand: number }>; ignored: number } {
    const now = this.o.clock.monotonic();
    // While the broker is unreachable nobody can refresh a lease: keep the table as it was.
    const expire = this.o.channel.connected;
    const counted: Array<{ name: string; demand: number }> = [];
    let ignored = 0;
    for (const [name, p] of this.peers) {
      if (expire && p.expiresAt < now) {
        this.peers.delete(name);
        continue;
      }
      if (counted.length < this.o.maxGateways - 1) counted.push({ name, demand: p.demand });
      else ignored += 1;
    }
    return { counted, ignored };
  }

  /** total / maxGateways, or this gateway's demand when it wants less. */
  private floor(): number {
    return Math.min(this.demand, this.o.totalPerMinute / this.o.maxGateways);
  }

  /** Recomputes now if the last one is at least RECOMPUTE_MIN_INTERVAL_MS old, else once when it is. */
  private requestRecompute(): void {
    if (this.stopped || this.recomputeTimer) return;
    const wait = this.lastRecomputeAt + RECOMPUTE_MIN_INTERVAL_MS - this.o.clock.monotonic();
    if (wait <= 0) {
      this.recompute();
      return;
    }
    this.recomputeTimer = setTimeout(() => {
      this.recomputeTimer = null;
      this.recompute();
    }, wait);
    this.recomputeTimer.unref();
  }

  private recompute(): void {
    if (this.stopped) return;
    const now = this.o.clock.monotonic();
    this.lastRecomputeAt = now;
    const total = this.o.totalPerMinute;
    const { counted, ignored } = this.table();
    let share: number;
    if (!this.o.channel.synced && now - this.startedAt < ALONE_AFTER_MS && this.peers.size === 0) {
      share = total * STARTUP_FRACTION;
    } else {
      share = fairShares(total, [{ name: this.o.self, demand: this.demand }, ...counted]).get(this.o.self) ?? total * STARTUP_FRACTION;
    }
    share = Math.max(share, this.floor());
    const rate = Math.max(1, share);
    this.o.budget.setRate(rate);
    this.o.metrics?.uplinkBudgetShare.set(rate);
    this.o.metrics?.fleetBudgetMembers.set(1 + counted.length);
    this.o.metrics?.fleetBudgetIgnoredPeers.set(ignored);
    if (ignored > 0) {
      this.throttle.warn(
        'ignored',
        { group: this.o.group, max_gateways: this.o.maxGateways, ignored, floor_per_minute: Math.round(this.floor()) },
        `more gateways announce demand in group ${this.o.group} than uplink.budget_sharing.max_gateways (${this.o.maxGateways}): ${ignored} not counted, and this gateway paces at least at ${Math.round(this.floor())}/min. If they are real gateways raise max_gateways; if not, someone publishes fake announcements on the plant broker: restrict its ACL (docs/scale-out.md)`,
      );
    }
  }
}
