/**
 * Max-min fair division of one address's request budget among the gateways behind it (issue 17).
 * A pure function of the member table, so every gateway that sees the same table computes the
 * same division without anyone coordinating: no member ever needs to tell another its share.
 *
 * - Members that want less than an equal split get what they want; what they leave is split among
 *   the others, repeatedly (water filling).
 * - When everyone together wants less than the budget, each gets its demand plus an equal part of
 *   the rest, so a quiet gateway can answer a burst (an annotation, a poll) at once.
 */
export interface Member {
  name: string;
  /** Requests per minute it would use if unconstrained (its ceiling when it has a backlog). */
  demand: number;
}

export function fairShares(budget: number, members: readonly Member[]): Map<string, number> {
  const out = new Map<string, number>();
  if (members.length === 0) return out;
  // Sorted by demand then name, so every member computes the same result from the same table.
  const sorted = [...members].sort((a, b) => a.demand - b.demand || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const totalDemand = sorted.reduce((n, m) => n + Math.max(0, m.demand), 0);
  if (totalDemand <= budget) {
    const spare = (budget - totalDemand) / sorted.length;
    for (const m of sorted) out.set(m.name, Math.max(0, m.demand) + spare);
    return out;
  }
  let left = budget;
  let count = sorted.length;
  for (const m of sorted) {
    const level = left / count;
    const share = Math.min(Math.max(0, m.demand), level);
    out.set(m.name, share);
    left -= share;
    count -= 1;
  }
  return out;
}

/**
 * Additive increase, multiplicative decrease of a factor in (floor, 1] applied to the fair share:
 * the safety net for what the member table does not know (another client behind the same address,
 * a gateway that cannot reach the broker). A 429 cuts the factor at most once per `holdMs` (one
 * burst of 429s is one signal, as in TCP's one reduction per window); every `tick` adds `step` back.
 */
export class AimdFactor {
  private value = 1;
  private lastCut = -Infinity;

  constructor(private readonly o: { decrease: number; step: number; floor: number; holdMs: number } = { decrease: 0.7, step: 0.05, floor: 0.1, holdMs: 5_000 }) {}

  get factor(): number {
    return this.value;
  }

  /** A 429 arrived at monotonic time `now`. Returns true when the factor was cut. */
  cut(now: number): boolean {
    if (now - this.lastCut < this.o.holdMs) return false;
    this.lastCut = now;
    this.value = Math.max(this.o.floor, this.value * this.o.decrease);
    return true;
  }

  /** One quiet interval passed: recover a step (not within `holdMs` of a cut). */
  tick(now: number): void {
    if (now - this.lastCut < this.o.holdMs) return;
    this.value = Math.min(1, this.value + this.o.step);
  }
}
