/**
 * The operator (HMI) page, served at `/` by the gateway. One self-contained HTML document: no
 * external scripts, styles, fonts or images (plants are often offline; the page's CSP forbids
 * loading anything from elsewhere).
 *
 * Made for a 1024x600 touch panel: touch targets at least 52 px high, large type, high contrast.
 * One tile per configured machine with "Start downtime" / "Stop downtime", reason buttons from the
 * config, optional free text, and a list of recent entries with their delivery state (queued
 * offline / sending / delivered / refused with the service's reason).
 *
 * State lives in the gateway, not the page: an open downtime is read back from `/api/panel`, so a
 * reload (or a second panel) shows it with its original start. The reason picked and the text typed
 * during an open downtime are kept in the panel's localStorage until stop, so they survive a reload
 * too.
 *
 * API token: when the gateway listens beyond localhost, writes need `Authorization: Bearer
 * <http.api_token>`, and when api_token is set reads need it too (http.require_token_for_reads).
 * The first request that gets a 401 (the panel's data at load, or a write) opens a dialog; the
 * operator (or whoever sets up the panel) enters the token once and the page keeps it in
 * localStorage ("Token" button to change or forget it). The page itself (`/`) holds no data and
 * needs no token. Its writes are same-origin JSON requests, which the server's CSRF guard
 * (src/http/guard.ts) lets through.
 *
 * The page script avoids template literals so this module can hold it in a String.raw template.
 */

const PAGE = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1, user-scalable=no">
<title>__TITLE__</title>
<style>
  :root { --bg:#111417; --panel:#1d2227; --line:#323a42; --text:#f1f3f5; --muted:#9aa5b1; --red:#d9363e; --green:#2f9e44; --amber:#f59f00; --blue:#1c7ed6; }
  * { box-sizing: border-box; }
  html, body { margin:0; height:100%; background:var(--bg); color:var(--text); font: 18px/1.3 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; -webkit-user-select:none; user-select:none; }
  body { display:flex; flex-direction:column; overflow:hidden; }
  header { height:56px; flex:none; display:flex; align-items:center; gap:12px; padding:0 12px; background:var(--panel); border-bottom:1px solid var(--line); }
  header h1 { font-size:22px; margin:0; flex:1; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
  .pill { padding:6px 12px; border-radius:999px; font-size:16px; font-weight:600; white-space:nowrap; }
  .pill.ok { background:#1f3d29; color:#8ce99a; } .pill.warn { background:#4a3500; color:#ffd43b; } .pill.bad { background:#4a1518; color:#ffa8a8; }
  #clock { font-variant-numeric: tabular-nums; color:var(--muted); font-size:18px; }
  button { font:inherit; color:inherit; border:0; border-radius:10px; min-height:52px; padding:0 16px; cursor:pointer; touch-action:manipulation; }
  button:disabled { opacity:.5; }
  button:active { filter:brightness(1.25); }
  .small { min-height:44px; background:#2b333b; font-size:16px; }
  main { flex:1; display:flex; min-height:0; }
  #tiles { flex:1; overflow-y:auto; padding:10px; display:grid; grid-template-columns: repeat(auto-fill, minmax(320px, 1fr)); gap:10px; align-content:start; align-items:start; }
  aside { width:270px; flex:none; border-left:1px solid var(--line); display:flex; flex-direction:column; min-height:0; }
  aside h2 { font-size:16px; margin:0; padding:10px 12px; color:var(--muted); text-transform:uppercase; letter-spacing:.05em; border-bottom:1px solid var(--line); }
  #entries { flex:1; overflow-y:auto; margin:0; padding:0; list-style:none; }
  #entries li { padding:8px 12px; border-bottom:1px solid var(--line); font-size:15px; }
  #entries .meta { color:var(--muted); font-size:13px; display:flex; justify-content:space-between; gap:6px; }
  #entries .txt { margin:3px 0; overflow:hidden; display:-webkit-box; -webkit-line-clamp:2; -webkit-box-orient:vertical; word-break:break-word; }
  .badge { display:inline-block; padding:2px 8px; border-radius:6px; font-size:13px; font-weight:700; }
  .badge.delivered { background:#1f3d29; color:#8ce99a; } .badge.queued { background:#4a3500; color:#ffd43b; } .badge.sending { background:#12304d; color:#a5d8ff; } .badge.refused { background:#4a1518; color:#ffa8a8; }
  .refusal { color:#ffa8a8; font-size:13px; margin-top:2px; word-break:break-word; }
  .tile { background:var(--panel); border:2px solid var(--line); border-radius:12px; padding:10px; display:flex; flex-direction:column; gap:8px; }
  .tile.down { border-color:var(--red); }
  .tile.auto { border-color:var(--amber); }
  .tile .head { display:flex; flex-wrap:wrap; justify-content:space-between; align-items:baseline; column-gap:8px; }
  .tile .name { font-size:22px; font-weight:700; max-width:100%; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
  .tile .state { font-size:18px; font-weight:700; color:#8ce99a; font-variant-numeric: tabular-nums; white-space:nowrap; }
  .tile.down .state { color:#ffa8a8; }
  .tile.auto .state { color:#ffd43b; }
  .tile .auto-line { color:#ffd43b; font-size:16px; }
  .reasons { display:flex; flex-wrap:wrap; gap:6px; }
  .reason { background:#2b333b; min-height:52px; font-size:16px; line-height:1.15; padding:0 8px; flex:1 1 28%; }
  .reason.sel { background:var(--blue); font-weight:700; }
  input[type=text], input[type=password] { font:inherit; width:100%; min-height:52px; padding:0 12px; border-radius:10px; border:2px solid var(--line); background:#0b0d0f; color:var(--text); -webkit-user-select:text; user-select:text; }
  .actions { display:flex; gap:8px; }
  .start { background:var(--red); font-size:20px; font-weight:700; min-height:64px; width:100%; flex:none; }
  .stop { background:var(--green); font-size:20px; font-weight:700; min-height:64px; flex:2; }
  .discard { background:#2b333b; flex:1; font-size:16px; }
  .msg { font-size:16px; }
  .msg:empty { display:none; }
  .msg.err { color:#ffa8a8; } .msg.ok { color:#8ce99a; }
  .empty { color:var(--muted); padding:20px; }
  #banner { display:none; background:#4a1518; color:#ffa8a8; padding:8px 12px; font-weight:600; }
  #dialog { position:fixed; inset:0; background:rgba(0,0,0,.7); display:none; align-items:center; justify-content:center; }
  #dialog .box { background:var(--panel); border:1px solid var(--line); border-radius:12px; padding:20px; width:520px; display:flex; flex-direction:column; gap:12px; }
  #dialog p { margin:0; color:var(--muted); font-size:16px; }
</style>
</head>
<body>
<header>
  <h1 id="title">__TITLE__</h1>
  <span id="link" class="pill warn" data-testid="link">connecting…</span>
  <span id="clock"></span>
  <button class="small" id="tokenBtn" type="button">Token</button>
</header>
<div id="banner" data-testid="banner"></div>
<main>
  <section id="tiles" aria-label="Machines"><div class="empty">Loading…</div></section>
  <aside><h2>Recent entries</h2><ul id="entries" data-testid="entries"></ul></aside>
</main>
<div id="dialog" role="dialog" aria-modal="true">
  <div class="box">
    <strong>API token</strong>
    <p id="dialogText">This gateway needs its API token (http.api_token) for changes. It is kept on this panel.</p>
    <input type="password" id="tokenInput" data-testid="token-input" autocomplete="off" placeholder="token">
    <div class="actions">
      <button class="stop" id="tokenSave" type="button" data-testid="token-save">Save</button>
      <button class="discard" id="tokenForget" type="button">Forget</button>
      <button class="discard" id="tokenCancel" type="button">Cancel</button>
    </div>
  </div>
</div>
<script>
(function () {
  'use strict';
  var TOKEN_KEY = 'edge-gateway.api_token';
  var DRAFT_KEY = 'edge-gateway.draft.';
  var POLL_MS = 2000;
  var state = { panel: null, offset: 0, tiles: {}, machineKeys: '', busy: {}, pending: null, failures: 0 };

  function store(key, value) { try { if (value === null) localStorage.removeItem(key); else localStorage.setItem(key, value); } catch (e) { /* private mode: works without */ } }
  function load(key) { try { return localStorage.getItem(key); } catch (e) { return null; } }
  function el(tag, cls, text) { var e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; }
  function pad(n) { return (n < 10 ? '0' : '') + n; }
  function hhmm(ms) { var d = new Date(ms); return pad(d.getHours()) + ':' + pad(d.getMinutes()); }
  function elapsed(ms) { var s = Math.max(0, Math.floor(ms / 1000)); var h = Math.floor(s / 3600); var m = Math.floor((s % 3600) / 60); return (h > 0 ? h + ':' + pad(m) : m) + ':' + pad(s % 60); }
  function now() { return Date.now() + state.offset; }

  function api(method, path, body) {
    var headers = { 'x-annotation-origin': 'hmi' };
    var token = load(TOKEN_KEY);
    if (token) headers['authorization'] = 'Bearer ' + token;
    var init = { method: method, headers: headers, cache: 'no-store' };
    if (body !== undefined) { headers['content-type'] = 'application/json'; init.body = JSON.stringify(body); }
    else if (method !== 'GET') headers['x-requested-by'] = 'hmi'; // a bodiless write (cancel): the server's CSRF rule
    return fetch(path, init).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (j) { return { status: r.status, body: j }; });
    });
  }

  function draftKey(machine, downtime) { return DRAFT_KEY + machine + '.' + downtime; }
  function getDraft(machine, downtime) { try { return JSON.parse(load(draftKey(machine, downtime)) || '{}') || {}; } catch (e) { return {}; } }
  function setDraft(machine, downtime, d) { store(draftKey(machine, downtime), JSON.stringify(d)); }

  // ---------------------------------------------------------------- tiles

  function buildTiles(machines) {
    var root = document.getElementById('tiles');
    root.textContent = '';
    state.tiles = {};
    if (machines.length === 0) { root.appendChild(el('div', 'empty', 'No machines configured (annotations.machines).')); return; }
    machines.forEach(function (m) {
      var t = { key: m.key, downtimeId: null, reason: null, confirmDiscard: false };
      var tile = el('div', 'tile'); tile.setAttribute('data-testid', 'tile-' + m.key);
      var head = el('div', 'head');
      head.appendChild(el('div', 'name', m.name));
      t.stateEl = el('div', 'state', ''); t.stateEl.setAttribute('data-testid', 'state-' + m.key);
      head.appendChild(t.stateEl);
      tile.appendChild(head);
      t.autoEl = el('div', 'auto-line', ''); t.autoEl.style.display = 'none';
      tile.appendChild(t.autoEl);

      t.downPart = el('div'); t.downPart.style.cssText = 'display:none;flex-direction:column;gap:10px';
      var reasons = el('div', 'reasons');
      t.reasonBtns = [];
      m.reasons.forEach(function (r, i) {
        var b = el('button', 'reason', r); b.type = 'button'; b.setAttribute('data-testid', 'reason-' + m.key + '-' + i);
        b.addEventListener('click', function () { selectReason(t, t.reason === r ? null : r); });
        reasons.appendChild(b); t.reasonBtns.push({ reason: r, btn: b });
      });
      t.downPart.appendChild(reasons);
      t.textEl = el('input'); t.textEl.type = 'text'; t.textEl.maxLength = 4000; t.textEl.placeholder = 'Note (optional)'; t.textEl.setAttribute('data-testid', 'text-' + m.key);
      t.textEl.addEventListener('input', function () { saveDraft(t); });
      t.downPart.appendChild(t.textEl);
      var downActions = el('div', 'actions');
      t.stopBtn = el('button', 'stop', 'Stop downtime'); t.stopBtn.type = 'button'; t.stopBtn.setAttribute('data-testid', 'stop-' + m.key);
      t.stopBtn.addEventListener('click', function () { stop(t); });
      t.discardBtn = el('button', 'discard', 'Discard'); t.discardBtn.type = 'button'; t.discardBtn.setAttribute('data-testid', 'discard-' + m.key);
      t.discardBtn.addEventListener('click', function () { discard(t); });
      downActions.appendChild(t.stopBtn); downActions.appendChild(t.discardBtn);
      t.downPart.appendChild(downActions);
      tile.appendChild(t.downPart);

      t.startBtn = el('button', 'start', 'Start downtime'); t.startBtn.type = 'button'; t.startBtn.setAttribute('data-testid', 'start-' + m.key);
      t.startBtn.addEventListener('click', function () { start(t); });
      tile.appendChild(t.startBtn);
      t.msgEl = el('div', 'msg', ''); t.msgEl.setAttribute('data-testid', 'msg-' + m.key);
      tile.appendChild(t.msgEl);
      t.tile = tile;
      state.tiles[m.key] = t;
      root.appendChild(tile);
    });
  }

  function selectReason(t, r) {
    t.reason = r;
    t.reasonBtns.forEach(function (x) { x.btn.classList.toggle('sel', x.reason === r); });
    saveDraft(t);
  }
  function saveDraft(t) { if (t.downtimeId) setDraft(t.key, t.downtimeId, { reason: t.reason, text: t.textEl.value }); }
  function message(t, text, ok) { t.msgEl.textContent = text || ''; t.msgEl.className = 'msg' + (text ? (ok ? ' ok' : ' err') : ''); }

  function updateTile(t, m) {
    var d = m.downtime;
    var autoOpen = (m.detected || []).filter(function (x) { return x.open; });
    if (d && t.downtimeId !== d.external_id) {
      // A downtime (new, or found after a reload): restore what was picked and typed for it.
      t.downtimeId = d.external_id;
      var draft = getDraft(t.key, d.external_id);
      t.textEl.value = draft.text !== undefined ? draft.text : (d.text || '');
      selectReason(t, draft.reason !== undefined ? draft.reason : (d.reason || null));
    }
    if (!d) { t.downtimeId = null; t.confirmDiscard = false; t.discardBtn.textContent = 'Discard'; }
    t.tile.classList.toggle('down', !!d);
    t.tile.classList.toggle('auto', !d && autoOpen.length > 0);
    t.downPart.style.display = d ? 'flex' : 'none';
    t.startBtn.style.display = d ? 'none' : '';
    t.stateEl.setAttribute('data-started', d ? String(d.started_ms) : '');
    if (autoOpen.length > 0) {
      t.autoEl.style.display = '';
      t.autoEl.textContent = 'Detected since ' + hhmm(autoOpen[0].since) + ' (' + autoOpen[0].variable + ' ' + autoOpen[0].condition + '): recorded automatically when it ends';
    } else {
      t.autoEl.style.display = 'none';
    }
    var busy = !!state.busy[t.key];
    t.startBtn.disabled = busy; t.stopBtn.disabled = busy; t.discardBtn.disabled = busy;
    tick(t, m);
  }

  function tick(t, m) {
    var d = m && m.downtime;
    var auto = m && (m.detected || []).filter(function (x) { return x.open; })[0];
    if (d) t.stateEl.textContent = 'DOWN ' + elapsed(now() - d.started_ms) + ' since ' + hhmm(d.started_ms);
    else if (auto) t.stateEl.textContent = 'Stopped ' + elapsed(now() - auto.since);
    else t.stateEl.textContent = 'Running';
  }

  // ---------------------------------------------------------------- actions

  function act(t, path, body, onOk) {
    if (state.busy[t.key]) return;
    state.busy[t.key] = true;
    t.startBtn.disabled = t.stopBtn.disabled = t.discardBtn.disabled = true;
    message(t, '');
    api('POST', path, body).then(function (r) {
      state.busy[t.key] = false;
      if (r.status === 401) {
        state.pending = function () { act(t, path, body, onOk); };
        openDialog('This gateway needs its API token (http.api_token) for changes' + (load(TOKEN_KEY) ? ': the saved token was refused.' : '.') + ' It is kept on this panel.');
      } else if (r.status >= 200 && r.status < 300) {
        onOk(r.body);
      } else {
        var e = (r.body && r.body.error) || {};
        if (e.code === 'writes_disabled') message(t, 'Changes are disabled: the gateway listens on the network without http.api_token.');
        else if (e.field === 'reason') message(t, 'Pick a reason or write a note first.');
        else message(t, e.message || ('The gateway answered ' + r.status));
      }
      refresh();
    }, function () {
      state.busy[t.key] = false;
      message(t, 'No answer from the gateway. The tile shows what it has once it answers again; then try again if needed.');
      refresh();
    });
  }

  function path(t, action) { return '/api/machines/' + encodeURIComponent(t.key) + '/downtime/' + action; }
  function start(t) { act(t, path(t, 'start'), {}, function () { message(t, 'Downtime started', true); }); }
  function stop(t) {
    var id = t.downtimeId;
    var text = t.textEl.value.trim();
    act(t, path(t, 'stop'), { reason: t.reason, text: text || null }, function () {
      if (id) store(draftKey(t.key, id), null);
      t.textEl.value = ''; selectReason(t, null);
      message(t, 'Saved. Delivery state in the list.', true);
    });
  }
  function discard(t) {
    if (!t.confirmDiscard) { t.confirmDiscard = true; t.discardBtn.textContent = 'Tap again'; setTimeout(function () { t.confirmDiscard = false; t.discardBtn.textContent = 'Discard'; }, 4000); return; }
    var id = t.downtimeId;
    act(t, path(t, 'cancel'), undefined, function () { if (id) store(draftKey(t.key, id), null); message(t, 'Downtime discarded (nothing sent)', true); });
  }

  // ---------------------------------------------------------------- entries

  function renderEntries(entries, linkOk) {
    var ul = document.getElementById('entries');
    ul.textContent = '';
    if (!entries.length) { ul.appendChild(el('li', 'empty', 'Nothing yet.')); return; }
    var names = {};
    (state.panel.machines || []).forEach(function (m) { names[m.key] = m.name; });
    entries.forEach(function (e) {
      var li = el('li'); li.setAttribute('data-testid', 'entry-' + e.external_id); li.setAttribute('data-state', e.state);
      var meta = el('div', 'meta');
      var when = e.type === 'range' ? hhmm(Date.parse(e.started_at)) + '–' + hhmm(Date.parse(e.ended_at)) : hhmm(Date.parse(e.occurred_at));
      meta.appendChild(el('span', '', when + (e.machine ? ' · ' + (names[e.machine] || e.machine) : '')));
      var badge;
      if (e.state === 'delivered') badge = el('span', 'badge delivered', 'Delivered');
      else if (e.state === 'refused') badge = el('span', 'badge refused', 'Refused');
      else if (!linkOk || e.attempts > 0) badge = el('span', 'badge queued', 'Queued (offline)');
      else badge = el('span', 'badge sending', 'Sending…');
      badge.setAttribute('data-testid', 'badge-' + e.external_id);
      meta.appendChild(badge);
      li.appendChild(meta);
      li.appendChild(el('div', 'txt', e.text));
      if (e.state === 'refused' && e.refusal) li.appendChild(el('div', 'refusal', e.refusal));
      ul.appendChild(li);
    });
  }

  // ---------------------------------------------------------------- polling

  function render() {
    var p = state.panel;
    var keys = p.machines.map(function (m) { return m.key + '=' + m.reasons.join('|'); }).join(',');
    if (keys !== state.machineKeys) { buildTiles(p.machines); state.machineKeys = keys; }
    p.machines.forEach(function (m) { var t = state.tiles[m.key]; if (t) updateTile(t, m); });
    var linkOk = p.uplink.condition === 'ok';
    var link = document.getElementById('link');
    var q = p.counts.queued;
    link.className = 'pill ' + (linkOk ? (q > 0 ? 'warn' : 'ok') : 'bad');
    link.textContent = linkOk ? (q > 0 ? 'Online · ' + q + ' to send' : 'Online') : 'Offline · ' + q + ' queued';
    renderEntries(p.recent, linkOk);
  }

  function refresh() {
    api('GET', '/api/panel').then(function (r) {
      if (r.status === 401) {
        // Reads need the token too (http.require_token_for_reads): ask once, then show the data.
        if (document.getElementById('dialog').style.display !== 'flex') {
          state.pending = refresh;
          openDialog('This gateway needs its API token (http.api_token) to show its machines' + (load(TOKEN_KEY) ? ': the saved token was refused.' : '.') + ' It is kept on this panel.');
        }
        return;
      }
      if (r.status !== 200) throw new Error('status ' + r.status);
      state.failures = 0;
      state.panel = r.body;
      state.offset = r.body.now - Date.now();
      document.getElementById('banner').style.display = 'none';
      render();
    }).catch(function () {
      state.failures += 1;
      if (state.failures >= 2) {
        var b = document.getElementById('banner');
        b.textContent = 'The gateway does not answer. Showing the last known state.';
        b.style.display = 'block';
        var link = document.getElementById('link'); link.className = 'pill bad'; link.textContent = 'Gateway unreachable';
      }
    });
  }

  // ---------------------------------------------------------------- token dialog

  function openDialog(text) {
    document.getElementById('dialogText').textContent = text;
    document.getElementById('tokenInput').value = '';
    document.getElementById('dialog').style.display = 'flex';
    document.getElementById('tokenInput').focus();
  }
  function closeDialog() { document.getElementById('dialog').style.display = 'none'; }
  document.getElementById('tokenBtn').addEventListener('click', function () { state.pending = null; openDialog('API token of this gateway (http.api_token), needed for changes when the gateway listens on the network. It is kept on this panel.'); });
  document.getElementById('tokenSave').addEventListener('click', function () {
    var v = document.getElementById('tokenInput').value.trim();
    if (v) store(TOKEN_KEY, v);
    closeDialog();
    var p = state.pending; state.pending = null;
    if (p && v) p();
  });
  document.getElementById('tokenForget').addEventListener('click', function () { store(TOKEN_KEY, null); state.pending = null; closeDialog(); });
  document.getElementById('tokenCancel').addEventListener('click', function () { state.pending = null; closeDialog(); });

  setInterval(function () {
    var d = new Date(now());
    document.getElementById('clock').textContent = pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
    if (state.panel) state.panel.machines.forEach(function (m) { var t = state.tiles[m.key]; if (t) tick(t, m); });
  }, 1000);
  setInterval(refresh, POLL_MS);
  refresh();
})();
</script>
</body>
</html>
`;

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** The page with the configured title. */
export function hmiPage(title: string): string {
  return PAGE.split('__TITLE__').join(escapeHtml(title));
}
