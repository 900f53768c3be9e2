/**
 * An outage of the tracking service as the operator lives it: since when it is unreachable, how
 * large the backlog and how old its oldest sample grew meanwhile, and how long the catch-up took
 * once it was back (until the buffer is back to its live tail). Fed once a second with what the
 * uplink health and the buffer say (runtime/stages/uplink.ts); the console, `/status` and
 * `edge-gateway status` show the outage in progress or the last one.
 */
export interface OutageView {
  /** down: unreachable now; catching_up: reachable again, the backlog not yet back to the live tail; over. */
  state: 'down' | 'catching_up' | 'over';
  /** ISO times: unreachable since, reachable again at, caught up at. */
  since: string;
  until: string | null;
  caught_up_at: string | null;
  /** Why it was unreachable (the last failure). */
  reason: string;
  /** Largest backlog and oldest unsent sample's age during the outage and the catch-up. */
  backlog_peak: number;
  oldest_age_peak_s: number | null;
  /** Backlog when the service came back. */
  backlog_at_return: number | null;
  /** Seconds from the service's return to the live tail (null while catching up). */
  catch_up_s: number | null;
}

/** The buffer is back to its live tail when its oldest unsent sample is at most this old... */
const LIVE_TAIL_AGE_S = 3;

interface Tick {
  /** Wall-clock ms. */
  now: number;
  unreachable: boolean;
  /** Wall-clock ms the current condition began, and why. */
  since: number;
  reason: string;
  backlog: number;
  oldestAgeS: number | null;
}

export class OutageTracker {
  private view: OutageView | null = null;
  /** Oldest unsent age when the outage began: the tail the catch-up returns to. */
  private tailAgeS = 0;
  private returnedAt = 0;

  update(t: Tick): void {
    const v = this.view;
    if (t.unreachable) {
      if (!v || v.state !== 'down') {
        this.tailAgeS = t.oldestAgeS ?? 0;
        this.view = { state: 'down', since: new Date(t.since).toISOString(), until: null, caught_up_at: null, reason: t.reason, backlog_peak: t.backlog, oldest_age_peak_s: t.oldestAgeS, backlog_at_return: null, catch_up_s: null };
      } else v.reason = t.reason;
      this.peaks(t);
      return;
    }
    if (!v || v.state === 'over') return;
    if (v.state === 'down') {
      v.state = 'catching_up';
      v.until = new Date(t.now).toISOString();
      v.backlog_at_return = t.backlog;
      this.returnedAt = t.now;
    }
    this.peaks(t);
    const tail = Math.max(LIVE_TAIL_AGE_S, this.tailAgeS + 1);
    if (t.backlog === 0 || (t.oldestAgeS !== null && t.oldestAgeS <= tail)) {
      v.state = 'over';
      v.caught_up_at = new Date(t.now).toISOString();
      v.catch_up_s = Math.max(0, (t.now - this.returnedAt) / 1000);
    }
  }

  /** The outage in progress, or the last one. */
  snapshot(): OutageView | null {
    return this.view && { ...this.view };
  }

  private peaks(t: Tick): void {
    const v = this.view!;
    v.backlog_peak = Math.max(v.backlog_peak, t.backlog);
    if (t.oldestAgeS !== null) v.oldest_age_peak_s = Math.max(v.oldest_age_peak_s ?? 0, Math.round(t.oldestAgeS * 10) / 10);
  }
}
