import { h, Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { AnnotationListResponse } from '../../annotations/api-model.js';
import type { GapView } from '../../buffer/gaps.js';
import type { SetAsideRow, SetAsideSummary } from '../../buffer/set-aside.js';
import { fmtNum, fmtTime } from '../../web/format.js';
import { api, ApiError, messageOf } from './lib.js';

/** GET /api/set-aside (src/http/set-aside-routes.ts). */
type SetAsideList = SetAsideSummary & { rows: SetAsideRow[] };
/** POST /api/set-aside/requeue: 200, or 503 with the same counts next to the error. */
interface RequeueAnswer {
  requeued: number;
  remaining: number;
}
/** POST /api/set-aside/drop. */
interface DropAnswer {
  dropped: number;
}
/** GET /api/gaps (src/http/gap-routes.ts). */
interface GapList {
  gaps: GapView[];
}

interface Loaded<T> {
  data: T | null;
  error: string | null;
  status: number;
}

function useLoad<T>(path: string, deps: unknown[] = []): [Loaded<T>, () => void] {
  const [state, set] = useState<Loaded<T>>({ data: null, error: null, status: 0 });
  const load = () => {
    api<T>(path).then(
      (data) => set({ data, error: null, status: 200 }),
      (e: unknown) => set({ data: null, error: messageOf(e), status: e instanceof ApiError ? e.status : 0 }),
    );
  };
  useEffect(() => {
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, deps);
  return [state, load];
}

function message(detail: unknown): string {
  if (detail === null || detail === undefined) return '';
  if (typeof detail === 'string') return detail;
  const d = detail as { message?: string; error?: { message?: string } };
  return d.message ?? d.error?.message ?? JSON.stringify(detail);
}

type Filter = { ids: number[] } | { all: true } | { variable: string };

export function SetAside() {
  const [{ data, error }, reload] = useLoad<SetAsideList>('/api/set-aside?limit=500');
  const [picked, setPicked] = useState<Set<number>>(new Set());
  const [note, setNote] = useState<{ ok: boolean; text: string } | null>(null);
  const act = async (what: 'requeue' | 'drop', body: Filter) => {
    if (what === 'drop' && !confirm('Delete these samples for good? They are not sent.')) return;
    try {
      if (what === 'requeue') {
        const r = await api<RequeueAnswer>('/api/set-aside/requeue', { method: 'POST', body });
        setNote({ ok: true, text: `${fmtNum(r.requeued)} samples back in the queue.${r.remaining > 0 ? ` ${fmtNum(r.remaining)} stay set aside.` : ''}` });
      } else {
        const r = await api<DropAnswer>('/api/set-aside/drop', { method: 'POST', body });
        setNote({ ok: true, text: `${fmtNum(r.dropped)} samples dropped.` });
      }
      setPicked(new Set());
      reload();
    } catch (e) {
      // 503 from a requeue the buffer refused: the message says how many went back and why the rest stays.
      setNote({ ok: false, text: messageOf(e) });
      if (e instanceof ApiError && ((e.body as Partial<RequeueAnswer> | null)?.requeued ?? 0) > 0) reload();
    }
  };
  if (error) return <div class="empty">{error}</div>;
  if (!data) return <div class="empty">Loading…</div>;
  const toggle = (id: number) => {
    const n = new Set(picked);
    if (n.has(id)) n.delete(id);
    else n.add(id);
    setPicked(n);
  };
  return (
    <div class="stack">
      <section class="card">
        <div class="card-head">
          <h2 data-testid="set-aside-total">{fmtNum(data.total)} samples set aside</h2>
          <div class="row">
            <button class="primary" disabled={picked.size === 0} onClick={() => act('requeue', { ids: [...picked] })} data-testid="requeue-selected">
              Requeue {picked.size || ''}
            </button>
            <button disabled={data.total === 0} onClick={() => act('requeue', { all: true })} data-testid="requeue-all">
              Requeue all
            </button>
            <button class="danger" disabled={picked.size === 0} onClick={() => act('drop', { ids: [...picked] })}>
              Drop {picked.size || ''}
            </button>
          </div>
        </div>
        <p class="muted">Samples the tracking service refused for good (for example an unknown machine variable). Fix the cause (the mapping or the variable in the service), then requeue; drop what must not be sent.</p>
        {note ? (
          <p class={note.ok ? 'ok-line' : 'err-line'} data-testid="set-aside-note">
            {note.text}
          </p>
        ) : (
          ''
        )}
        {data.by_variable.length > 0 ? (
          <>
            <h3 class="sub">By variable</h3>
            <table class="tbl">
              <thead>
                <tr>
                  <th>Variable</th>
                  <th class="num">Samples</th>
                  <th>Reason</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                {data.by_variable.map((v) => (
                  <tr>
                    <td class="mono">{v.variable ?? '(import file)'}</td>
                    <td class="num">{fmtNum(v.count)}</td>
                    <td>{v.reason}</td>
                    <td>
                      {v.variable ? (
                        <button class="small" onClick={() => act('requeue', { variable: v.variable! })}>
                          Requeue
                        </button>
                      ) : (
                        ''
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </>
        ) : (
          ''
        )}
      </section>
      {data.rows.length > 0 ? (
        <section class="card">
          <h2>Samples</h2>
          <table class="tbl" data-testid="set-aside-rows">
            <thead>
              <tr>
                <th></th>
                <th>Variable</th>
                <th>Time</th>
                <th class="num">Value</th>
                <th>Reason</th>
                <th>Service's message</th>
              </tr>
            </thead>
            <tbody>
              {data.rows.map((r) => (
                <tr>
                  <td>
                    <input type="checkbox" checked={picked.has(r.id)} onChange={() => toggle(r.id)} data-testid={`pick-${r.id}`} />
                  </td>
                  <td class="mono">{r.variable ?? '–'}</td>
                  <td>{fmtTime(r.ts)}</td>
                  <td class="num">{fmtNum(r.value)}</td>
                  <td>{r.reason}</td>
                  <td class="err-cell">{message(r.detail)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      ) : (
        ''
      )}
    </div>
  );
}

const NOT_CONFIGURED = 'Annotations are not configured on this gateway (annotations: in the configuration).';

export function Annotations() {
  const [{ data, error }] = useLoad<AnnotationListResponse>('/api/annotations?limit=200');
  if (error) return <div class="empty">{/no such path/.test(error) ? NOT_CONFIGURED : error}</div>;
  if (!data) return <div class="empty">Loading…</div>;
  return (
    <section class="card">
      <h2>Annotations</h2>
      <p class="muted">Downtimes and notes queued for the tracking service, with its answer. Refused ones show the service's reason.</p>
      <table class="tbl" data-testid="annotations-table">
        <thead>
          <tr>
            <th>Created</th>
            <th>Machine</th>
            <th>Type</th>
            <th>Text</th>
            <th>State</th>
            <th>Service's message</th>
          </tr>
        </thead>
        <tbody>
          {data.annotations.map((a) => (
            <tr>
              <td>{fmtTime(Date.parse(a.created_at))}</td>
              <td>{a.machine ?? '–'}</td>
              <td>{a.type}</td>
              <td>{a.text}</td>
              <td>
                <span class={`pill ${a.state === 'delivered' ? 'ok' : a.state === 'refused' ? 'bad' : 'warn'}`}>{a.state}</span>
              </td>
              <td class="err-cell">{message(a.refusal ?? a.last_error ?? null)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function Gaps() {
  const [which, setWhich] = useState<'open' | 'all'>('open');
  const [{ data, error, status }] = useLoad<GapList>(`/api/gaps?state=${which}&limit=500`, [which]);
  if (status === 404)
    return (
      <div class="empty" data-testid="gaps-unavailable">
        gap ledger not available in this version
      </div>
    );
  if (error) return <div class="empty">{error}</div>;
  if (!data) return <div class="empty">Loading…</div>;
  return (
    <section class="card">
      <div class="card-head">
        <h2>
          {data.gaps.length} {which === 'open' ? 'open ' : ''}gap{data.gaps.length === 1 ? '' : 's'}
        </h2>
        <div class="row">
          <button class={which === 'open' ? 'primary' : ''} onClick={() => setWhich('open')}>
            Open
          </button>
          <button class={which === 'all' ? 'primary' : ''} onClick={() => setWhich('all')}>
            All
          </button>
        </div>
      </div>
      <p class="muted">Periods where data is missing upstream: a source was down, or samples could not be kept. Filled when the data arrived later.</p>
      <table class="tbl" data-testid="gaps-table">
        <thead>
          <tr>
            <th>Source</th>
            <th>Variables</th>
            <th>From</th>
            <th>To</th>
            <th>Reason</th>
            <th>Filled</th>
            <th>Annotation</th>
          </tr>
        </thead>
        <tbody>
          {data.gaps.map((g) => (
            <tr data-testid={`gap-${g.id}`}>
              <td>{g.source}</td>
              <td class="mono small">{g.variables ? g.variables.join(', ') : 'all of the source'}</td>
              <td>{fmtTime(g.from)}</td>
              <td>{g.to ? fmtTime(g.to) : <span class="pill bad">open</span>}</td>
              <td>{g.reason}</td>
              <td>
                <span class={`pill ${g.filled === 'yes' ? 'ok' : g.filled === 'no' ? 'bad' : 'warn'}`}>{g.filled}</span>
                {g.note ? (
                  <div class="small muted" data-testid="gap-note">
                    {g.note}
                  </div>
                ) : null}
              </td>
              <td>{g.annotation ? `${g.annotation.state} (${g.annotation.external_id})` : '–'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
