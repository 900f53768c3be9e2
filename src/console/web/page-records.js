import { useEffect, useState } from 'preact/hooks';
import { api, html, fmtNum, fmtTime } from './lib.js';

function useLoad(path, deps = []) {
  const [state, set] = useState({ data: null, error: null, status: 0 });
  const load = () => api(path).then((data) => set({ data, error: null, status: 200 }), (e) => set({ data: null, error: e.message, status: e.status ?? 0 }));
  useEffect(() => { load(); const t = setInterval(load, 5000); return () => clearInterval(t); }, deps);
  return [state, load];
}

function message(detail) {
  if (detail === null || detail === undefined) return '';
  if (typeof detail === 'string') return detail;
  return detail.message ?? detail.error?.message ?? JSON.stringify(detail);
}

export function SetAside() {
  const [{ data, error }, reload] = useLoad('/api/set-aside?limit=500');
  const [picked, setPicked] = useState(new Set());
  const [note, setNote] = useState(null);
  const act = async (what, body) => {
    if (what === 'drop' && !confirm('Delete these samples for good? They are not sent.')) return;
    try {
      const r = await api(`/api/set-aside/${what}`, { method: 'POST', body });
      setNote({ ok: true, text: what === 'requeue' ? `${fmtNum(r.requeued)} samples back in the queue.${r.remaining > 0 ? ` ${fmtNum(r.remaining)} stay set aside.` : ''}` : `${fmtNum(r.dropped)} samples dropped.` });
      setPicked(new Set());
      reload();
    } catch (e) {
      // 503 from a requeue the buffer refused: the message says how many went back and why the rest stays.
      setNote({ ok: false, text: e.message });
      if (e.body?.requeued > 0) reload();
    }
  };
  if (error) return html`<div class="empty">${error}</div>`;
  if (!data) return html`<div class="empty">Loading…</div>`;
  const toggle = (id) => { const n = new Set(picked); n.has(id) ? n.delete(id) : n.add(id); setPicked(n); };
  return html`<div class="stack">
    <section class="card"><div class="card-head"><h2 data-testid="set-aside-total">${fmtNum(data.total)} samples set aside</h2>
      <div class="row"><button class="primary" disabled=${picked.size === 0} onClick=${() => act('requeue', { ids: [...picked] })} data-testid="requeue-selected">Requeue ${picked.size || ''}</button>
      <button disabled=${data.total === 0} onClick=${() => act('requeue', { all: true })} data-testid="requeue-all">Requeue all</button>
      <button class="danger" disabled=${picked.size === 0} onClick=${() => act('drop', { ids: [...picked] })}>Drop ${picked.size || ''}</button></div></div>
      <p class="muted">Samples the tracking service refused for good (for example an unknown machine variable). Fix the cause (the mapping or the variable in the service), then requeue; drop what must not be sent.</p>
      ${note ? html`<p class=${note.ok ? 'ok-line' : 'err-line'} data-testid="set-aside-note">${note.text}</p>` : ''}
      ${data.by_variable.length > 0 ? html`<h3 class="sub">By variable</h3><table class="tbl"><thead><tr><th>Variable</th><th class="num">Samples</th><th>Reason</th><th></th></tr></thead><tbody>${data.by_variable.map((v) => html`<tr><td class="mono">${v.variable ?? '(import file)'}</td><td class="num">${fmtNum(v.count)}</td><td>${v.reason}</td><td>${v.variable ? html`<button class="small" onClick=${() => act('requeue', { variable: v.variable })}>Requeue</button>` : ''}</td></tr>`)}</tbody></table>` : ''}
    </section>
    ${data.rows.length > 0 ? html`<section class="card"><h2>Samples</h2><table class="tbl" data-testid="set-aside-rows"><thead><tr><th></th><th>Variable</th><th>Time</th><th class="num">Value</th><th>Reason</th><th>Service's message</th></tr></thead>
      <tbody>${data.rows.map((r) => html`<tr><td><input type="checkbox" checked=${picked.has(r.id)} onChange=${() => toggle(r.id)} data-testid=${`pick-${r.id}`} /></td><td class="mono">${r.variable ?? '–'}</td><td>${fmtTime(r.ts)}</td><td class="num">${fmtNum(r.value)}</td><td>${r.reason}</td><td class="err-cell">${message(r.detail)}</td></tr>`)}</tbody></table></section>` : ''}
  </div>`;
}

export function Annotations() {
  const [{ data, error, status }] = useLoad('/api/annotations?limit=200');
  if (status === 0 && error && /no such path/.test(error)) return html`<div class="empty">Annotations are not configured on this gateway (annotations: in the configuration).</div>`;
  if (error) return html`<div class="empty">${/no such path/.test(error) ? 'Annotations are not configured on this gateway (annotations: in the configuration).' : error}</div>`;
  if (!data) return html`<div class="empty">Loading…</div>`;
  const list = data.annotations ?? data.entries ?? data;
  return html`<section class="card"><h2>Annotations</h2><p class="muted">Downtimes and notes queued for the tracking service, with its answer. Refused ones show the service's reason.</p>
    <table class="tbl" data-testid="annotations-table"><thead><tr><th>Created</th><th>Machine</th><th>Type</th><th>Text</th><th>State</th><th>Service's message</th></tr></thead>
    <tbody>${(Array.isArray(list) ? list : []).map((a) => html`<tr><td>${fmtTime(Date.parse(a.created_at ?? '') || a.created_at)}</td><td>${a.machine ?? '–'}</td><td>${a.type ?? a.body?.type ?? ''}</td><td>${a.text ?? a.body?.text ?? ''}</td><td><span class=${`pill ${a.state === 'delivered' ? 'ok' : a.state === 'refused' ? 'bad' : 'warn'}`}>${a.state}</span></td><td class="err-cell">${message(a.refusal ?? a.last_error ?? null)}</td></tr>`)}</tbody></table></section>`;
}

export function Gaps() {
  const [which, setWhich] = useState('open');
  const [{ data, error, status }] = useLoad(`/api/gaps?state=${which}&limit=500`, [which]);
  if (status === 404) return html`<div class="empty" data-testid="gaps-unavailable">gap ledger not available in this version</div>`;
  if (error) return html`<div class="empty">${error}</div>`;
  if (!data) return html`<div class="empty">Loading…</div>`;
  return html`<section class="card"><div class="card-head"><h2>${data.gaps.length} ${which === 'open' ? 'open ' : ''}gap${data.gaps.length === 1 ? '' : 's'}</h2>
    <div class="row"><button class=${which === 'open' ? 'primary' : ''} onClick=${() => setWhich('open')}>Open</button><button class=${which === 'all' ? 'primary' : ''} onClick=${() => setWhich('all')}>All</button></div></div>
    <p class="muted">Periods where data is missing upstream: a source was down, or samples could not be kept. Filled when the data arrived later.</p>
    <table class="tbl" data-testid="gaps-table"><thead><tr><th>Source</th><th>Variables</th><th>From</th><th>To</th><th>Reason</th><th>Filled</th><th>Annotation</th></tr></thead>
    <tbody>${data.gaps.map((g) => html`<tr data-testid=${`gap-${g.id}`}><td>${g.source}</td><td class="mono small">${g.variables ? g.variables.join(', ') : 'all of the source'}</td><td>${fmtTime(g.from)}</td><td>${g.to ? fmtTime(g.to) : html`<span class="pill bad">open</span>`}</td><td>${g.reason}</td>
      <td><span class=${`pill ${g.filled === 'yes' ? 'ok' : g.filled === 'no' ? 'bad' : 'warn'}`}>${g.filled}</span>${g.note ? html`<div class="small muted" data-testid="gap-note">${g.note}</div>` : ''}</td><td>${g.annotation ? `${g.annotation.state} (${g.annotation.external_id})` : '–'}</td></tr>`)}</tbody></table></section>`;
}
