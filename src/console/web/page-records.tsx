import { h, Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { GapView } from '../../buffer/gaps.js';
import type { SetAsideRow, SetAsideSummary } from '../../buffer/set-aside.js';
import { fmtNum, fmtTime } from '../../web/format.js';
import { api, ApiError, messageOf } from './lib.js';
import { serviceMessage, useLoad } from './load.js';

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
                  <td class="err-cell">{serviceMessage(r.detail)}</td>
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

type GapFilter = 'open' | 'all';

export function Gaps() {
  // The page opens on "All" when no gap is open (an empty "Open" list hides the
  // history), on "Open" when some are; after that the buttons decide.
  const [which, setWhich] = useState<GapFilter>('open');
  const [decided, setDecided] = useState(false);
  const path = `/api/gaps?state=${which}&limit=500`;
  const [loaded] = useLoad<GapList>(path, [which]);
  const { data, error, status } = loaded;
  useEffect(() => {
    if (decided || loaded.path !== path || !data) return;
    if (data.gaps.length === 0) setWhich('all');
    setDecided(true);
  }, [loaded]);
  const pick = (w: GapFilter) => {
    setDecided(true);
    setWhich(w);
  };
  if (status === 404)
    return (
      <div class="empty" data-testid="gaps-unavailable">
        gap ledger not available in this version
      </div>
    );
  if (error) return <div class="empty">{error}</div>;
  if (!data || !decided) return <div class="empty">Loading…</div>;
  // The list shown is of the path it was loaded for (a click shows the old list until the new one arrives).
  const shown: GapFilter = loaded.path?.includes('state=all') ? 'all' : 'open';
  return (
    <section class="card">
      <div class="card-head">
        <h2>
          {data.gaps.length} {shown === 'open' ? 'open ' : ''}gap{data.gaps.length === 1 ? '' : 's'}
        </h2>
        <div class="row" data-testid="gaps-filter">
          <button class={which === 'open' ? 'primary' : ''} aria-pressed={which === 'open'} onClick={() => pick('open')} data-testid="gaps-open">
            Open
          </button>
          <button class={which === 'all' ? 'primary' : ''} aria-pressed={which === 'all'} onClick={() => pick('all')} data-testid="gaps-all">
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
