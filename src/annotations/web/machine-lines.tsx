import { h } from 'preact';
import type { MachineStateView, PanelAlarm } from '../api-model.js';
import { elapsed, hhmm } from '../../web/format.js';

/** Minutes or seconds, as a person says them: `1 min`, `90 s`. */
function span(ms: number): string {
  return ms >= 60_000 && ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;
}

/**
 * What the machine's own signal says while no downtime is recorded by hand, in the operator's words
 * (annotations.detectors[].states, else Stopped / Running), e.g. `Stopped since 08:14: recorded as
 * downtime when it runs again`. Null when the machine runs or its state is not known.
 */
export function machineLine(s: MachineStateView | null): string | null {
  if (!s || !s.down || s.since === null) return null;
  const record = s.recorded ? 'recorded as downtime when it ends' : `recorded as downtime if it lasts ${span(s.min_duration_ms)}`;
  return `${s.words} since ${hhmm(s.since)}, as the machine reports: ${record}`;
}

/** The tile's big state text when no downtime is recorded by hand: the machine's state, or that none is known. */
export function machineStateText(s: MachineStateView | null, now: number): string {
  if (!s) return 'No downtime';
  return s.down && s.since !== null ? `${s.words} ${elapsed(now - s.since)}` : s.words;
}

const SHOWN = 4;

/** The machine's alarms active now (OPC UA Alarms & Conditions), most severe first. */
export function AlarmList({ machine, alarms }: { machine: string; alarms: PanelAlarm[] }) {
  if (alarms.length === 0) return null;
  return (
    <ul class="alarms" data-testid={`alarms-${machine}`} aria-label="Active alarms">
      {alarms.slice(0, SHOWN).map((a, i) => (
        <li key={a.external_id} data-testid={`alarm-${machine}-${i}`} class={a.severity >= 700 ? 'high' : ''}>
          <span class="what">{a.reason && a.reason !== a.condition ? `${a.condition}: ${a.reason}` : a.condition}</span>
          <span class="when">{`since ${hhmm(a.since)}${a.acked === false ? ' · not acknowledged' : ''}`}</span>
          {a.message && a.message !== a.reason ? <span class="said">{a.message}</span> : null}
        </li>
      ))}
      {alarms.length > SHOWN ? <li class="more">{`and ${alarms.length - SHOWN} more`}</li> : null}
    </ul>
  );
}
