// The Fleet page: every gateway of the plant as the plant broker reports it (fleet.mqtt), the
// same rows as `edge-gateway fleet` (src/fleet/view.ts). Asked again every 3 s while the page is
// open and the tab visible: one small request, the gateway answers from memory.
import { h, Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { FleetResponse, FleetState } from '../api/fleet.js';
import { fmtBytes, fmtDuration, fmtNum } from '../../web/format.js';
import { api, messageOf } from './lib.js';

const REFRESH_MS = 3000;
const STATE: Record<FleetState, string> = { online: 'ok', stale: 'warn', stopped: 'warn', offline: 'bad', invalid: 'bad' };
const STATE_TEXT: Record<FleetState, string> = { online: 'online', stale: 'stale (silent)', stopped: 'stopped', offline: 'offline', invalid: 'bad status' };

function useFleet(): { data: FleetResponse | null; error: string | null } {
  const [state, set] = useState<{ data: FleetResponse | null; error: string | null }>({ data: null, error: null });
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      if (document.visibilityState !== 'hidden') {
        try {
          const data = await api<FleetResponse>('/console/api/fleet');
          if (!stopped) set({ data, error: null });
        } catch (e) {
          if (!stopped) set((s) => ({ data: s.data, error: messageOf(e) }));
        }
      }
      if (!stopped) timer = setTimeout(load, REFRESH_MS);
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);
  return state;
}

const ago = (s: number | null | undefined) => (s === null || s === undefined ? '–' : `${fmtDuration(s)} ago`);

export function Fleet() {
  const { data, error } = useFleet();
  if (!data) return <div class="empty">{error ?? 'Loading…'}</div>;
  if (!data.configured)
    return (
      <div class="empty" data-testid="fleet-not-configured">
        {data.message}
      </div>
    );
  const rows = data.rows;
  const online = rows.filter((r) => r.state === 'online').length;
  return (
    <div class="stack">
      <section class="card">
        <div class="card-head">
          <h2 data-testid="fleet-summary">
            {rows.length} gateway{rows.length === 1 ? '' : 's'}, {online} online
          </h2>
          <span class="muted small">
            {data.broker.prefix}/+ on {data.broker.url}{' '}
            {data.broker.connected ? (
              <span class="pill ok" data-testid="fleet-broker">
                broker connected
              </span>
            ) : (
              <span class="pill bad" data-testid="fleet-broker">
                broker unreachable, reconnecting
              </span>
            )}
          </span>
        </div>
        {data.broker.subscription === 'refused' ? (
          <p class="err-line" data-testid="fleet-refused">
            The plant broker refused this gateway the read of {data.broker.prefix}/+/status and /last: let it read them in the broker's ACL (see docs/scale-out.md).
          </p>
        ) : (
          ''
        )}
        {data.broker.duplicate_name ? (
          <p class="err-line" data-testid="fleet-duplicate">
            Another gateway uses this gateway's name ({data.self}) on the plant broker: {data.broker.duplicate_name}. Give each gateway its own gateway.name.
          </p>
        ) : (
          ''
        )}
        {error ? <p class="err-line">Last refresh failed: {error} (showing the previous table)</p> : ''}
        <p class="muted">Offline and silent gateways come first and keep the figures of their last status (grey). A gateway is stale after three missed status intervals, offline once the broker publishes its last will.</p>
        {rows.length === 0 ? (
          <div class="empty" data-testid="fleet-empty">
            No gateway has published a status under {data.broker.prefix} yet.
          </div>
        ) : (
          <div class="scroll">
            <table class="tbl" data-testid="fleet-table">
              <thead>
                <tr>
                  <th>Gateway</th>
                  <th>State</th>
                  <th>Uplink</th>
                  <th class="num">Sources up / down</th>
                  <th class="num">Backlog</th>
                  <th class="num">Oldest unsent</th>
                  <th class="num">ETA</th>
                  <th class="num">Buffer left</th>
                  <th>Last error / reason</th>
                  <th>Version</th>
                  <th class="num">Share /min</th>
                  <th class="num">Last status</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((r) => (
                  <tr data-testid={`fleet-row-${r.gateway}`} data-state={r.state} class={r.state === 'online' ? '' : `fleet-${r.state}`}>
                    <td class="mono">
                      {r.gateway}
                      {r.gateway === data.self ? (
                        <>
                          {' '}
                          <span class="muted small">(this one)</span>
                        </>
                      ) : (
                        ''
                      )}
                    </td>
                    <td>
                      <span class={`pill ${STATE[r.state] ?? 'warn'}`} data-testid="fleet-state">
                        {STATE_TEXT[r.state] ?? r.state}
                      </span>
                    </td>
                    <td>{r.uplink ?? '–'}</td>
                    <td class="num" data-testid="fleet-sources" title={r.sources_down_names.join(', ')}>
                      {r.sources_up === null ? '–' : `${r.sources_up} / ${r.sources_down ?? 0}`}
                    </td>
                    <td class="num" data-testid="fleet-backlog">
                      {fmtNum(r.backlog)}
                    </td>
                    <td class="num">{r.oldest_unsent_age_s === null ? '–' : fmtDuration(r.oldest_unsent_age_s)}</td>
                    <td class="num">{r.eta_s === null ? '–' : fmtDuration(r.eta_s)}</td>
                    <td class="num">
                      {r.capacity_left_bytes === null ? '–' : fmtBytes(r.capacity_left_bytes)}
                      {r.capacity_left_s === null || r.capacity_left_s === undefined ? '' : ` (${fmtDuration(r.capacity_left_s)})`}
                    </td>
                    <td class={r.problem || r.reason || r.last_error ? 'err-text' : ''} data-testid="fleet-error">
                      {r.problem ?? r.reason ?? r.last_error ?? ''}
                      {(r.problem || r.reason) && r.last_error ? <div class="muted small">last error: {r.last_error}</div> : ''}
                    </td>
                    <td class="mono small">{r.version ?? '–'}</td>
                    <td class="num">{fmtNum(r.share_per_minute)}</td>
                    <td class="num" data-testid="fleet-last-seen" title={r.last_status_at ?? ''}>
                      {ago(r.last_status_age_s)}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </div>
  );
}
