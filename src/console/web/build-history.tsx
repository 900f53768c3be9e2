import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { ConfigApplyRefusal, ConfigApplyResponse, ConfigHistoryResponse, ConfigVersion, ConfigVersionResponse } from '../api/config.js';
import { Diff } from './build-diff.js';
import { api, ApiError, messageOf } from './lib.js';

/** A user agent as a person reads it: the browser or the tool, not the whole string. */
function agentOf(ua: string | null): string {
  if (!ua) return '';
  const m = /(HeadlessChrome|Chrome|Firefox|Edg|Safari|curl|edge-gateway)\/[\d.]+/.exec(ua);
  return m ? m[0] : ua.slice(0, 40);
}

function changedText(v: ConfigVersion): string {
  if (v.changed === null) return '';
  return v.changed.length ? `changed ${v.changed.join(', ')}` : 'no setting changed';
}

/**
 * The configuration file's history (GET /console/api/config/history): each version with when it
 * was written, by what and from which user agent, and what the reload changed; a version's diff
 * from the one before; and a rollback to it, shown as the diff it makes and applied once confirmed
 * (POST /console/api/config/rollback). `refresh` changes after each Apply; `onRolledBack` reloads
 * the editor's text.
 */
export function ConfigHistoryPanel({ refresh, onRolledBack }: { refresh: number; onRolledBack: (note: string) => void }) {
  const [history, setHistory] = useState<ConfigHistoryResponse | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [shown, setShown] = useState<ConfigVersionResponse | null>(null);
  const [pending, setPending] = useState<{ version: number; diff: string; confirm: string } | null>(null);
  const load = () =>
    api<ConfigHistoryResponse>('/console/api/config/history').then(
      (r) => (setHistory(r), setErr(null)),
      (e: unknown) => setErr(messageOf(e)),
    );
  useEffect(() => void load(), [refresh]);

  const show = async (version: number) => {
    setPending(null);
    try {
      setShown(await api<ConfigVersionResponse>(`/console/api/config/history/${version}`));
    } catch (e) {
      setErr(messageOf(e));
    }
  };
  const rollback = async (version: number, confirm?: string) => {
    try {
      const r = await api<ConfigApplyResponse>('/console/api/config/rollback', { method: 'POST', body: { version, ...(confirm ? { confirm } : {}) } });
      setPending(null);
      setShown(null);
      await load();
      onRolledBack(`Rolled back to version ${version}${r.version ? ` (kept as version ${r.version})` : ''}. Changed: ${r.changed.join(', ') || 'nothing'}${r.restart_required.length ? `; needs a restart: ${r.restart_required.join(', ')}` : ''}.`);
    } catch (e) {
      const body = e instanceof ApiError ? (e.body as ConfigApplyRefusal | null) : null;
      if (body?.confirm && body.error.code === 'confirm_required') setPending({ version, diff: body.diff ?? '', confirm: body.confirm });
      else {
        setPending(null);
        setErr(messageOf(e));
      }
    }
  };

  const versions = history?.versions ?? [];
  return (
    <div class="preview" data-testid="config-history">
      <h3>History of the file {history ? `(${versions.length} version${versions.length === 1 ? '' : 's'} kept)` : ''}</h3>
      {err ? (
        <p class="err-line" data-testid="history-error">
          {err}
        </p>
      ) : (
        ''
      )}
      {history && !versions.length ? <p class="muted small">No version kept yet: each Apply, rollback and reload of an edited file keeps one.</p> : ''}
      {versions.length ? (
        <table class="tbl">
          <thead>
            <tr>
              <th>Version</th>
              <th>Written</th>
              <th>By</th>
              <th>What the reload changed</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {versions.map((v) => (
              <tr data-testid={`history-${v.version}`}>
                <td class="mono">
                  {v.version}
                  {history?.current === v.version ? ' (the file now)' : ''}
                </td>
                <td>{new Date(v.at).toLocaleString('en-GB')}</td>
                <td>
                  {v.by}
                  {v.note ? ` (${v.note})` : ''} <span class="muted small">{agentOf(v.user_agent)}</span>
                </td>
                <td class="small">{changedText(v)}</td>
                <td class="row">
                  <button onClick={() => void show(v.version)} data-testid={`history-show-${v.version}`}>
                    Diff
                  </button>
                  {history?.current !== v.version ? (
                    <button onClick={() => void rollback(v.version)} data-testid={`history-rollback-${v.version}`}>
                      Roll back to it…
                    </button>
                  ) : (
                    ''
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        ''
      )}
      {shown ? (
        <div data-testid="history-shown">
          <h3>Version {shown.version.version}: what it changed from the version before</h3>
          <Diff text={shown.diff} />
        </div>
      ) : (
        ''
      )}
      {pending ? (
        <div data-testid="rollback-preview">
          <h3>Rolling back to version {pending.version} changes the file so:</h3>
          <Diff text={pending.diff} />
          <div class="row">
            <button class="primary" onClick={() => void rollback(pending.version, pending.confirm)} data-testid="rollback-confirm">
              Roll back and apply
            </button>
            <button onClick={() => setPending(null)}>Cancel</button>
          </div>
        </div>
      ) : (
        ''
      )}
    </div>
  );
}
