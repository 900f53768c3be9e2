import { h, Fragment } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { PanelMachine } from '../api-model.js';
import { elapsed, hhmm } from '../../web/format.js';
import { keptLine, useKeptTaps, type TileMsg, type Write, type WriteOutcome } from './kept-taps.js';
import { AlarmList, machineLine, machineStateText } from './machine-lines.js';
import { newTapId, shownDowntime, type ShownDowntime } from './pending.js';
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

/** A message goes when what it says no longer holds (TileMsg.until). */
function useMessageLifetime(msg: TileMsg | null, setMsg: (f: TileMsg | null | ((cur: TileMsg | null) => TileMsg | null)) => void, now: { reason: string | null; text: string; downtime: string | null }): void {
  useEffect(() => {
    if (msg?.until === 'reason' && (now.reason || now.text.trim())) setMsg(null);
  }, [now.reason, now.text]);
  useEffect(() => {
    if (msg?.until === 'state' || msg?.until === 'reason') setMsg(null);
  }, [now.downtime]);
  useEffect(() => {
    if (msg?.until !== 'time') return;
    const t = setTimeout(() => setMsg((cur) => (cur === msg ? null : cur)), OK_MS);
    return () => clearTimeout(t);
  }, [msg]);
}

interface DownPartProps {
  machine: string;
  reasons: string[];
  reason: string | null;
  text: string;
  busy: boolean;
  confirmDiscard: boolean;
  select: (r: string | null) => void;
  type: (t: string) => void;
  stop: () => void;
  discard: () => void;
}

/** The head of a tile: name and state, what the machine reports, its active alarms. */
function TileStatus({ machine: m, downtime: d, now }: { machine: PanelMachine; downtime: ShownDowntime | null; now: number }) {
  const line = d ? null : machineLine(m.state);
  return (
    <>
      <div class="head">
        <div class="name">{m.name}</div>
        <div class="state" data-testid={`state-${m.key}`} data-started={d ? String(d.started_ms) : ''} data-pending={d?.pending ? 'true' : ''}>
          {d ? `DOWN ${elapsed(now - d.started_ms)} since ${hhmm(d.started_ms)}` : machineStateText(m.state, now)}
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
    </>
  );
}

/** While down: the reason buttons, a note, Stop and Discard. */
function DownPart(p: DownPartProps) {
  return (
    <div class="down-part">
      <div class="reasons">
        {p.reasons.map((r, i) => (
          <button class={`reason${p.reason === r ? ' sel' : ''}`} type="button" data-testid={`reason-${p.machine}-${i}`} onClick={() => p.select(p.reason === r ? null : r)}>
            {r}
          </button>
        ))}
      </div>
      <input type="text" maxLength={4000} placeholder="Note (optional)" data-testid={`text-${p.machine}`} value={p.text} onInput={(e) => p.type(e.currentTarget.value)} />
      <div class="actions">
        <button class="stop" type="button" data-testid={`stop-${p.machine}`} disabled={p.busy} onClick={p.stop}>
          Stop downtime
        </button>
        <button class="discard" type="button" data-testid={`discard-${p.machine}`} disabled={p.busy} onClick={p.discard}>
          {p.confirmDiscard ? 'Tap again' : 'Discard'}
        </button>
      </div>
    </div>
  );
}

/**
 * One machine: its state in the operator's words, its active alarms, Start downtime; while down,
 * the reason buttons, a note, Stop and Discard; the answer to the last tap. A tap the gateway does
 * not answer is kept on the panel and sent when it answers again (kept-taps.ts); meanwhile the
 * tile shows what it will do.
 */
export function Tile({ machine: m, now, gatewayNow, online, answered, write, refresh }: TileProps) {
  const [reason, setReason] = useState<string | null>(null);
  const [text, setText] = useState('');
  const [msg, setMsg] = useState<TileMsg | null>(null);
  const kept = useKeptTaps(m.key, { write, refresh, online, answered, say: setMsg });
  const d = shownDowntime(m.downtime, kept.taps);
  useMessageLifetime(msg, setMsg, { reason, text, downtime: d?.external_id ?? null });
  const downtimeId = useRef<string | null>(null);
  const busyRef = useRef(false);
  const [busy, setBusy] = useState(false);
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

  const auto = !d && m.state?.down === true;
  return (
    <div class={`tile${d ? ' down' : ''}${auto ? ' auto' : ''}${!d && !m.state ? ' unknown' : ''}`} data-testid={`tile-${m.key}`}>
      <TileStatus machine={m} downtime={d} now={now} />
      {d ? (
        <DownPart
          machine={m.key}
          reasons={m.reasons}
          reason={reason}
          text={text}
          busy={busy}
          confirmDiscard={confirmDiscard}
          select={select}
          type={(t) => {
            setText(t);
            saveDraft(reason, t);
          }}
          stop={stop}
          discard={discard}
        />
      ) : null}
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
