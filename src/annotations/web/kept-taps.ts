// A tile's taps the gateway did not answer: kept on the panel, sent in order once it answers again.
import { useEffect, useRef, useState } from 'preact/hooks';
import { getDraft, setDraft, downtimePath } from './requests.js';
import { loadTaps, pendingDowntimeId, saveTaps, tapBody, type PendingTap } from './pending.js';

/** What a write came to: done, waiting for the token, no answer (keep the tap), or refused with a message. */
export type WriteOutcome =
  | { kind: 'ok'; body: unknown }
  | { kind: 'auth' }
  /** No answer, or "not now" (5xx, 429): the tap is kept and sent later. */
  | { kind: 'unreachable' }
  | { kind: 'error'; message: string; code?: string; field?: string };

export type Write = (path: string, body: unknown, retry: () => void) => Promise<WriteOutcome>;

/** A line under the tile's buttons and when it goes away: it says something that still holds, or nothing. */
export interface TileMsg {
  text: string;
  tone: 'ok' | 'err';
  /**
   * reason: until a reason is picked or a note typed; state: until the tile's downtime changes;
   * time: a few seconds; tap: until the next tap.
   */
  until: 'reason' | 'state' | 'time' | 'tap';
}

const hms = (ms: number) => new Date(ms).toTimeString().slice(0, 8);

const ACTION_WORDS: Record<PendingTap['action'], string> = { start: 'Start', stop: 'Stop', cancel: 'Discard' };

/** The kept taps in the operator's words: `Kept on this panel until the gateway answers: Start 08:14:03 · Stop 08:20:41 (Tool change)`. */
export function keptLine(taps: readonly PendingTap[]): string {
  const what = taps.map((t) => `${ACTION_WORDS[t.action]} ${hms(t.at)}${t.action === 'stop' && (t.reason || t.text) ? ` (${[t.reason, t.text].filter(Boolean).join(': ')})` : ''}`);
  return `Kept on this panel until the gateway answers: ${what.join(' · ')}`;
}

const SENT: Record<PendingTap['action'], (t: PendingTap) => string> = {
  start: (t) => `Sent: downtime from ${hms(t.at)}, kept while the gateway did not answer`,
  stop: (t) => `Sent: downtime stopped at ${hms(t.at)}. Delivery state in the list.`,
  cancel: () => 'Sent: downtime discarded (nothing recorded)',
};

/** Why a kept tap was not needed any more when it could be sent (the gateway's answer), in the operator's words. */
function dropped(t: PendingTap, r: Extract<WriteOutcome, { kind: 'error' }>): string {
  if (r.code === 'downtime_open') return `Your start at ${hms(t.at)} was not needed: a downtime was already open (started elsewhere).`;
  if (r.code === 'no_open_downtime') return `Nothing to ${t.action === 'stop' ? 'stop' : 'discard'} at ${hms(t.at)}: the downtime had already ended (elsewhere).`;
  return `Your tap at ${hms(t.at)} was refused: ${r.message}`;
}

/**
 * The kept taps of one machine (localStorage, so a reload keeps them) and their sending: in tap
 * order, each with its tap time; stopped by no answer (tried again at the next answer) or by the
 * token dialog (tried again once a token is saved).
 */
export function useKeptTaps(machine: string, o: { write: Write; refresh: () => Promise<void>; online: boolean; answered: number; say: (m: TileMsg) => void }) {
  const [taps, setTapsState] = useState<PendingTap[]>(() => loadTaps(machine));
  const ref = useRef(taps);
  const sending = useRef(false);
  const setTaps = (t: PendingTap[]) => {
    ref.current = t;
    saveTaps(machine, t);
    setTapsState(t);
  };

  const keep = (t: PendingTap) => setTaps([...ref.current, t]);

  const sendKept = async (): Promise<void> => {
    if (sending.current) return;
    sending.current = true;
    try {
      while (ref.current.length > 0) {
        const t = ref.current[0];
        const r = await o.write(downtimePath(machine, t.action), tapBody(t), () => void sendKept());
        if (r.kind === 'unreachable' || r.kind === 'auth') return;
        setTaps(ref.current.slice(1));
        if (r.kind === 'ok') {
          // What was picked and typed for a downtime started offline goes with it to its real id.
          const id = (r.body as { downtime?: { external_id?: string } } | null)?.downtime?.external_id;
          if (t.action === 'start' && id) {
            setDraft(machine, id, getDraft(machine, pendingDowntimeId(t)));
            setDraft(machine, pendingDowntimeId(t), null);
          }
          o.say({ text: SENT[t.action](t), tone: 'ok', until: 'time' });
        } else {
          o.say({ text: dropped(t, r), tone: 'err', until: 'time' });
        }
      }
      await o.refresh();
    } finally {
      sending.current = false;
    }
  };

  // The gateway answered (again): what waits goes out.
  useEffect(() => {
    if (o.online && ref.current.length > 0) void sendKept();
  }, [o.answered]);

  return { taps, keep, pendingRef: ref, sendKept };
}
