// Shared helpers of the console: API calls with the optional bearer token, the live stream, formatting.
import { h, render } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);

const TOKEN_KEY = 'edge-gateway.console.token';
export function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY); } catch { return null; }
}
export function setToken(t) {
  try { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); } catch { /* private mode */ }
}

/** Resolves with the token the user typed, or null when cancelled (a modal on top of the page). */
let tokenPrompt = null;
export function askToken(message) {
  if (tokenPrompt) return tokenPrompt;
  tokenPrompt = new Promise((resolve) => {
    const host = document.createElement('div');
    document.body.appendChild(host);
    const done = (v) => { render(null, host); host.remove(); tokenPrompt = null; resolve(v); };
    const onSubmit = (e) => { e.preventDefault(); const v = e.target.elements.token.value.trim(); if (v) setToken(v); done(v || null); };
    render(html`<div class="modal" role="dialog" aria-modal="true"><form class="modal-box" onSubmit=${onSubmit}>
      <h3>API token needed</h3><p>${message}</p>
      <input name="token" type="password" autocomplete="off" data-testid="token-input" placeholder="http.api_token" autofocus />
      <div class="row"><button class="primary" type="submit" data-testid="token-save">Use token</button><button type="button" onClick=${() => done(null)}>Cancel</button></div>
      <p class="muted small">Kept in this browser tab only (sessionStorage).</p></form></div>`, host);
  });
  return tokenPrompt;
}

/** An error answer of the gateway, with its `{error: {code, message, field}}`. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code;
    this.field = body?.error?.field;
    this.body = body;
  }
}

/** fetch with the token; a 401 asks for the token once and tries again. Writes send JSON. */
export async function api(path, { method = 'GET', body } = {}) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const headers = { accept: 'application/json' };
    const token = getToken();
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    if (res.status === 401 && attempt === 0) {
      setToken(null);
      const t = await askToken(json?.error?.message ?? 'This gateway asks for its API token.');
      if (t) continue;
    }
    if (!res.ok) throw new ApiError(res.status, json);
    return json;
  }
}

/**
 * The live stream: server-sent events read with fetch (EventSource cannot send the Authorization
 * header). Reconnects by itself with a growing delay; `onState` says connected / lost.
 */
export function connectLive({ onHello, onTick, onState }) {
  let stopped = false;
  let ctrl = null;
  let delay = 1000;
  const run = async () => {
    while (!stopped) {
      ctrl = new AbortController();
      let watchdog = null;
      try {
        const headers = { accept: 'text/event-stream' };
        const token = getToken();
        if (token) headers.authorization = `Bearer ${token}`;
        const res = await fetch('/console/api/events', { headers, signal: ctrl.signal, cache: 'no-store' });
        if (res.status === 401) { onState('auth'); await askToken('Reading this gateway needs its API token.'); continue; }
        // Too many streams open (http.max_streams_per_client / max_streams): wait as told, then try again.
        if (res.status === 429 || res.status === 503) {
          onState('busy');
          const wait = Math.min(60, Math.max(1, Number(res.headers.get('retry-after')) || 5)) * 1000;
          await res.body?.cancel();
          await new Promise((r) => setTimeout(r, wait));
          continue;
        }
        if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
        onState('live');
        delay = 1000;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        // A gateway that stops answering without closing the socket: no tick for 5 s is a loss.
        const arm = () => { clearTimeout(watchdog); watchdog = setTimeout(() => ctrl.abort(), 5000); };
        arm();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          arm();
          buf += value;
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let event = 'message';
            let data = '';
            for (const line of frame.split('\n')) {
              if (line.startsWith('event:')) event = line.slice(6).trim();
              else if (line.startsWith('data:')) data += line.slice(5).trim();
            }
            if (!data) continue;
            const msg = JSON.parse(data);
            if (event === 'hello') onHello(msg);
            else if (event === 'tick') onTick(msg);
          }
        }
      } catch { /* lost: retried below */ }
      clearTimeout(watchdog);
      if (stopped) return;
      onState('lost');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 1.5, 5000);
    }
  };
  run();
  return () => { stopped = true; ctrl?.abort(); };
}

export function fmtNum(v) {
  if (v === null || v === undefined) return '–';
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e7 || a < 1e-3)) return v.toExponential(3);
  return Number.isInteger(v) ? v.toLocaleString('en-US') : v.toLocaleString('en-US', { maximumFractionDigits: a < 10 ? 3 : a < 1000 ? 2 : 1 });
}

export function fmtAge(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  const s = Math.max(0, ms / 1000);
  if (s < 1) return 'now';
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

export function fmtDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return '–';
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${String(Math.round((s % 3600) / 60)).padStart(2, '0')} min`;
}

export function fmtBytes(n) {
  if (!Number.isFinite(n)) return '–';
  const u = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${u[i]}`;
}

export function fmtTime(ms) {
  if (!ms) return '–';
  const d = new Date(ms);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export const STATE_CLASS = { connected: 'ok', degraded: 'warn', connecting: 'warn', starting: 'warn', disconnected: 'bad', stopped: 'bad' };
