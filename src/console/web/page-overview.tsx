import { h, Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { GatewayStatus, OverviewResponse, RefusalCondition } from '../api/live.js';
import { fmtAge, fmtAgo, fmtBytes, fmtDuration, fmtNum, fmtTime } from '../../web/format.js';
import { api, messageOf, STATE_CLASS } from './lib.js';
import { useStore } from './store.js';
import { Chart } from './charts.js';
import { QualityCounts } from './quality-counts.js';

interface Problem {
  level: 'bad' | 'warn';
  text: string;
  href?: string;
}

/** Problems first, in plain words: what an engineer has to act on, worst first. */
export function problemsOf(st: GatewayStatus | null, refusing: RefusalCondition[] | undefined): Problem[] {
  const out: Problem[] = [];
  if (!st) return out;
  for (const s of st.sources) {
    const devices = deviceDetails(s);
    // A source of devices (Modbus) is down or up device by device: each problem names its device.
    if (devices.length > 0) for (const d of devices) deviceProblem(s, d, out);
    else sourceProblem(s, out);
    qualityProblem(s, out);
  }
  if (!st.buffer.writable) out.push({ level: 'bad', text: `The buffer cannot be written (${st.buffer.last_write_error?.code ?? 'error'}): new samples are not kept.` });
  if (st.buffer.dropped_total > 0) out.push({ level: 'bad', text: `${fmtNum(st.buffer.dropped_total)} samples were dropped because the buffer was full (buffer.when_full).` });
  if (st.uplink.condition === 'auth_failed' || st.uplink.condition === 'halted') out.push({ level: 'bad', text: `The tracking service refuses the gateway: ${st.uplink.reason}` });
  else if (st.uplink.condition !== 'ok') out.push({ level: 'warn', text: outageProblem(st) });
  if (st.uplink.state?.state === 'rate_limited') out.push({ level: 'warn', text: `The service limits the request rate: ${st.uplink.state.text}, below the budget of ${fmtNum(st.uplink.budget_per_minute)}/min. Another client shares the address.` });
  const unknown = st.uplink.unknown_variables;
  if (unknown && unknown.count > 0) out.push({ level: 'bad', text: unknownVariablesProblem(unknown, st.set_aside.samples), href: '#/set-aside' });
  else if (st.set_aside.samples > 0) out.push({ level: 'warn', text: `${fmtNum(st.set_aside.samples)} samples were refused by the service and set aside.`, href: '#/set-aside' });
  const d = st.delivery;
  if (d && d.above_sync_capacity) out.push({ level: d.state === 'growing' ? 'bad' : 'warn', text: capacityText(d) });
  else if (d?.state === 'growing') out.push({ level: 'warn', text: `The backlog grows (${fmtNum(d.backlog_rise_30s ?? d.backlog_change_30s ?? 0)} samples in 30 s${d.growing_since ? `, since ${fmtTime(Date.parse(d.growing_since))}` : ''}): ${fmtNum(d.delivered_per_s)}/s delivered, ${fmtNum(d.ingest_per_s)}/s arriving.` });
  if (st.buffer.oldest_unsent_age_s !== null && st.buffer.oldest_unsent_age_s > 60) out.push({ level: 'warn', text: `The oldest unsent sample is ${fmtDuration(st.buffer.oldest_unsent_age_s)} old (${fmtNum(st.buffer.samples)} waiting).` });
  // Only while it goes on: a blip (an unknown Sparkplug alias until the rebirth) clears a minute after it ended.
  for (const c of refusing ?? []) out.push({ level: 'warn', text: refusalText(c), href: '#/variables' });
  if (st.config.last_reload?.outcome === 'refused') out.push({ level: 'warn', text: `The last configuration change was refused: ${(st.config.last_reload.problems ?? []).join('; ')}` });
  return out;
}

type SourceStatus = GatewayStatus['sources'][number];

/** "Down" from when it stopped being connected, not from its latest retry (issue 24 §1). */
function sourceProblem(s: SourceStatus, out: Problem[]): void {
  const down = s.downSince ?? (s.state === 'disconnected' || s.state === 'stopped' ? s.since : null);
  const error = s.lastError ? `: ${s.lastError.message} (${fmtTime(s.lastError.at)})` : '';
  if (down !== null && s.state !== 'connected' && s.state !== 'degraded') out.push({ level: 'bad', text: `${s.name} (${s.kind}) is down for ${fmtAge(Math.max(1_000, Date.now() - down))} (since ${fmtTime(down)}, now ${s.state})${error}`, href: '#/sources' });
  else if (s.state !== 'connected') out.push({ level: 'warn', text: `${s.name} (${s.kind}) is ${s.state}${error}`, href: '#/sources' });
}

/** A device's problem names the device ("Mixer 1"), then where it is; its state is the row's. */
function deviceProblem(s: SourceStatus, d: DeviceDetail, out: Problem[]): void {
  const state = String(d.state ?? 'unknown');
  if (state === 'connected') return;
  const name = d.name ?? d.device ?? '?';
  const where = `${KIND_WORD[s.kind] ?? s.kind} device${d.unit_id !== undefined ? ` unit ${String(d.unit_id)}` : ''}${d.endpoint ? ` at ${String(d.endpoint)}` : ''}`;
  const why = text(d.last_problem ?? d.last_error ?? null);
  const error = why ? `: ${why}` : '';
  const down = typeof d.down_since === 'number' ? d.down_since : null;
  if (down !== null && state !== 'degraded') out.push({ level: 'bad', text: `${name} (${where}) is down for ${fmtAge(Math.max(1_000, Date.now() - down))} (since ${fmtTime(down)}, now ${state})${error}`, href: '#/sources' });
  else out.push({ level: 'warn', text: `${name} (${where}) is ${state === 'degraded' ? 'answering only some reads' : state}${error}`, href: '#/sources' });
}

const KIND_WORD: Record<string, string> = { modbus: 'Modbus', opcua: 'OPC UA', mqtt: 'MQTT' };

/** Variables that are bad or uncertain, or stale while their link is up (a Sparkplug death, a poll that stopped). */
function qualityProblem(s: SourceStatus, out: Problem[]): void {
  const v = s.variables;
  if (!v) return;
  const up = s.state === 'connected' || s.state === 'degraded';
  const parts = [v.bad > 0 ? `${fmtNum(v.bad)} bad` : '', v.uncertain > 0 ? `${fmtNum(v.uncertain)} uncertain` : '', up && v.stale > 0 ? `${fmtNum(v.stale)} stale` : ''].filter(Boolean);
  if (parts.length === 0) return;
  out.push({ level: 'warn', text: `${s.name}: ${parts.join(', ')} of its ${fmtNum(v.total)} variables (bad values are not sent; see the Variables page).`, href: '#/variables' });
}

/** A refusal that goes on, with its source and over what time. */
export function refusalText(c: RefusalCondition): string {
  const vars = c.variables.length > 0 ? ` (${c.variables.join(', ')}${c.count > c.variables.length ? ', …' : ''})` : '';
  const span = c.last_at > c.first_at ? ` between ${fmtTime(c.first_at)} and ${fmtTime(c.last_at)}` : ` at ${fmtTime(c.last_at)}`;
  return `Recent values refused: ${c.reason.replace(/_/g, ' ')} from ${c.source}${vars}, ${fmtNum(c.count)}${span}.`;
}

/**
 * Issue 24 §1: one problem for every unknown variable, naming a few, their sources and what the
 * service said; their samples are set aside (the uplink itself is fine: the rest is delivered).
 */
export function unknownVariablesProblem(u: GatewayStatus['uplink']['unknown_variables'], setAside: number): string {
  const shown = u.examples.slice(0, 3).map((e) => e.variable);
  const names = `${shown.join(', ')}${u.count > shown.length ? ', …' : ''}`;
  const sources = Object.entries(u.by_source)
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${fmtNum(n)} from ${name}`)
    .join(', ');
  const said = u.examples[0] ? `; the service said: ${u.examples[0].message}` : '';
  const word = u.count === 1 ? 'variable is' : 'variables are';
  return `${fmtNum(u.count)} ${word} unknown to the organisation's catalog: ${names}; fix the mapping or create them (${sources}${said}). Their samples are set aside (${fmtNum(setAside)} so far); the others are delivered.`;
}

type Delivery = GatewayStatus['delivery'];

/** The Uplink card's pill: green only when everything mapped is delivered. */
function uplinkPill(st: GatewayStatus): string {
  const state = st.uplink.state?.state;
  if (state) return state === 'delivering' ? 'ok' : state === 'refused' ? 'bad' : 'warn';
  return st.uplink.condition === 'ok' ? 'ok' : st.uplink.condition === 'retrying' ? 'warn' : 'bad';
}

const IMPORT_JOBS: Record<NonNullable<Delivery['import_jobs']>, string> = {
  off: 'import jobs are off (uplink.backfill.enabled), so the backlog grows until ingest falls',
  waiting: 'import jobs start when the oldest unsent sample is older than uplink.backfill.threshold and the sync path cannot drain the backlog in that time',
  running: 'import jobs carry the backlog',
};

/** Ingest above what the sync path can carry, and what import jobs do about it; never "keeps up" while the backlog grows. */
export function capacityText(d: Delivery): string {
  const jobs = d.import_jobs ? IMPORT_JOBS[d.import_jobs] : '';
  const growing = d.state === 'growing' ? `; the backlog grows (${fmtNum(d.backlog_rise_30s ?? d.backlog_change_30s ?? 0)} in 30 s)` : '';
  return `Ingest (${fmtNum(d.ingest_per_s)} samples/s) is above the sync path's capacity (${fmtNum(d.sync_capacity_per_s)} samples/s at the pace in force); ${jobs}${growing}.`;
}

/** The outage in progress, in the words the demo's terminal uses: since when, the backlog and its oldest sample. */
export function outageProblem(st: GatewayStatus): string {
  const o = st.uplink.outage;
  const text = st.uplink.state?.text ?? `Uplink ${st.uplink.condition}`;
  if (!o || o.state !== 'down') return `${text}: ${st.uplink.reason}`;
  return `The tracking service is ${text.replace(/^unreachable since \S+/, `unreachable since ${fmtTime(Date.parse(o.since))}`)} (${fmtDuration((Date.now() - Date.parse(o.since)) / 1000)}): ${fmtNum(st.buffer.samples)} samples wait, the oldest ${fmtDuration(st.buffer.oldest_unsent_age_s ?? 0)} old; every sample is kept and delivery resumes by itself. ${st.uplink.reason}`;
}

/** The last outage and its catch-up (or the catch-up under way), as the demo's terminal prints it. */
export function outageLine(st: GatewayStatus): string | null {
  const o = st.uplink.outage;
  if (!o || o.state === 'down' || !o.until) return null;
  const span = `${fmtTime(Date.parse(o.since))}–${fmtTime(Date.parse(o.until))} (${fmtDuration((Date.parse(o.until) - Date.parse(o.since)) / 1000)})`;
  const during = `backlog up to ${fmtNum(o.backlog_peak)}, oldest ${o.oldest_age_peak_s === null ? '–' : fmtDuration(o.oldest_age_peak_s)}`;
  const after = o.state === 'catching_up' ? `catching up: ${fmtNum(st.buffer.samples)} samples left` : `caught up ${fmtDuration(o.catch_up_s ?? 0)} after the service came back`;
  return `Last outage ${span}: ${during}; ${after}.`;
}

/** The Backlog card's two lines: the estimate (or "–") and what it rests on. */
export function backlogLines(st: GatewayStatus): { big: string; line: string } {
  const d = st.delivery;
  if (!d) return { big: st.backlog_eta_s === null ? '–' : fmtDuration(st.backlog_eta_s), line: '' };
  switch (d.state) {
    case 'idle':
      return { big: 'empty', line: 'nothing waits' };
    case 'draining':
      return { big: fmtDuration(d.drain_eta_s ?? 0), line: `to drain at what was measured (${fmtNum(d.delivered_per_s)}/s delivered, ${fmtNum(d.ingest_per_s)}/s arriving${d.import_jobs === 'running' ? ', import jobs in flight' : ''})` };
    case 'keeping_up':
      return { big: '–', line: `${d.no_estimate_because ?? 'keeping up'}: ${fmtNum(d.delivered_per_s)}/s delivered, ${fmtNum(d.ingest_per_s)}/s arriving` };
    case 'growing':
      return { big: 'growing', line: `+${fmtNum(d.backlog_rise_30s ?? d.backlog_change_30s ?? 0)} in 30 s: ${fmtNum(d.delivered_per_s)}/s delivered, ${fmtNum(d.ingest_per_s)}/s arriving` };
    default:
      return { big: '–', line: `no estimate yet: ${d.no_estimate_because ?? ''}` };
  }
}

export function Overview() {
  const s = useStore();
  const [ov, setOv] = useState<OverviewResponse | null>(null);
  const [err, setErr] = useState<string | null>(null);
  useEffect(() => {
    let on = true;
    const load = () =>
      api<OverviewResponse>('/console/api/overview').then(
        (r) => on && (setOv(r), setErr(null)),
        (e: unknown) => on && setErr(messageOf(e)),
      );
    void load();
    const t = setInterval(load, 10000);
    return () => {
      on = false;
      clearInterval(t);
    };
  }, []);
  const st = s.status ?? ov?.status;
  if (!st) return <div class="empty">{err ?? 'Loading…'}</div>;
  const problems = problemsOf(st, ov?.refusing);
  const b = st.buffer;
  const u = st.uplink;
  const rates = st.source_rates ?? {};
  const backlog = ov?.backlog ?? [];
  const data: [number[], number[]] = [backlog.map((p) => p[0] / 1000), backlog.map((p) => p[1])];
  const usedPct = b.max_bytes > 0 ? (100 * b.used_bytes) / b.max_bytes : 0;
  const devices = devicesOf(st);
  return (
    <div class="stack">
      <section class="card" data-testid="problems">
        <h2>{problems.length === 0 ? 'No problems' : `${problems.length} problem${problems.length === 1 ? '' : 's'}`}</h2>
        {problems.length === 0 ? (
          <p class="ok-line">Every source is connected, the buffer is writable and the uplink delivers.</p>
        ) : (
          <ul class="problems">
            {problems.map((p) => (
              <li class={p.level}>
                <span class="dot"></span>
                {p.href ? <a href={p.href}>{p.text}</a> : p.text}
              </li>
            ))}
          </ul>
        )}
      </section>
      <div class="grid3">
        <section class="card kpi">
          <h3>Buffer</h3>
          <div class="big">{fmtNum(b.samples)}</div>
          <div class="muted">samples waiting · oldest {b.oldest_unsent_age_s === null ? '–' : fmtDuration(b.oldest_unsent_age_s)}</div>
          <div class="bar">
            <div style={`width:${Math.min(100, usedPct).toFixed(1)}%`}></div>
          </div>
          <div class="muted small">
            {fmtBytes(b.used_bytes)} of {fmtBytes(b.max_bytes)} ({usedPct.toFixed(1)} %) · {b.writable ? 'writable' : 'NOT WRITABLE'}
          </div>
        </section>
        <section class="card kpi">
          <h3>Uplink</h3>
          <div class="big">
            <span class={`pill ${uplinkPill(st)}`} data-testid="uplink-state">{u.state?.text ?? u.condition}</span>
          </div>
          <div class="muted">
            {fmtNum(u.sync.rate_per_s)} samples/s · delivered {fmtNum(u.sync.delivered_total)}
            {u.unknown_variables && u.unknown_variables.count > 0 ? <span data-testid="uplink-unknown"> · {fmtNum(u.unknown_variables.count)} variables refused as unknown</span> : ''}
          </div>
          <div class="bar">
            <div style={`width:${Math.min(100, (100 * u.requests_last_minute) / u.budget_per_minute).toFixed(1)}%`}></div>
          </div>
          <div class="muted small">
            {u.requests_last_minute} requests in the last minute · pace {fmtNum(u.pace_per_minute ?? u.budget_per_minute)}/min of the budget {fmtNum(u.budget_per_minute)}
            {u.rate?.found_per_minute != null ? ` · limit found ${fmtNum(u.rate.found_per_minute)}/min` : ''}
            {u.reason ? ` · ${u.reason}` : ''}
          </div>
          {outageLine(st) ? <div class="muted small" data-testid="uplink-outage">{outageLine(st)}</div> : ''}
        </section>
        <section class="card kpi">
          <h3>Backlog</h3>
          <div class="big" data-testid="backlog-eta">{backlogLines(st).big}</div>
          <div class="muted" data-testid="backlog-line">{backlogLines(st).line}</div>
          {st.delivery?.above_sync_capacity ? <div class="muted small" data-testid="backlog-capacity">{capacityText(st.delivery)}</div> : ''}
          <div class="muted small">
            import jobs in flight {st.backfill.jobs_in_flight ?? 0} · set aside {fmtNum(st.set_aside.samples)} · 429s {ov ? fmtNum(ov.rate_limited_total) : '–'}
          </div>
        </section>
      </div>
      <section class="card">
        <h2>Backlog, last hour</h2>
        {backlog.length > 1 ? <Chart data={data} series={[{ label: 'samples waiting', color: '#1f6feb', fill: 'rgba(31,111,235,0.08)' }]} height={180} testid="backlog-chart" /> : <p class="muted">Collecting (one point every 10 s).</p>}
      </section>
      <section class="card">
        <h2>Sources</h2>
        <table class="tbl" data-testid="sources-table">
          <thead>
            <tr>
              <th>Source</th>
              <th>Kind</th>
              <th>State</th>
              <th class="num">Read /s</th>
              <th class="num">Samples</th>
              <th class="num">Refused</th>
              <th>Variables</th>
              <th>Last sample</th>
              <th>Last error</th>
            </tr>
          </thead>
          <tbody>
            {st.sources.map((x) => (
              <tr data-testid={`source-${x.name}`}>
                <td>
                  <a href="#/sources">{x.name}</a>
                </td>
                <td>{x.kind}</td>
                <td>
                  <span class={`pill ${STATE_CLASS[x.state] ?? 'warn'}`} data-testid={`state-${x.name}`}>{x.state}</span>
                </td>
                <td class="num">{fmtNum(rates[x.name] ?? 0)}</td>
                <td class="num">{fmtNum(x.samplesRead)}</td>
                <td class="num">{fmtNum(Object.values(x.samplesRefused).reduce((a, c) => a + c, 0))}</td>
                <td>
                  <QualityCounts v={x.variables} source={x.name} testid={`quality-counts-${x.name}`} />
                </td>
                <td>{x.lastSampleAt ? fmtAgo(Date.now() - x.lastSampleAt) : '–'}</td>
                <td class="err-cell">{x.lastError ? <span title={x.lastError.code}>{fmtTime(x.lastError.at)}: {x.lastError.message}</span> : ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <DevicesTable devices={devices} />
      </section>
    </div>
  );
}

/** The devices inside sources (Modbus), each with its state, since when it is down, its variables by quality. */
function DevicesTable({ devices }: { devices: DeviceRow[] }) {
  if (devices.length === 0) return null;
  return (
    <>
      <h3 class="sub">Devices</h3>
      <table class="tbl">
        <thead>
          <tr>
            <th>Device</th>
            <th>Source</th>
            <th>State</th>
            <th>Variables</th>
            <th>Detail</th>
          </tr>
        </thead>
        <tbody>
          {devices.map((d) => (
            <tr data-testid={`device-${d.name}`}>
              <td>{d.name}</td>
              <td>{d.source}</td>
              <td>
                <span class={`pill ${d.ok ? 'ok' : 'bad'}`} data-testid={`device-state-${d.name}`}>{d.state}</span>
                {d.downSince !== null && !d.ok ? <div class="muted small">down since {fmtTime(d.downSince)}</div> : ''}
              </td>
              <td>
                <QualityCounts v={d.variables} source={d.source} testid={`device-quality-${d.name}`} />
              </td>
              <td class="err-cell">{d.error ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

interface DeviceRow {
  name: string;
  source: string;
  state: string;
  ok: boolean;
  error: string | null;
  downSince: number | null;
  variables: GatewayStatus['variables'] | null;
}

/** A device as a source's status detail lists it (Modbus: `detail.devices`); the fields vary by source. */
interface DeviceDetail {
  name?: string;
  device?: string;
  state?: unknown;
  connection?: unknown;
  last_problem?: unknown;
  last_error?: unknown;
  endpoint?: unknown;
  unit_id?: unknown;
  down_since?: unknown;
  variables?: GatewayStatus['variables'];
}

/** The devices a source's status detail lists (Modbus: `detail.devices`). */
function deviceDetails(s: SourceStatus): DeviceDetail[] {
  const devs = s.detail?.devices;
  return Array.isArray(devs) ? (devs as DeviceDetail[]) : [];
}

/** Devices inside a source (a Modbus source polls several), from the source's status detail. */
export function devicesOf(st: GatewayStatus): DeviceRow[] {
  const out: DeviceRow[] = [];
  for (const s of st.sources) {
    for (const d of deviceDetails(s)) {
      const state = String(d.state ?? d.connection ?? 'unknown');
      out.push({ name: d.name ?? d.device ?? '?', source: s.name, state, ok: /^(connected|degraded)$/.test(state), error: text(d.last_problem ?? d.last_error ?? null), downSince: typeof d.down_since === 'number' ? d.down_since : null, variables: d.variables ?? null });
    }
  }
  return out;
}

function text(x: unknown): string | null {
  if (x === null || x === undefined) return null;
  if (typeof x === 'string') return x;
  const m = (x as { message?: unknown }).message;
  return typeof m === 'string' ? m : JSON.stringify(x);
}
