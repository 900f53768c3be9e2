import { h } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { PanelMachine } from '../api-model.js';
import { elapsed, hhmm } from '../../web/format.js';
import { downtimePath, getDraft, setDraft, type DowntimeAction } from './requests.js';

/** What a write came to: done (with the answer's body), waiting for the token, or refused with a message for the operator. */
export type WriteOutcome = { kind: 'ok'; body: unknown } | { kind: 'auth' } | { kind: 'error'; message: string };

export interface TileProps {
  machine: PanelMachine;
  /** The gateway's wall clock (epoch ms), read once a second. */
  now: number;
  /** Sends a write; on a 401 it asks for the token and calls `retry` once one is saved. */
  write: (path: string, body: unknown, retry: () => void) => Promise<WriteOutcome>;
  /** Reads the panel again (after a write, whatever its answer). */
  refresh: () => Promise<void>;
}

/**
 * One machine: Start downtime; while down, the reason buttons, a note, Stop and Discard; a
 * detector's episode in progress; the answer to the last tap.
 */
export function Tile({ machine: m, now, write, refresh }: TileProps) {
  const d = m.downtime;
  const autoOpen = m.detected.filter((x) => x.open);
  const downtimeId = useRef<string | null>(null);
  const busyRef = useRef(false);
  const [busy, setBusy] = useState(false);
  const [reason, setReason] = useState<string | null>(null);
  const [text, setText] = useState('');
  const [confirmDiscard, setConfirmDiscard] = useState(false);
  const [msg, setMsg] = useState<{ text: string; ok: boolean } | null>(null);
  const discardTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);

  // A downtime (new, or found after a reload): restore what was picked and typed for it. A
  // layout effect runs in the same task as the render that first shows the reason buttons, so a
  // tap cannot land in between: with a plain effect (run later) a quick tap found no downtime id
  // to save its draft under, and the restore then reset the picked reason to none.
  useLayoutEffect(() => {
    if (d) {
      downtimeId.current = d.external_id;
      const draft = getDraft(m.key, d.external_id);
      setText(draft.text !== undefined ? draft.text : d.text || '');
      setReason(draft.reason !== undefined ? draft.reason : d.reason || null);
    } else {
      downtimeId.current = null;
      setConfirmDiscard(false);
    }
  }, [d?.external_id ?? null]);
  useEffect(() => () => clearTimeout(discardTimer.current), []);

  const saveDraft = (r: string | null, t: string) => {
    if (downtimeId.current) setDraft(m.key, downtimeId.current, { reason: r, text: t });
  };
  const select = (r: string | null) => {
    setReason(r);
    saveDraft(r, text);
  };

  const act = async (action: DowntimeAction, body: unknown, onOk: () => void): Promise<void> => {
    if (busyRef.current) return;
    busyRef.current = true;
    setBusy(true);
    setMsg(null);
    const r = await write(downtimePath(m.key, action), body, () => void act(action, body, onOk));
    if (r.kind === 'ok') onOk();
    else if (r.kind === 'error') setMsg({ text: r.message, ok: false });
    // The buttons stay disabled until the panel shows what the write did.
    await refresh();
    busyRef.current = false;
    setBusy(false);
  };
  const start = () => act('start', {}, () => setMsg({ text: 'Downtime started', ok: true }));
  const stop = () => {
    const id = downtimeId.current;
    const note = text.trim();
    void act('stop', { reason, text: note || null }, () => {
      if (id) setDraft(m.key, id, null);
      setText('');
      setReason(null);
      setMsg({ text: 'Saved. Delivery state in the list.', ok: true });
    });
  };
  const discard = () => {
    if (!confirmDiscard) {
      setConfirmDiscard(true);
      discardTimer.current = setTimeout(() => setConfirmDiscard(false), 4000);
      return;
    }
    const id = downtimeId.current;
    void act('cancel', undefined, () => {
      if (id) setDraft(m.key, id, null);
      setMsg({ text: 'Downtime discarded (nothing sent)', ok: true });
    });
  };

  const auto = autoOpen[0];
  const state = d ? `DOWN ${elapsed(now - d.started_ms)} since ${hhmm(d.started_ms)}` : auto ? `Stopped ${elapsed(now - auto.since)}` : 'Running';
  return (
    <div class={`tile${d ? ' down' : ''}${!d && autoOpen.length > 0 ? ' auto' : ''}`} data-testid={`tile-${m.key}`}>
      <div class="head">
        <div class="name">{m.name}</div>
        <div class="state" data-testid={`state-${m.key}`} data-started={d ? String(d.started_ms) : ''}>
          {state}
        </div>
      </div>
      <div class="auto-line" style={auto ? '' : 'display:none'}>
        {auto ? `Detected since ${hhmm(auto.since)} (${auto.variable} ${auto.condition}): recorded automatically when it ends` : null}
      </div>
      <div class="down-part" style={d ? '' : 'display:none'}>
        <div class="reasons">
          {m.reasons.map((r, i) => (
            <button class={`reason${reason === r ? ' sel' : ''}`} type="button" data-testid={`reason-${m.key}-${i}`} onClick={() => select(reason === r ? null : r)}>
              {r}
            </button>
          ))}
        </div>
        <input
          type="text"
          maxLength={4000}
          placeholder="Note (optional)"
          data-testid={`text-${m.key}`}
          value={text}
          onInput={(e) => {
            setText(e.currentTarget.value);
            saveDraft(reason, e.currentTarget.value);
          }}
        />
        <div class="actions">
          <button class="stop" type="button" data-testid={`stop-${m.key}`} disabled={busy} onClick={stop}>
            Stop downtime
          </button>
          <button class="discard" type="button" data-testid={`discard-${m.key}`} disabled={busy} onClick={discard}>
            {confirmDiscard ? 'Tap again' : 'Discard'}
          </button>
        </div>
      </div>
      <button class="start" type="button" data-testid={`start-${m.key}`} style={d ? 'display:none' : ''} disabled={busy} onClick={() => void start()}>
        Start downtime
      </button>
      <div class={`msg${msg ? (msg.ok ? ' ok' : ' err') : ''}`} data-testid={`msg-${m.key}`}>
        {msg ? msg.text : null}
      </div>
    </div>
  );
}
