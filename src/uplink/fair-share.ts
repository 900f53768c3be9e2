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
