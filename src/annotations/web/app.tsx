/**
 * The operator panel, served at `/` by the gateway (src/annotations/hmi-page.ts): Preact, bundled
 * with the console's code (src/web/build.mjs); nothing is loaded from elsewhere (plants are often
 * offline; the page's CSP forbids it).
 *
 * Made for a 1024x600 touch panel: touch targets at least 52 px high, large type, high contrast.
 * One tile per configured machine with "Start downtime" / "Stop downtime", reason buttons from the
 * config, optional free text, and a list of recent entries with their delivery state (queued
 * offline / sending / delivered / refused with the service's reason).
 *
 * State lives in the gateway, not the page: an open downtime is read back from `/api/panel`, so a
 * reload (or a second panel) shows it with its original start. The reason picked and the text typed
 * during an open downtime are kept in the panel's localStorage until stop, so they survive a reload
 * too. A tap the gateway does not answer (down, restarting, the network cut) is not refused: it is
 * kept in localStorage with its time and sent, in order, when the gateway answers again
 * (kept-taps.ts); meanwhile the tile shows what it will do.
 *
 * Each tile also shows what the machine itself says: its state in the operator's words (from a
 * downtime detector's variable, annotations.detectors[].states) and its active OPC UA alarms.
 *
 * API token: when the gateway listens beyond localhost, writes need `Authorization: Bearer
 * <http.api_token>`, and when api_token is set reads need it too (http.require_token_for_reads).
 * The first request that gets a 401 (the panel's data at load, or a write) opens a dialog; the
 * operator (or whoever sets up the panel) enters the token once and the page keeps it in
 * localStorage ("Token" button to change or forget it). The page itself (`/`) holds no data and
 * needs no token. Its writes are same-origin JSON requests, which the server's CSRF guard
 * (src/http/guard.ts) lets through.
 */
import '../../web/base.css';
import './panel.css';
import { h, Fragment, render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { pad } from '../../web/format.js';
import { errorOf } from '../../web/request.js';
import { Entries } from './entries.js';
import { call, readPanel, token, type PanelView } from './requests.js';
import type { WriteOutcome } from './kept-taps.js';
import { Tile } from './tile.js';
import { TokenDialog } from './token-dialog.js';

const POLL_MS = 2000;
const KEPT = ' It is kept on this panel.';

function Panel({ title }: { title: string }) {
  const [panel, setPanel] = useState<PanelView | null>(null);
  const [failures, setFailures] = useState(0);
  // Answered reads so far: each one lets the tiles send what they kept.
  const [answered, setAnswered] = useState(0);
  const [dialog, setDialog] = useState<{ text: string; n: number } | null>(null);
  const [, setSecond] = useState(0);
  // The gateway's clock minus this panel's: times shown are the gateway's.
  const offset = useRef(0);
  const dialogOpen = useRef(false);
  // What waits for the token: the read or the write that got the 401.
  const pending = useRef<(() => void) | null>(null);

  const openDialog = (text: string) => {
    dialogOpen.current = true;
    setDialog((d) => ({ text, n: (d?.n ?? 0) + 1 }));
  };
  const closeDialog = () => {
    dialogOpen.current = false;
    setDialog(null);
  };
  const savedTokenNote = () => (token.get() ? ': the saved token was refused.' : '.');

  const refresh = async (): Promise<void> => {
    try {
      const r = await readPanel();
      if (r.status === 401) {
        // Reads need the token too (http.require_token_for_reads): ask once, then show the data.
        if (!dialogOpen.current) {
          pending.current = () => void refresh();
          openDialog(`This gateway needs its API token (http.api_token) to show its machines${savedTokenNote()}${KEPT}`);
        }
        return;
      }
      if (r.status !== 200) throw new Error(`status ${r.status}`);
      const p = r.body as PanelView;
      offset.current = p.now - Date.now();
      setFailures(0);
      setPanel(p);
      setAnswered((n) => n + 1);
    } catch {
      setFailures((f) => f + 1);
    }
  };

  const write = async (path: string, body: unknown, retry: () => void): Promise<WriteOutcome> => {
    let r;
    try {
      r = await call('POST', path, body);
    } catch {
      // No answer: the page shows it at once (a read may be seconds away) and the tile keeps the tap.
      setFailures((f) => Math.max(f, 2));
      return { kind: 'unreachable' };
    }
    if (r.status === 401) {
      pending.current = retry;
      openDialog(`This gateway needs its API token (http.api_token) for changes${savedTokenNote()}${KEPT}`);
      return { kind: 'auth' };
    }
    if (r.status >= 200 && r.status < 300) return { kind: 'ok', body: r.body };
    // "Not now": the gateway is stopping or busy; the tap is kept and sent at its next answer.
    if (r.status >= 500 || r.status === 429) return { kind: 'unreachable' };
    const e = errorOf(r.body) ?? {};
    if (e.code === 'writes_disabled') return { kind: 'error', code: e.code, message: 'Changes are disabled: the gateway listens on the network without http.api_token.' };
    return { kind: 'error', code: e.code, field: e.field, message: e.message || `The gateway answered ${r.status}` };
  };

  useEffect(() => {
    void refresh();
    const poll = setInterval(() => void refresh(), POLL_MS);
    const clock = setInterval(() => setSecond((x) => x + 1), 1000);
    return () => {
      clearInterval(poll);
      clearInterval(clock);
    };
  }, []);

  const now = Date.now() + offset.current;
  const d = new Date(now);
  const unreachable = failures >= 2;
  const linkOk = panel?.uplink.condition === 'ok';
  const queued = panel?.counts.queued ?? 0;
  const [linkClass, linkText] = unreachable
    ? ['bad', 'Gateway unreachable']
    : !panel
      ? ['warn', 'connecting…']
      : linkOk
        ? [queued > 0 ? 'warn' : 'ok', queued > 0 ? `Online · ${queued} to send` : 'Online']
        : ['bad', `Offline · ${queued} queued`];
  return (
    <>
      <header>
        <h1 id="title">{title}</h1>
        <span id="link" class={`pill ${linkClass}`} data-testid="link">
          {linkText}
        </span>
        <span id="clock">{`${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`}</span>
        <button
          class="small"
          id="tokenBtn"
          type="button"
          onClick={() => {
            pending.current = null;
            openDialog(`API token of this gateway (http.api_token), needed for changes when the gateway listens on the network.${KEPT}`);
          }}
        >
          Token
        </button>
      </header>
      {unreachable ? (
        <div id="banner" data-testid="banner">
          The gateway does not answer. Showing the last known state; taps are kept on this panel and sent when it answers.
        </div>
      ) : (
        ''
      )}
      <main>
        <section id="tiles" aria-label="Machines">
          {!panel ? (
            <div class="empty">Loading…</div>
          ) : panel.machines.length === 0 ? (
            <div class="empty">No machines configured (annotations.machines).</div>
          ) : (
            // Keyed by machine and reasons: a changed list of reasons is a new tile.
            panel.machines.map((m) => (
              <Tile key={`${m.key}=${m.reasons.join('|')}`} machine={m} now={now} gatewayNow={() => Date.now() + offset.current} online={!unreachable && failures === 0} answered={answered} write={write} refresh={refresh} />
            ))
          )}
        </section>
        <aside>
          <h2>Recent entries</h2>
          {panel ? <Entries entries={panel.recent} machines={panel.machines} linkOk={linkOk} /> : <ul id="entries" data-testid="entries"></ul>}
        </aside>
      </main>
      {dialog ? (
        <TokenDialog
          key={dialog.n}
          text={dialog.text}
          onSave={(v) => {
            if (v) token.set(v);
            closeDialog();
            const p = pending.current;
            pending.current = null;
            if (p && v) p();
          }}
          onForget={() => {
            token.set(null);
            pending.current = null;
            closeDialog();
          }}
          onCancel={() => {
            pending.current = null;
            closeDialog();
          }}
        />
      ) : (
        ''
      )}
    </>
  );
}

render(<Panel title={document.title} />, document.getElementById('app')!);
