// The console's Annotations page: every annotation with who recorded it,
// its times, what the machine said about it (alarm states, links, the contradiction flag), and the
// machine conditions active now. Reads GET /api/annotations (src/annotations/api.ts) with the types
// of src/annotations/api-model.ts.
import { h, Fragment } from 'preact';
import { useState } from 'preact/hooks';
import type { AlarmDetailView, AnnotationDetailView, AnnotationLinkView, AnnotationListResponse, AnnotationView, OpenAlarmView } from '../../annotations/api-model.js';
import type { OriginKind } from '../../annotations/model.js';
import { fmtAge, fmtNum, fmtSpan, fmtTime } from '../../web/format.js';
import { serviceMessage, useLoad } from './load.js';

const NOT_CONFIGURED = 'Annotations are not configured on this gateway (annotations: in the configuration).';
/** The API's largest page (api.ts): a few hundred rows stay readable with the origin filter and the search. */
const LIMIT = 500;

type Entry = AnnotationView | AnnotationDetailView;
type KindFilter = OriginKind | 'all';
const KINDS: Array<[KindFilter, string]> = [
  ['all', 'All'],
  ['operator', 'Operator'],
  ['detector', 'Detector'],
  ['alarm', 'Alarm'],
  ['gap', 'Gap'],
];

/** The machine's side of an entry; absent when the gateway runs neither annotations.alarms nor reconciliation. */
function detailOf(a: Entry): AnnotationDetailView | null {
  return 'links' in a ? a : null;
}

const ms = (iso: string | null | undefined): number | null => (iso ? Date.parse(iso) : null);

/** An instant's time; a range's start, end and duration. */
function When({ a, endInferred }: { a: Entry; endInferred: string | null }) {
  if (a.type === 'instant')
    return (
      <div>
        <span data-testid="when-instant">{fmtTime(ms(a.occurred_at))}</span>
        <div class="muted small">instant</div>
      </div>
    );
  const from = ms(a.started_at);
  const to = ms(a.ended_at);
  return (
    <div data-testid="when-range">
      <div>
        <span class="muted small">from </span>
        <span data-testid="range-start">{fmtTime(from)}</span>
      </div>
      <div>
        <span class="muted small">to </span>
        <span data-testid="range-end">{fmtTime(to)}</span>
        {endInferred !== null ? (
          <span class="pill warn inferred" title={`End inferred: ${endInferred}`} data-testid="end-inferred">
            end inferred
          </span>
        ) : null}
      </div>
      <div class="muted small">
        range · <span data-testid="range-duration">{from !== null && to !== null ? fmtSpan(to - from) : '–'}</span>
      </div>
    </div>
  );
}

const KIND_CLASS: Record<OriginKind, string> = { operator: 'k-operator', detector: 'k-detector', alarm: 'k-alarm', gap: 'k-gap' };

function Origin({ kind, origin }: { kind: OriginKind; origin: string }) {
  return (
    <span data-testid="origin">
      <span class={`kind ${KIND_CLASS[kind]}`}>{kind}</span>
      {origin !== kind ? <span class="muted small"> {origin}</span> : null}
    </span>
  );
}

/** One of a condition's states as last reported (Part 9 §5.5): true, false, or not reported. */
function StatePill({ on, yes, no, testid, good }: { on: boolean | null; yes: string; no: string; testid: string; good: boolean }) {
  if (on === null)
    return (
      <span class="pill off" title="not reported by the server" data-testid={testid} data-state="unknown">
        {yes} ?
      </span>
    );
  // Active is the bad news; acknowledged and confirmed are the good.
  const cls = on === good ? 'ok' : 'warn';
  return (
    <span class={`pill ${cls}`} data-testid={testid} data-state={on ? 'yes' : 'no'}>
      {on ? yes : no}
    </span>
  );
}

function AlarmStates({ alarm }: { alarm: AlarmDetailView }) {
  return (
    <span class="pills" data-testid="alarm-states">
      <StatePill on={alarm.active} yes="Active" no="Inactive" testid="pill-active" good={false} />
      <StatePill on={alarm.acked} yes="Acked" no="Unacked" testid="pill-acked" good={true} />
      <StatePill on={alarm.confirmed} yes="Confirmed" no="Unconfirmed" testid="pill-confirmed" good={true} />
    </span>
  );
}

function AlarmCell({ alarm }: { alarm: AlarmDetailView }) {
  const name = alarm.condition_name ?? alarm.event_type_name ?? alarm.event_type;
  return (
    <div data-testid="alarm">
      <div>
        <b data-testid="alarm-condition">{name}</b>
        <span class="muted small"> on </span>
        <span class="mono small" data-testid="alarm-source">
          {alarm.source_name}
        </span>
        <span class="muted small" data-testid="alarm-severity">
          {' '}
          · severity {fmtNum(alarm.severity)}
        </span>
      </div>
      <div class="small">
        {alarm.reason_code ? (
          <span class="mono" data-testid="alarm-reason">
            {alarm.reason_code}
          </span>
        ) : (
          <span class="muted">no rule</span>
        )}
        {alarm.category ? (
          <span class="muted" data-testid="alarm-category">
            {' '}
            · {alarm.category}
          </span>
        ) : null}
      </div>
      <AlarmStates alarm={alarm} />
    </div>
  );
}

const LINK_STATE_CLASS: Record<AnnotationLinkView['state'], string> = { delivered: 'ok', queued: 'warn', refused: 'bad', open: 'bad', pending: 'warn' };

function Linked({ links }: { links: AnnotationLinkView[] }) {
  if (links.length === 0) return <span class="muted">–</span>;
  return (
    <ul class="links" data-testid="linked">
      {links.map((l) => (
        <li title={`${l.text ?? ''}\n${l.external_id}${l.started_at ? ` · ${fmtTime(ms(l.started_at))}–${l.ended_at ? fmtTime(ms(l.ended_at)) : 'now'}` : ''}`} data-testid="link">
          <span class={`kind ${KIND_CLASS[l.origin_kind]}`}>{l.origin_kind}</span> <span class="link-text" data-testid="link-text">
            {l.text ?? l.external_id}
          </span>{' '}
          <span class={`pill ${LINK_STATE_CLASS[l.state]}`} data-testid="link-state">
            {l.state}
          </span>
        </li>
      ))}
    </ul>
  );
}

const DELIVERY_CLASS: Record<AnnotationView['state'], string> = { delivered: 'ok', refused: 'bad', queued: 'warn' };

function Row({ a }: { a: Entry }) {
  const d = detailOf(a);
  const alarm = d?.alarm ?? null;
  const contradicted = d?.contradicted_by_machine_state ?? null;
  const otherFlags = d ? d.flags.filter((f) => f.flag !== 'contradicted_by_machine_state') : [];
  const problem = serviceMessage(a.refusal ?? a.last_error ?? null);
  return (
    <tr data-testid="annotation-row" data-external-id={a.external_id} title={`recorded ${fmtTime(ms(a.created_at))} · ${a.external_id}`}>
      <td class="nowrap">
        <When a={a} endInferred={alarm?.end_inferred ?? null} />
      </td>
      <td>{a.machine ?? '–'}</td>
      <td class="nowrap">
        <Origin kind={a.origin_kind} origin={a.origin} />
      </td>
      <td class="ann-text">
        <div data-testid="annotation-text">{a.text}</div>
        {contradicted ? (
          <div class="contradicted" data-testid="contradicted">
            <span class="pill bad">Contradicted by machine state</span> <span class="small">{contradicted.detail}</span>
          </div>
        ) : null}
        {otherFlags.map((f) => (
          <div class="small muted" data-testid="flag">
            {f.flag}: {f.detail}
          </div>
        ))}
      </td>
      <td>{alarm ? <AlarmCell alarm={alarm} /> : <span class="muted">–</span>}</td>
      <td>{d ? <Linked links={d.links} /> : <span class="muted">–</span>}</td>
      <td>
        <span class={`pill ${DELIVERY_CLASS[a.state]}`} data-testid="delivery">
          {a.state}
        </span>
        {problem ? <div class="err-cell small">{problem}</div> : null}
      </td>
    </tr>
  );
}

function OpenAlarms({ open }: { open: OpenAlarmView[] }) {
  return (
    <section class="card" data-testid="open-alarms">
      <h2>
        Open alarms <span class="muted small">{open.length === 0 ? 'none' : `${open.length} active now`}</span>
      </h2>
      {open.length === 0 ? (
        <p class="muted">No machine condition is active. An active condition's range annotation is queued when it ends.</p>
      ) : (
        <table class="tbl">
          <thead>
            <tr>
              <th>Condition</th>
              <th>Machine</th>
              <th>Since</th>
              <th>States</th>
              <th>Linked</th>
            </tr>
          </thead>
          <tbody>
            {open.map((o) => {
              const since = Date.parse(o.alarm.active_since);
              return (
                <tr data-testid="open-alarm" data-external-id={o.external_id}>
                  <td>
                    <b data-testid="alarm-condition">{o.alarm.condition_name ?? o.alarm.event_type_name ?? o.alarm.event_type}</b>
                    {o.alarm.reason_code ? <span class="mono small"> {o.alarm.reason_code}</span> : null}
                    <div class="muted small">
                      {o.alarm.source_name} · severity {fmtNum(o.alarm.severity)}
                      {o.alarm.message ? ` · ${o.alarm.message}` : ''}
                    </div>
                  </td>
                  <td data-testid="open-alarm-machine">{o.machine ?? '–'}</td>
                  <td class="nowrap">
                    <span data-testid="open-alarm-since">{fmtTime(since)}</span>
                    <div class="muted small">{fmtAge(Date.now() - since)} ago</div>
                  </td>
                  <td>
                    <AlarmStates alarm={o.alarm} />
                  </td>
                  <td>
                    <Linked links={o.links} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}

function matches(a: Entry, kind: KindFilter, q: string): boolean {
  if (kind !== 'all' && a.origin_kind !== kind) return false;
  if (!q) return true;
  const d = detailOf(a);
  const hay = [a.text, a.machine ?? '', a.origin, a.external_id, d?.alarm?.condition_name ?? '', d?.alarm?.reason_code ?? ''].join(' ').toLowerCase();
  return hay.includes(q);
}

export function Annotations() {
  const [{ data, error }] = useLoad<AnnotationListResponse>(`/api/annotations?limit=${LIMIT}`);
  const [kind, setKind] = useState<KindFilter>('all');
  const [query, setQuery] = useState('');
  if (error) return <div class="empty">{/no such path/.test(error) ? NOT_CONFIGURED : error}</div>;
  if (!data) return <div class="empty">Loading…</div>;
  const q = query.trim().toLowerCase();
  const rows = data.annotations.filter((a) => matches(a, kind, q));
  const perKind = (k: KindFilter) => (k === 'all' ? data.annotations.length : data.annotations.filter((a) => a.origin_kind === k).length);
  return (
    <div class="stack">
      <OpenAlarms open={data.open_alarms} />
      <section class="card">
        <div class="card-head">
          <h2>Annotations</h2>
          <div class="row">
            <div class="seg" data-testid="origin-filter">
              {KINDS.map(([k, label]) => (
                <button class={kind === k ? 'on' : ''} onClick={() => setKind(k)} data-testid={`origin-${k}`}>
                  {label} <span class="muted small">{perKind(k)}</span>
                </button>
              ))}
            </div>
            <input type="search" placeholder="Search text, machine, condition…" value={query} onInput={(e) => setQuery((e.target as HTMLInputElement).value)} data-testid="annotations-search" />
          </div>
        </div>
        <p class="muted">
          Downtimes and notes queued for the tracking service, with its answer, newest first ({data.annotations.length === LIMIT ? `the latest ${LIMIT}` : `${data.annotations.length}`}). Origin says who recorded
          it; for a machine alarm, the condition and its states as last reported. Linked: the operator's downtime and the machine's alarm that overlap.
        </p>
        <div class="scroll">
          <table class="tbl ann" data-testid="annotations-table">
            <thead>
              <tr>
                <th>When</th>
                <th>Machine</th>
                <th>Origin</th>
                <th>Text</th>
                <th>Alarm</th>
                <th>Linked</th>
                <th>Delivery</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((a) => (
                <Row key={a.external_id} a={a} />
              ))}
            </tbody>
          </table>
        </div>
        {rows.length === 0 ? <p class="muted">{data.annotations.length === 0 ? 'No annotations yet.' : 'None matches the filter.'}</p> : null}
      </section>
    </div>
  );
}
