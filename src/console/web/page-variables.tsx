import { h, Fragment } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { VariableDetailResponse } from '../api/variables.js';
import { fmtAge, fmtNum, fmtTime } from '../../web/format.js';
import { QUALITIES, type Quality, type QualityReading } from '../../core/quality.js';
import { api, messageOf, naturalCompare } from './lib.js';
import { store, useStore, type LiveVariable } from './store.js';
import { Chart, Spark } from './charts.js';
import { linksOf, qualityOf, shownQuality, QUALITY_CLASS, QUALITY_LABEL, QUALITY_UPSTREAM, type LinkDown } from './quality.js';

const ROW = 34;

type Filter = 'all' | Quality | 'refused' | 'set_aside';

/** Filters another page opens the list with (a source's "3 stale" on the Overview). */
let preset: { filter?: Filter; source?: string } | null = null;

/** Opens the Variables page with a filter set (the Overview's and Sources page's quality counts). */
export function openVariables(p: { filter?: Filter; source?: string }): void {
  preset = p;
  location.hash = '#/variables';
}

/** The order of the quality filters: what needs a look first after All. */
const QUALITY_FILTERS: Quality[] = ['stale', 'bad', 'uncertain', 'none', 'good'];

function refusedTotal(r: LiveVariable): number {
  return r.refused ? Object.values(r.refused).reduce((a, c) => a + c, 0) : 0;
}

const present = (x: string | null): x is string => Boolean(x);

/** The rows a search and filter leave, and the counts the filter buttons show (each row's quality through its link, without allocating per row). */
function selectRows(vars: LiveVariable[], f: { needle: string; source: string; machine: string; filter: Filter }, links: LinkDown): { rows: LiveVariable[]; counts: Record<Quality, number>; refused: number } {
  const counts = Object.fromEntries(QUALITIES.map((x) => [x, 0])) as Record<Quality, number>;
  for (const v of vars) counts[shownQuality(v, links)] += 1;
  const byQuality = (QUALITIES as readonly string[]).includes(f.filter);
  const { needle } = f;
  const rows = vars.filter((v) => {
    if (needle && !v.id.toLowerCase().includes(needle) && !(v.source ?? '').toLowerCase().includes(needle) && !(v.machine ?? '').toLowerCase().includes(needle)) return false;
    if (f.source && v.source !== f.source) return false;
    if (f.machine && v.machine !== f.machine) return false;
    if (f.filter === 'refused' && refusedTotal(v) === 0) return false;
    if (f.filter === 'set_aside' && !v.set_aside) return false;
    if (byQuality && shownQuality(v, links) !== f.filter) return false;
    return true;
  });
  return { rows, counts, refused: vars.filter((v) => refusedTotal(v) > 0).length };
}

/**
 * Every variable in one virtual table: only the rows in view are in the DOM, so 5,000 (or 50,000)
 * variables cost the same to draw and to update every second.
 */
export function Variables() {
  const s = useStore();
  const [q, setQ] = useState('');
  const [filter, setFilter] = useState<Filter>(() => preset?.filter ?? 'all');
  const [source, setSource] = useState(() => preset?.source ?? '');
  useEffect(() => {
    preset = null;
  }, []);
  const [machine, setMachine] = useState('');
  const [top, setTop] = useState(0);
  const [height, setHeight] = useState(600);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const on = () => setHeight(box.current?.clientHeight || 600);
    on();
    addEventListener('resize', on);
    return () => removeEventListener('resize', on);
  }, []);
  const vars = s.vars ?? [];
  // When the rows were first on screen (ms since navigation), for the first-render test.
  useEffect(() => {
    if (vars.length > 0 && window.__firstRowsMs === undefined) window.__firstRowsMs = performance.now();
  });
  const sources = useMemo(() => [...new Set(vars.map((v) => v.source).filter(present))].sort(naturalCompare), [vars]);
  const machines = useMemo(() => [...new Set(vars.map((v) => v.machine).filter(present))].sort(naturalCompare), [vars]);
  const now = Date.now();
  const links = linksOf(s.status);
  const { rows, counts, refused } = selectRows(vars, { needle: q.trim().toLowerCase(), source, machine, filter }, links);
  const first = Math.max(0, Math.floor(top / ROW) - 5);
  const last = Math.min(rows.length, first + Math.ceil(height / ROW) + 10);
  if (s.varsError && !s.vars) return <div class="empty">{s.varsError}</div>;
  if (!s.vars) return <div class="empty">Loading variables…</div>;
  const filters: Array<[Filter, string]> = [
    ['all', `All ${fmtNum(vars.length)}`],
    ...QUALITY_FILTERS.map((x): [Filter, string] => [x, `${QUALITY_LABEL[x]} ${fmtNum(counts[x])}`]),
    ['refused', `Refused ${fmtNum(refused)}`],
    ['set_aside', 'Set aside'],
  ];
  // What happens upstream to values that are not good, said where they are shown.
  const notes = (['bad', 'uncertain', 'stale'] as const).filter((x) => counts[x] > 0 && (filter === 'all' || filter === x));
  return (
    <div class="vars">
      <div class="toolbar">
        <input
          type="search"
          placeholder="Search variable, source, machine"
          value={q}
          onInput={(e) => {
            setQ(e.currentTarget.value);
            setTop(0);
            if (box.current) box.current.scrollTop = 0;
          }}
          data-testid="var-search"
        />
        <div class="seg">
          {filters.map(([k, l]) => (
            <button class={filter === k ? 'on' : ''} onClick={() => setFilter(k)} data-testid={`filter-${k}`}>
              {l}
            </button>
          ))}
        </div>
        <select value={source} onChange={(e) => setSource(e.currentTarget.value)} data-testid="filter-source">
          <option value="">All sources</option>
          {sources.map((x) => (
            <option value={x}>{x}</option>
          ))}
        </select>
        {machines.length > 0 ? (
          <select value={machine} onChange={(e) => setMachine(e.currentTarget.value)}>
            <option value="">All machines</option>
            {machines.map((x) => (
              <option value={x}>{x}</option>
            ))}
          </select>
        ) : (
          ''
        )}
        <span class="muted small" data-testid="var-count">
          {fmtNum(rows.length)} shown
        </span>
      </div>
      <QualityNotes shown={notes} />
      <div class="vhead">
        <span>Variable</span>
        <span>Source</span>
        <span>Machine</span>
        <span class="num">Value</span>
        <span>Quality</span>
        <span class="num">Age</span>
        <span class="num">Rate /s</span>
        <span>Refused</span>
        <span>Delivery</span>
        <span>Last 5 min</span>
      </div>
      <div class="vbody" ref={box} onScroll={(e) => setTop(e.currentTarget.scrollTop)} data-testid="var-table">
        <div style={`height:${rows.length * ROW}px;position:relative`}>
          {rows.slice(first, last).map((v, i) => (
            <VariableLine v={v} top={(first + i) * ROW} q={qualityOf(v, links)} now={now} />
          ))}
        </div>
      </div>
    </div>
  );
}

/** What happens upstream to the values of these qualities, said above the values. */
function QualityNotes({ shown }: { shown: readonly Quality[] }) {
  if (shown.length === 0) return null;
  return (
    <div class="qnotes" data-testid="quality-notes">
      {shown.map((x) => (
        <span>
          <span class={`pill ${QUALITY_CLASS[x]}`}>{QUALITY_LABEL[x]}</span> {QUALITY_UPSTREAM[x]}
        </span>
      ))}
    </div>
  );
}

/** One row of the virtual table, at `top` px. */
function VariableLine({ v, top, q, now }: { v: LiveVariable; top: number; q: QualityReading; now: number }) {
  return (
    <a class="vrow" href={`#/variables/${encodeURIComponent(v.id)}`} style={`top:${top}px`} data-testid={`var-${v.id}`}>
      <span class="mono ellipsis" title={v.id}>
        {v.id}
      </span>
      <span class="ellipsis" title={v.device ? `${v.source} · ${v.device}` : undefined}>
        {v.source ?? '–'}
        {v.device ? <span class="muted small"> · {v.device}</span> : ''}
      </span>
      <span class="ellipsis">{v.machine ?? ''}</span>
      <span class={`num mono q-${q.quality}`} data-testid={`value-${v.id}`} title={QUALITY_UPSTREAM[q.quality]}>
        {fmtNum(v.value)}
        {v.unit && v.value !== null ? <span class="unit"> {v.unit}</span> : ''}
      </span>
      <span>
        <span class={`pill small ${QUALITY_CLASS[q.quality]}`} data-testid={`quality-${v.id}`} title={q.since === null ? undefined : `since ${fmtTime(q.since)}`}>
          {q.quality === 'none' ? 'no value' : q.quality}
        </span>
      </span>
      <span class={`num ${q.quality === 'stale' ? 'stale' : ''}`} data-testid={`age-${v.id}`}>
        {v.ts === null ? 'never' : fmtAge(now - v.ts)}
      </span>
      <span class="num">{fmtNum(Math.round(v.rate * 100) / 100)}</span>
      <span class="ellipsis" data-testid={`refused-${v.id}`}>
        {v.refused
          ? Object.entries(v.refused).map(([r, n]) => (
              <span class="tag bad">
                {r.replace(/_/g, ' ')} {fmtNum(n)}
              </span>
            ))
          : ''}
      </span>
      <span>
        <span class={`dotlabel ${v.delivery}`}>{v.delivery.replace('_', ' ')}</span>
      </span>
      <span>
        <Spark values={v.spark} />
      </span>
    </a>
  );
}

export function VariableDetail({ id }: { id: string }) {
  useStore(); // drawn again with every tick: the value and its age stay current
  const [d, setD] = useState<VariableDetailResponse | null>(null);
  const [err, setErr] = useState<string | null>(null);
  useEffect(() => {
    let on = true;
    const load = () =>
      api<VariableDetailResponse>(`/console/api/variables/${encodeURIComponent(id)}`).then(
        (r) => on && (setD(r), setErr(null)),
        (e: unknown) => on && setErr(messageOf(e)),
      );
    void load();
    const t = setInterval(load, 5000);
    return () => {
      on = false;
      clearInterval(t);
    };
  }, [id]);
  if (err) return <div class="empty">{err}</div>;
  if (!d) return <div class="empty">Loading…</div>;
  const live = store.byId.get(id);
  const value = live?.value ?? d.value;
  const ts = live?.ts ?? d.ts;
  // The live row's stored quality is newer than the page's last load; either is seen through its link.
  const qv = qualityOf(live ?? { quality: d.quality, quality_since: d.quality_since, source: d.source, device: d.device }, linksOf(store.status));
  const unitDiffers = d.unit_configured !== null && d.unit_catalog !== null && d.unit_configured !== d.unit_catalog;
  const data: [number[], number[], number[]] = [d.trend.map((b) => b[0] / 1000), d.trend.map((b) => b[2]), d.trend.map((b) => b[1])];
  return (
    <div class="stack">
      <section class="card">
        <div class="card-head">
          <h2 class="mono">{id}</h2>
          <a href="#/variables" class="muted">
            ← all variables
          </a>
        </div>
        <div class="facts">
          <div>
            <b data-testid="detail-value">
              {fmtNum(value)}
              {d.unit && value !== null ? <span class="unit"> {d.unit}</span> : ''}
            </b>
            <span>last value</span>
          </div>
          <div>
            <b>
              <span class={`pill ${QUALITY_CLASS[qv.quality]}`} data-testid="detail-quality">
                {QUALITY_LABEL[qv.quality]}
              </span>
            </b>
            <span>quality{qv.since !== null ? ` since ${fmtTime(qv.since)}` : ''}</span>
          </div>
          <div>
            <b>{ts ? fmtAge(Date.now() - ts) : '–'}</b>
            <span>age ({ts ? fmtTime(ts) : 'never'})</span>
          </div>
          <div>
            <b>{fmtNum(Math.round(d.rate * 100) / 100)}</b>
            <span>samples/s</span>
          </div>
          <div>
            <b>{fmtNum(d.total)}</b>
            <span>samples since start</span>
          </div>
          <div>
            <b>{d.source ?? '–'}</b>
            <span>
              source{d.device ? ` · device ${d.device}` : ''}
              {d.machine ? ` · ${d.machine}` : ''}
            </span>
          </div>
        </div>
        <p class="muted small" data-testid="detail-upstream">
          {QUALITY_UPSTREAM[qv.quality]}
        </p>
        {unitDiffers ? (
          <div class="hint warn" data-testid="detail-unit-mismatch">
            The mapping gives the unit {d.unit_configured}, the organisation's catalog gives {d.unit_catalog}: check the mapping's scale and unit, or the catalog.
          </div>
        ) : (
          ''
        )}
      </section>
      <section class="card">
        <h2>Trend, last 10 minutes</h2>
        <p class="muted small">Minimum and maximum of each {d.bucket_ms / 1000} s, so short spikes stay visible.</p>
        {d.trend.length > 0 ? (
          <Chart
            data={data}
            series={[
              { label: 'max', color: '#1f6feb' },
              { label: 'min', color: '#6e9fe6' },
            ]}
            band={true}
            height={260}
            testid="trend-chart"
          />
        ) : (
          <p class="muted">No samples yet.</p>
        )}
      </section>
      <div class="grid2">
        <section class="card">
          <h2>Configuration</h2>
          {d.settings.length > 0 ? (
            <>
              <p class="muted small">{d.settings.join(', ')}</p>
              <pre class="code" data-testid="detail-config">{d.config_yaml ?? ''}</pre>
            </>
          ) : (
            <p class="muted">Not mapped in the configuration (stored under the name the device sent).</p>
          )}
        </section>
        <section class="card" data-testid="detail-refusals">
          <h2>Last refusals</h2>
          {d.refusals.last.length === 0 ? (
            <p class="muted">None since the gateway started.</p>
          ) : (
            <>
              <p>
                {Object.entries(d.refusals.byReason).map(([r, n]) => (
                  <span class="tag bad">
                    {r.replace(/_/g, ' ')} {fmtNum(n)}
                  </span>
                ))}
              </p>
              <table class="tbl">
                <thead>
                  <tr>
                    <th>When</th>
                    <th>Reason</th>
                    <th>Detail</th>
                  </tr>
                </thead>
                <tbody>
                  {[...d.refusals.last].reverse().map((r) => (
                    <tr>
                      <td>{fmtTime(r.at)}</td>
                      <td>{r.reason.replace(/_/g, ' ')}</td>
                      <td class="err-cell">{r.detail ?? ''}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </>
          )}
        </section>
      </div>
    </div>
  );
}
