/**
 * Budget sharing as it was before issue 21 §5 (commit 644891a), kept only as the baseline of the
 * recompute-cost part of bench/fleet-budget.ts: every announcement that is new or changes a
 * demand recomputes the division over the whole table (a sort of every peer), and every peer
 * counts, so 300 fake peers cut a share of 1,400/min to 5/min and 15,000 cost O(N² log N).
 * The table and the division only (no ticks, no 429s): what the benchmark exercises. Not used by
 * the gateway.
 */
import type { Clock } from '../src/core/clock.js';
import type { RequestBudget } from '../src/uplink/budget.js';
import type { Announcement, ShareChannel } from '../src/uplink/budget-sharing.js';
import { fairShares } from '../src/uplink/fair-share.js';

const STARTUP_FRACTION = 1 / 8;
const ALONE_AFTER_MS = 10_000;

export class FormerBudgetSharing {
  private readonly peers = new Map<string, { demand: number; expiresAt: number }>();
  private readonly startedAt: number;
  private unsubscribe: (() => void) | null = null;
  private readonly demand: number;

  constructor(private readonly o: { budget: RequestBudget; channel: ShareChannel; self: string; group: string; totalPerMinute: number; clock: Clock }) {
    this.startedAt = o.clock.monotonic();
    this.demand = o.totalPerMinute;
  }

  start(): void {
    this.unsubscribe = this.o.channel.onPeer((name, a) => this.onPeer(name, a));
    this.recompute();
  }

  stop(): void {
    this.unsubscribe?.();
  }

  members(): number {
    return 1 + this.peers.size;
  }

  private onPeer(name: string, a: Announcement | null): void {
    if (name === this.o.self) return;
    if (a === null || a.group !== this.o.group) {
      if (this.peers.delete(name)) this.recompute();
      return;
    }
    const before = this.peers.get(name);
    this.peers.set(name, { demand: a.demand_per_min, expiresAt: this.o.clock.monotonic() + a.lease_ms });
    if (!before || before.demand !== a.demand_per_min) this.recompute();
  }

  private *livePeers(): Iterable<[string, { demand: number; expiresAt: number }]> {
    const now = this.o.clock.monotonic();
    for (const [name, p] of this.peers) {
      if (p.expiresAt < now && this.o.channel.connected) {
        this.peers.delete(name);
        continue;
      }
      yield [name, p];
    }
  }

  private recompute(): void {
    const now = this.o.clock.monotonic();
    const total = this.o.totalPerMinute;
    let share: number;
    if (!this.o.channel.synced && now - this.startedAt < ALONE_AFTER_MS && this.peers.size === 0) {
      share = total * STARTUP_FRACTION;
    } else {
      const members = [{ name: this.o.self, demand: this.demand }, ...[...this.livePeers()].map(([name, p]) => ({ name, demand: p.demand }))];
      share = fairShares(total, members).get(this.o.self) ?? total * STARTUP_FRACTION;
    }
    this.o.budget.setRate(Math.max(1, share));
  }
}
