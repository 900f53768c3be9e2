import { h } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { PanelMachine } from '../api-model.js';
import { elapsed, hhmm } from '../../web/format.js';
import { keptLine, useKeptTaps, type TileMsg, type Write, type WriteOutcome } from './kept-taps.js';
import { AlarmList, machineLine, machineStateText } from './machine-lines.js';
import { newTapId, shownDowntime } from './pending.js';
import { downtimePath, getDraft, setDraft, type DowntimeAction } from './requests.js';

export type { WriteOutcome };

export interface TileProps {
  machine: PanelMachine;
  /** The gateway's wall clock (epoch ms), read once a second. */
  now: number;
  /** The gateway's wall clock now (the panel's clock plus the offset the gateway last showed): a tap's time. */
  gatewayNow: () => number;
  /** The last read of the panel was answered. */
  online: boolean;
  /** Counts the answered reads: a change sends what was kept. */
  answered: number;
  /** Sends a write; on a 401 it asks for the token and calls `retry` once one is saved. */
  write: Write;
  /** Reads the panel again (after a write, whatever its answer). */
  refresh: () => Promise<void>;
}

const OK_MS = 8_000;
const NEED_REASON = 'Pick a reason or write a note first.';

/** The operator's words for what the gateway answered to a tap. */
function errorMsg(r: Extract<WriteOutcome, { kind: 'error' }>): TileMsg {
  if (r.field === 'reason') return { text: NEED_REASON, tone: 'err', until: 'reason' };
  // The tile shows another state than the one tapped on (another panel, a detector): wrong until it changes.
  if (r.code === 'downtime_open' || r.code === 'no_open_downtime') return { text: r.message, tone: 'err', until: 'state' };
  return { text: r.message, tone: 'err', until: 'tap' };
}

/**
 * One machine: its state in the operator's words, its active alarms, Start downtime; while down,
 * the reason buttons, a note, Stop and Discard; the answer to the last tap. A tap the gateway does
 * not answer is kept on the panel and sent when it answers again (kept-taps.ts); meanwhile the
 * tile shows what it will do.
 */
export function Tile({ machine: m, now, gatewayNow, online, answered, write, refresh }: TileProps) {
  const [msg, setMsg] = useState<TileMsg | null>(null);
  const kept = useKeptTaps(m.key, { write, refresh, online, answered, say: setMsg });
  const d = shownDowntime(m.downtime, kept.taps);
  const downtimeId = useRef<string | null>(null);
  const busyRef = useRef(false);
  const [busy, setBusy] = useState(false);
  const [reason, setReason] = useState<string | null>(null);
  const [text, setText] = useState('');
  const [confirmDiscard, setConfirmDiscard] = useState(false);
  const discardTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);

  // A downtime (new, found after a reload, or started by a kept tap): restore what was picked and
  // typed for it. A layout effect runs in the same task as the render that first shows the reason
  // buttons, so a tap cannot land in between: with a plain effect (run later) a quick tap found no
  // downtime id to save its draft under, and the restore then reset the picked reason to none.
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

  // A message goes when what it says no longer holds.
  useEffect(() => {
    if (msg?.until === 'reason' && (reason || text.trim())) setMsg(null);
  }, [reason, text]);
  useEffect(() => {
    if (msg?.until === 'state' || msg?.until === 'reason') setMsg(null);
  }, [d?.external_id ?? null]);
  useEffect(() => {
    if (msg?.until !== 'time') return;
    const t = setTimeout(() => setMsg((cur) => (cur === msg ? null : cur)), OK_MS);
    return () => clearTimeout(t);
  }, [msg]);

  const saveDraft = (r: string | null, t: string) => {
    if (downtimeId.current) setDraft(m.key, downtimeId.current, { reason: r, text: t });
  };
  const select = (r: string | null) => {
    setReason(r);
    saveDraft(r, text);
  };

  /**
   * A tap: sent now, or kept behind the taps already kept (their order is the machine's story).
   * `fields` are what the kept tap carries (the reason and note of a stop). `onOk(kept)`: done, or
   * kept on the panel.
   */
  const act = async (action: DowntimeAction, fields: { reason?: string | null; text?: string | null }, onOk: (kept: boolean) => void): Promise<void> => {
    if (busyRef.current) return;
    const tap = { id: newTapId(), action, at: gatewayNow(), ...fields };
    if (kept.pendingRef.current.length > 0) {
      kept.keep(tap);
      onOk(true);
      return void kept.sendKept();
    }
    busyRef.current = true;
    setBusy(true);
    setMsg(null);
    const body = action === 'cancel' ? undefined : action === 'start' ? {} : { reason: fields.reason ?? null, text: fields.text ?? null };
    const r = await write(downtimePath(m.key, action), body, () => void act(action, fields, onOk));
    if (r.kind === 'ok') onOk(false);
    else if (r.kind === 'unreachable') {
      kept.keep(tap);
      onOk(true);
    } else if (r.kind === 'error') setMsg(errorMsg(r));
    // The buttons stay disabled until the panel shows what the write did.
    await refresh();
    busyRef.current = false;
    setBusy(false);
  };
  const start = () => act('start', {}, (k) => setMsg(k ? null : { text: 'Downtime started', tone: 'ok', until: 'time' }));
  const stop = () => {
    const id = downtimeId.current;
    const note = text.trim();
    if (!reason && !note && !d?.reason && !d?.text) return setMsg({ text: NEED_REASON, tone: 'err', until: 'reason' });
    void act('stop', { reason, text: note || null }, (k) => {
      if (id) setDraft(m.key, id, null);
      setText('');
      setReason(null);
      setMsg(k ? null : { text: 'Saved. Delivery state in the list.', tone: 'ok', until: 'time' });
    });
  };
  const discard = () => {
    if (!confirmDiscard) {
      setConfirmDiscard(true);
      discardTimer.current = setTimeout(() => setConfirmDiscard(false), 4000);
      return;
    }
    const id = downtimeId.current;
    void act('cancel', {}, (k) => {
      if (id) setDraft(m.key, id, null);
      setMsg(k ? null : { text: 'Downtime discarded (nothing sent)', tone: 'ok', until: 'time' });
    });
  };

  const line = d ? null : machineLine(m.state);
  const state = d ? `DOWN ${elapsed(now - d.started_ms)} since ${hhmm(d.started_ms)}` : machineStateText(m.state, now);
  const auto = !d && m.state?.down === true;
  return (
    <div class={`tile${d ? ' down' : ''}${auto ? ' auto' : ''}${!d && !m.state ? ' unknown' : ''}`} data-testid={`tile-${m.key}`}>
      <div class="head">
        <div class="name">{m.name}</div>
        <div class="state" data-testid={`state-${m.key}`} data-started={d ? String(d.started_ms) : ''} data-pending={d?.pending ? 'true' : ''}>
          {state}
        </div>
      </div>
      {line ? (
        <div class="auto-line" data-testid={`auto-${m.key}`}>
          {line}
        </div>
      ) : null}
      {d && m.state ? (
        <div class="machine-line" data-testid={`machine-${m.key}`}>
          {`The machine reports: ${machineStateText(m.state, now)}`}
        </div>
      ) : null}
      <AlarmList machine={m.key} alarms={m.alarms} />
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
      <div class={`msg${msg ? ` ${msg.tone}` : ''}`} data-testid={`msg-${m.key}`}>
        {msg ? msg.text : null}
      </div>
      {kept.taps.length > 0 ? (
        <div class="kept" data-testid={`kept-${m.key}`}>
          {keptLine(kept.taps)}
        </div>
      ) : null}
    </div>
  );
}
