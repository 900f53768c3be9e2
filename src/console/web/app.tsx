// The commissioning console: a single-page app on /console (hash routes), Preact.
import '../../web/base.css';
import './style.css';
import { h, Fragment, render, type ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { fmtAge, fmtDuration, fmtNum } from '../../web/format.js';
import { STATE_CLASS } from './lib.js';
import { useStore, loadVariables, startLive } from './store.js';
import { Overview } from './page-overview.js';
import { Variables, VariableDetail } from './page-variables.js';
import { Sources } from './page-sources.js';
import { SetAside, Gaps } from './page-records.js';
import { Annotations } from './page-annotations.js';
import { Build } from './page-build.js';
import { Fleet } from './page-fleet.js';
import { DemoControls } from './demo-controls.js';

const NAV: Array<[key: string, label: string]> = [
  ['overview', 'Overview'],
  ['variables', 'Variables'],
  ['sources', 'Sources'],
  ['set-aside', 'Set-aside'],
  ['gaps', 'Gaps'],
  ['annotations', 'Annotations'],
  ['fleet', 'Fleet'],
  ['build', 'Build the config'],
];

function useRoute(): string[] {
  const get = () => (location.hash.replace(/^#\/?/, '') || 'overview').split('/').map(decodeURIComponent);
  const [route, setRoute] = useState(get);
  useEffect(() => {
    const on = () => setRoute(get());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

function LinkBadge() {
  const s = useStore();
  const [, tick] = useState(0);
  useEffect(() => {
    const t = setInterval(() => tick((x) => x + 1), 1000);
    return () => clearInterval(t);
  }, []);
  if (s.live === 'live') return <span class="pill ok" data-testid="link">Live</span>;
  if (s.live === 'auth') return <span class="pill warn" data-testid="link">Token needed</span>;
  if (s.live === 'busy') return <span class="pill warn" data-testid="link" title="http.max_streams_per_client or http.max_streams reached">Too many consoles open · retrying</span>;
  if (s.live === 'lost') return <span class="pill bad" data-testid="link">Connection lost {s.lostSince ? fmtAge(Date.now() - s.lostSince) : ''} · retrying</span>;
  return <span class="pill warn" data-testid="link">Connecting…</span>;
}

function Shell() {
  const route = useRoute();
  const s = useStore();
  const page = route[0];
  const st = s.status;
  const down = st ? st.sources.filter((x) => STATE_CLASS[x.state] === 'bad').length : 0;
  let body: ComponentChildren;
  if (page === 'variables' && route[1]) body = <VariableDetail id={route[1]} />;
  else if (page === 'variables') body = <Variables />;
  else if (page === 'sources') body = <Sources />;
  else if (page === 'set-aside') body = <SetAside />;
  else if (page === 'gaps') body = <Gaps />;
  else if (page === 'annotations') body = <Annotations />;
  else if (page === 'fleet') body = <Fleet />;
  else if (page === 'build') body = <Build />;
  else body = <Overview />;
  return (
    <div class="layout">
      <nav class="side">
        <div class="brand">
          <div class="logo">EG</div>
          <div>
            <div class="bname">{st?.gateway.name ?? 'gateway'}</div>
            <div class="bsub">edge-gateway {st?.gateway.version ?? ''}</div>
          </div>
        </div>
        {NAV.map(([k, label]) => (
          <a href={`#/${k}`} class={page === k ? 'active' : ''} data-testid={`nav-${k}`}>
            {label}
            {k === 'sources' && down > 0 ? <span class="count bad">{down}</span> : ''}
            {k === 'set-aside' && st && st.set_aside.samples > 0 ? <span class="count warn">{fmtNum(st.set_aside.samples)}</span> : ''}
          </a>
        ))}
        <div class="side-foot">
          <a href="/" class="muted">Operator panel</a>
          <a href="/status" class="muted">/status JSON</a>
          <a href="/metrics" class="muted">/metrics</a>
        </div>
      </nav>
      <div class="main">
        <header class="top">
          <div class="crumbs">
            {NAV.find(([k]) => k === page)?.[1] ?? 'Overview'}
            {route[1] ? <> / <span class="mono">{route[1]}</span></> : ''}
          </div>
          <div class="top-right">
            {st ? (
              <span class="muted small">
                up {fmtDuration(st.gateway.uptime_s)} · uplink <span data-testid="header-uplink" data-state={st.uplink.state?.state ?? st.uplink.condition}>{st.uplink.state?.text ?? st.uplink.condition}</span>
              </span>
            ) : (
              ''
            )}
            <LinkBadge />
          </div>
        </header>
        {s.live === 'lost' ? <div class="banner bad" data-testid="lost-banner">The connection to the gateway is lost. Values shown are from before; the console reconnects by itself.</div> : ''}
        <main class="content">
          <DemoControls />
          {body}
        </main>
      </div>
    </div>
  );
}

startLive();
void loadVariables();
const root = document.getElementById('app')!;
// The shell's "Loading the console…" line (console/assets.ts) goes: Preact renders beside what it
// finds, and the line stayed above the console (issue 24 §4).
root.replaceChildren();
render(<Shell />, root);
