import { h, Fragment, type ComponentChildren, type VNode } from 'preact';
import type { GatewayStatus } from '../api/live.js';
import { fmtAge, fmtNum, fmtTime } from '../../web/format.js';
import { STATE_CLASS } from './lib.js';
import { QualityCounts } from './quality-counts.js';
import { useStore } from './store.js';

type SourceStatus = GatewayStatus['sources'][number];

/** Any status detail as nested tables: sources add fields without the console changing. */
function Detail({ value, depth = 0 }: { value: unknown; depth?: number }): VNode | string {
  if (value === null || value === undefined) return <span class="muted">–</span>;
  if (Array.isArray(value)) {
    if (value.length === 0) return <span class="muted">none</span>;
    if (value.every((v) => v && typeof v === 'object' && !Array.isArray(v))) {
      const rows = value as Array<Record<string, unknown>>;
      const keys = [...new Set(rows.flatMap((v) => Object.keys(v)))].slice(0, 12);
      return (
        <table class="tbl inner">
          <thead>
            <tr>
              {keys.map((k) => (
                <th>{k.replace(/_/g, ' ')}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.slice(0, 200).map((v) => (
              <tr>
                {keys.map((k) => (
                  <td>{cell(v[k], depth, k)}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      );
    }
    return <span class="mono">{value.map((v) => (typeof v === 'object' ? JSON.stringify(v) : String(v))).join(', ')}</span>;
  }
  if (typeof value === 'object') {
    return (
      <dl class="kv">
        {Object.entries(value).map(([k, v]) => (
          <>
            <dt>{k.replace(/_/g, ' ')}</dt>
            <dd>{cell(v, depth, k)}</dd>
          </>
        ))}
      </dl>
    );
  }
  return String(value);
}

function cell(v: unknown, depth: number, key = ''): ComponentChildren {
  if (v === null || v === undefined) return <span class="muted">–</span>;
  if (typeof v === 'number' && v > 1e12 && /(_at|since|At)$/.test(key)) return fmtTime(v);
  if (typeof v === 'object') return depth > 2 ? <span class="mono small">{JSON.stringify(v)}</span> : <Detail value={v} depth={depth + 1} />;
  if (typeof v === 'number') return fmtNum(v);
  return String(v);
}

/** A certificate problem as an OPC UA source's detail reports it (the fields vary by version). */
interface CertificateDetail {
  move_from?: string;
  rejected_file?: string;
  file?: string;
  trust_to?: string;
  move_to?: string;
}

/** Hints an engineer acts on: the certificate to trust and the exact file to move, invalid nodes. */
function hints(s: SourceStatus): VNode[] {
  const out: VNode[] = [];
  const d = s.detail ?? {};
  const cert = (d.certificate ?? d.server_certificate ?? d.untrusted_certificate) as CertificateDetail | undefined;
  if (cert && typeof cert === 'object' && (cert.move_from || cert.rejected_file || cert.file)) {
    out.push(
      <div class="hint warn">
        The server's certificate is not trusted yet. Check its fingerprint, then move <code>{cert.rejected_file ?? cert.move_from ?? cert.file}</code> to <code>{cert.trust_to ?? cert.move_to ?? 'the trusted/certs folder'}</code>.
      </div>,
    );
  }
  if (s.lastError && /certificate|BadCertificate|untrusted/i.test(s.lastError.message)) out.push(<div class="hint warn">{s.lastError.message}</div>);
  const invalid = d.invalid_nodes ?? d.invalidNodes;
  if (Array.isArray(invalid) && invalid.length > 0)
    out.push(
      <div class="hint warn">
        {invalid.length} configured node{invalid.length === 1 ? ' is' : 's are'} skipped (shown below); the others flow.
      </div>,
    );
  return out;
}

export function Sources() {
  const s = useStore();
  const st = s.status;
  if (!st) return <div class="empty">Waiting for the gateway…</div>;
  if (st.sources.length === 0)
    return (
      <div class="empty">
        No sources are configured. Build some on the <a href="#/build">Build the config</a> page.
      </div>
    );
  return (
    <div class="stack">
      {st.sources.map((x) => (
        <section class="card" data-testid={`source-card-${x.name}`}>
          <div class="card-head">
            <h2>
              {x.name} <span class="muted small">{x.kind}</span>
            </h2>
            <span class={`pill ${STATE_CLASS[x.state] ?? 'warn'}`}>{x.state}</span>
          </div>
          <div class="facts">
            <div>
              <b>{fmtNum(st.source_rates?.[x.name] ?? 0)}</b>
              <span>read /s</span>
            </div>
            <div>
              <b>{fmtNum(x.samplesRead)}</b>
              <span>samples read</span>
            </div>
            <div>
              <b>{x.lastSampleAt ? fmtAge(Date.now() - x.lastSampleAt) : '–'}</b>
              <span>since last sample</span>
            </div>
            <div>
              <b>
                <QualityCounts v={x.variables} source={x.name} testid={`source-quality-${x.name}`} />
              </b>
              <span>variables by quality</span>
            </div>
            <div>
              <b>{fmtAge(Date.now() - (x.downSince ?? x.since))}</b>
              <span data-testid={`state-age-${x.name}`}>{x.downSince !== null && x.downSince !== undefined ? `down (since ${fmtTime(x.downSince)})` : 'in this state'}</span>
            </div>
          </div>
          {hints(x)}
          {Object.keys(x.samplesRefused).length > 0 ? (
            <p>
              <b>Refused:</b>{' '}
              {Object.entries(x.samplesRefused).map(([r, n]) => (
                <span class="tag">
                  {r.replace(/_/g, ' ')} {fmtNum(n)}
                </span>
              ))}
            </p>
          ) : (
            ''
          )}
          {x.lastError ? (
            <p class="err-line">
              <b>Last error</b> ({fmtTime(x.lastError.at)}, {x.lastError.code}): {x.lastError.message}
            </p>
          ) : (
            ''
          )}
          {x.detail ? (
            <details open={x.kind !== 'mqtt'}>
              <summary>Detail</summary>
              <Detail value={x.detail} />
            </details>
          ) : (
            ''
          )}
        </section>
      ))}
    </div>
  );
}
