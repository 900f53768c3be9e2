/**
 * What a detector's machine-state variable said over time, as far as this gateway process saw it:
 * the timestamps where it switched between "down" (the rule's condition holds) and "running".
 * Used to flag an operator's downtime that the machine's own running signal contradicts.
 * Bounded: the oldest switches are forgotten first, and then nothing before the
 * oldest one kept is known.
 */
export class StateTimeline {
  /** Sample timestamps where the state changed, with the new state; ascending. */
  private readonly switches: Array<{ ts: number; down: boolean }> = [];
  /** Nothing is known before this (the first sample seen, or the oldest switch kept). */
  private knownFrom = Infinity;

  constructor(private readonly maxSwitches = 10_000) {}

  /** One sample (in timestamp order; the detector drops older ones). */
  record(ts: number, down: boolean): void {
    const last = this.switches[this.switches.length - 1];
    if (last === undefined) {
      this.knownFrom = ts;
      this.switches.push({ ts, down });
      return;
    }
    if (last.down === down) return;
    this.switches.push({ ts, down });
    if (this.switches.length > this.maxSwitches) {
      this.switches.shift();
      this.knownFrom = this.switches[0].ts;
    }
  }

  /**
   * true: the variable said "running" from before `from` until `to` without a single "down" sample;
   * false: it said "down" at some moment of [from, to]; null: the gateway did not see the state at
   * `from` (it started later, or forgot).
   */
  runningThroughout(from: number, to: number): boolean | null {
    if (from < this.knownFrom) return null;
    let state: boolean | null = null;
    for (const s of this.switches) {
      if (s.ts <= from) state = s.down;
      else if (s.ts <= to) {
        if (s.down) return false;
      } else break;
    }
    if (state === null) return null;
    return !state;
  }
}
