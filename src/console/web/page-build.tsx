import { h, Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { BrowseNode, BrowseResponse, Catalog, ModbusTable, ProbeRequest, ProbeResponse, SnippetRequest, SnippetResponse } from '../api/build.js';
import type { ConfigApplyRefusal, ConfigApplyResponse, ConfigCheckResponse, ConfigPreviewResponse, ConfigReadResponse } from '../api/config.js';
import { fmtNum } from '../../web/format.js';
import { api, ApiError, messageOf } from './lib.js';
import { store } from './store.js';

const ORDERS = ['ABCD', 'DCBA', 'BADC', 'CDAB'] as const;

type CatalogVariable = Catalog['variables'][number];

function slug(path: string): string {
  return (
    path
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .slice(0, 60) || 'node'
  );
}

/**
 * The catalog variable that most likely is this node: its name must contain the node's browse
 * name, and the more words of the browse path (Press1/Temperature) it shares, the better.
 */
function guess(n: BrowseNode, vars: CatalogVariable[]): string | null {
  const leaf = slug(n.browseName);
  const words = slug(n.path).split('_');
  let best: string | null = null;
  let score = 0;
  for (const v of vars) {
    const hay = `_${slug(`${v.id} ${v.name} ${v.machine ?? ''}`)}_`;
    if (!hay.includes(`_${leaf}_`)) continue;
    const s = words.filter((w) => hay.includes(`_${w}_`) || hay.includes(w)).length;
    if (s > score) {
      score = s;
      best = v.id;
    }
  }
  return best;
}

/** The catalog as the page holds it: read, or why it could not be read. */
type CatalogState = Catalog | { error: string; variables: CatalogVariable[] };

interface Ticked {
  node: BrowseNode;
  variable: string;
}

function OpcuaBrowse({ onSnippet }: { onSnippet: (yaml: string) => void }) {
  const first = store.status?.sources.find((s) => s.kind === 'opcua');
  const [endpoint, setEndpoint] = useState(typeof first?.detail?.endpoint === 'string' ? first.detail.endpoint : 'opc.tcp://127.0.0.1:4840');
  const [depth, setDepth] = useState('4');
  const [result, setResult] = useState<BrowseResponse | null>(null);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);
  const [ticked, setTicked] = useState<Record<string, Ticked>>({});
  const [catalog, setCatalog] = useState<CatalogState | null>(null);
  const [name, setName] = useState('plc1');
  const [snippet, setSnippet] = useState('');
  useEffect(() => {
    api<Catalog>('/console/api/catalog').then(setCatalog, (e: unknown) => setCatalog({ error: messageOf(e), variables: [] }));
  }, []);
  const browse = async () => {
    setBusy(true);
    setErr(null);
    try {
      setResult(await api<BrowseResponse>('/console/api/opcua/browse', { method: 'POST', body: { endpoint, depth: Number(depth) } }));
      setTicked({});
    } catch (e) {
      setErr(messageOf(e));
    } finally {
      setBusy(false);
    }
  };
  const tick = (n: BrowseNode) => {
    const next = { ...ticked };
    if (next[n.nodeId]) delete next[n.nodeId];
    else next[n.nodeId] = { node: n, variable: guess(n, catalog?.variables ?? []) ?? `mvr_CHANGE_ME_${slug(n.path)}` };
    setTicked(next);
  };
  const make = async () => {
    if (!result) return;
    try {
      const body: SnippetRequest = { name, endpoint: result.endpoint, security_mode: result.security_mode, nodes: Object.values(ticked).map((t) => ({ node_id: t.node.nsu, variable: t.variable, comment: `${t.node.path} (${t.node.dataType})` })) };
      const r = await api<SnippetResponse>('/console/api/opcua/snippet', { method: 'POST', body });
      setSnippet(r.yaml);
      onSnippet(r.yaml);
      setErr(null);
    } catch (e) {
      setErr(messageOf(e));
    }
  };
  const count = Object.keys(ticked).length;
  return (
    <section class="card">
      <h2>OPC UA: browse, tick, map</h2>
      <div class="form">
        <label>
          Endpoint
          <input value={endpoint} onInput={(e) => setEndpoint(e.currentTarget.value)} data-testid="opcua-endpoint" />
        </label>
        <label class="narrow">
          Depth
          <input type="number" min="1" max="10" value={depth} onInput={(e) => setDepth(e.currentTarget.value)} />
        </label>
        <button class="primary" onClick={browse} disabled={busy} data-testid="opcua-browse">
          {busy ? 'Browsing…' : 'Browse'}
        </button>
      </div>
      {err ? (
        <p class="err-line" data-testid="build-error">
          {err}
        </p>
      ) : (
        ''
      )}
      {catalog && 'error' in catalog ? (
        <p class="muted small">Machine variables of the organisation could not be read ({catalog.error}); type the ids.</p>
      ) : catalog ? (
        <p class="muted small">{fmtNum(catalog.variables.length)} machine variables in the organisation's catalog (GET /machine-variables).</p>
      ) : (
        ''
      )}
      <datalist id="mvars">
        {(catalog?.variables ?? []).map((v) => (
          <option value={v.id}>
            {v.name}
            {v.machine ? ` · ${v.machine}` : ''}
          </option>
        ))}
      </datalist>
      {result ? (
        <>
          <div class="tree" data-testid="opcua-tree">
            {result.nodes.map((n) => (
              <div class="tnode" style={`padding-left:${(n.depth - 1) * 18 + 6}px`} data-testid={`node-${n.path}`}>
                {n.nodeClass === 'Object' ? (
                  <span class="folder">▸ {n.displayName}</span>
                ) : (
                  <>
                    <label class={n.mappable ? '' : 'muted'}>
                      <input type="checkbox" disabled={!n.mappable} checked={!!ticked[n.nodeId]} onChange={() => tick(n)} data-testid={`tick-${n.path}`} /> {n.displayName}
                    </label>
                    <span class="muted small mono">
                      {n.dataType}
                      {n.scalar === false ? '[]' : ''} = {n.value ?? ''}
                    </span>
                    {ticked[n.nodeId] ? (
                      <input class="mvar mono" list="mvars" value={ticked[n.nodeId].variable} onInput={(e) => setTicked({ ...ticked, [n.nodeId]: { ...ticked[n.nodeId], variable: e.currentTarget.value } })} data-testid={`map-${n.path}`} />
                    ) : !n.mappable ? (
                      <span class="muted small">not mappable: {n.scalar === false ? 'array' : 'not numeric'}</span>
                    ) : (
                      ''
                    )}
                  </>
                )}
              </div>
            ))}
            {result.truncated ? (
              <p class="muted" data-testid="browse-truncated">
                Stopped after {result.nodes.length} nodes{result.stopped_by === 'timeout' ? ' (time limit)' : ''}.
              </p>
            ) : (
              ''
            )}
          </div>
          <div class="form">
            <label class="narrow">
              Server name
              <input value={name} onInput={(e) => setName(e.currentTarget.value)} />
            </label>
            <button class="primary" disabled={count === 0} onClick={make} data-testid="make-snippet">
              YAML for {count} node{count === 1 ? '' : 's'}
            </button>
          </div>
        </>
      ) : (
        ''
      )}
      {snippet ? (
        <pre class="code" data-testid="snippet">
          {snippet}
        </pre>
      ) : (
        ''
      )}
    </section>
  );
}

/** The probe's form as typed: numbers stay text until sent. */
interface ProbeForm {
  device: string;
  unit_id: string;
  table: ModbusTable;
  address: string;
  count: string;
}

function ModbusProbe() {
  const [f, setF] = useState<ProbeForm>({ device: 'tcp://127.0.0.1:502', unit_id: '1', table: 'holding', address: '0', count: '8' });
  const [r, setR] = useState<ProbeResponse | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const set = (k: keyof ProbeForm) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement }) => setF({ ...f, [k]: e.currentTarget.value });
  const probe = async () => {
    setBusy(true);
    setErr(null);
    try {
      const body: ProbeRequest = { device: f.device, table: f.table, unit_id: Number(f.unit_id), address: Number(f.address), count: Number(f.count) };
      setR(await api<ProbeResponse>('/console/api/modbus/probe', { method: 'POST', body }));
    } catch (e) {
      setErr(messageOf(e));
      setR(null);
    } finally {
      setBusy(false);
    }
  };
  const tables: ModbusTable[] = ['holding', 'input', 'coil', 'discrete_input'];
  return (
    <section class="card">
      <h2>Modbus: probe a register range</h2>
      <div class="form">
        <label>
          Device
          <input value={f.device} onInput={set('device')} data-testid="probe-device" />
        </label>
        <label class="narrow">
          Unit
          <input type="number" value={f.unit_id} onInput={set('unit_id')} />
        </label>
        <label class="narrow">
          Table
          <select value={f.table} onChange={set('table')}>
            {tables.map((t) => (
              <option>{t}</option>
            ))}
          </select>
        </label>
        <label class="narrow">
          Address
          <input type="number" value={f.address} onInput={set('address')} data-testid="probe-address" />
        </label>
        <label class="narrow">
          Count
          <input type="number" value={f.count} onInput={set('count')} />
        </label>
        <button class="primary" onClick={probe} disabled={busy} data-testid="probe-run">
          {busy ? 'Reading…' : 'Read'}
        </button>
      </div>
      {err ? <p class="err-line">{err}</p> : ''}
      {r && r.bits ? <p class="mono">{r.bits.join(' ')}</p> : ''}
      {r && r.registers.length > 0 ? (
        <>
          <p class="muted small">Find the value the device's display shows; its row and column are the type and byte order to configure.</p>
          <div class="mono small raw">
            {r.registers.map((w, i) => (
              <span>
                {Number(f.address) + i}: 0x{w.toString(16).toUpperCase().padStart(4, '0')}
              </span>
            ))}
          </div>
          <table class="tbl" data-testid="probe-table">
            <thead>
              <tr>
                <th>Address</th>
                <th>Type</th>
                {ORDERS.map((o) => (
                  <th class="num">{o}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {r.candidates.map((c) => (
                <tr>
                  <td>{c.address}</td>
                  <td>{c.type}</td>
                  {ORDERS.map((o) => (
                    <td class="num mono">{c.values[o]}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : (
        ''
      )}
    </section>
  );
}

/** The diff Apply would make, line by line, coloured like a unified diff. */
function Diff({ text }: { text: string }) {
  if (!text)
    return (
      <p class="muted" data-testid="config-diff">
        No changes: the text is the file as it is.
      </p>
    );
  const cls = (l: string) => (l.startsWith('@@') ? 'hunk' : l[0] === '+' ? 'add' : l[0] === '-' ? 'del' : '');
  return (
    <pre class="code diff" data-testid="config-diff">
      {text
        .replace(/\n$/, '')
        .split('\n')
        .map((l) => (
          <span class={cls(l)}>{`${l}\n`}</span>
        ))}
    </pre>
  );
}

/** The check shown next to the editor: the last check, or the problems a preview or Apply found. */
interface CheckShown {
  ok: boolean;
  problems: Array<{ line: number | null; message: string }>;
  more_problems?: number;
  warnings?: string[];
}
type Preview = Extract<ConfigPreviewResponse, { ok: true }>;

function ConfigEditor({ insert }: { insert: string | null }) {
  const [text, setText] = useState('');
  const [path, setPath] = useState<string | null>(null);
  const [check, setCheck] = useState<CheckShown | null>(null);
  const [note, setNote] = useState<{ ok: boolean; text: string } | null>(null);
  const [preview, setPreview] = useState<Preview | null>(null);
  // Why there is no file to write: the gateway's note, or why the file could not be read.
  const [noFile, setNoFile] = useState<string | null>('reading the configuration file…');
  useEffect(() => {
    api<ConfigReadResponse>('/console/api/config').then(
      (r) => {
        setPath(r.path);
        setNoFile(r.path === null ? `${r.note}; start it with --config FILE to edit and apply it here` : null);
        if (r.yaml) setText(r.yaml);
      },
      (e: unknown) => {
        setNoFile(`the configuration file could not be read: ${messageOf(e)}`);
        setNote({ ok: false, text: messageOf(e) });
      },
    );
  }, []);
  useEffect(() => {
    if (!insert) return;
    setText((t) => (/^opcua:/m.test(t) ? t : `${t.replace(/\s*$/, '\n\n')}${insert}`));
    if (/^opcua:/m.test(text)) setNote({ ok: false, text: 'The configuration already has an opcua: section: copy the server from the snippet into it.' });
  }, [insert]);
  useEffect(() => {
    if (!text) return;
    setPreview(null);
    const t = setTimeout(
      () =>
        api<ConfigCheckResponse>('/console/api/config/check', { method: 'POST', body: { yaml: text } }).then(setCheck, (e: unknown) => setCheck({ ok: false, problems: [{ line: null, message: messageOf(e) }] })),
      600,
    );
    return () => clearTimeout(t);
  }, [text]);
  // Apply shows the diff first (and any secret sent somewhere new); the second step sends the
  // confirmation of exactly that diff (issue 21 §3).
  const review = async () => {
    setNote(null);
    try {
      const r = await api<ConfigPreviewResponse>('/console/api/config/preview', { method: 'POST', body: { yaml: text } });
      if (!r.ok) {
        setCheck({ ok: false, problems: r.problems, more_problems: r.more_problems });
        return;
      }
      setPreview(r);
    } catch (e) {
      setNote({ ok: false, text: messageOf(e) });
    }
  };
  const apply = async () => {
    if (!preview) return;
    try {
      const r = await api<ConfigApplyResponse>('/console/api/config', { method: 'PUT', body: { yaml: text, confirm: preview.confirm } });
      setPreview(null);
      setNote({ ok: true, text: `Written to ${r.written}. Changed: ${r.changed.join(', ') || 'nothing'}${r.restart_required.length ? `; needs a restart: ${r.restart_required.join(', ')}` : ''}.` });
    } catch (e) {
      const body = e instanceof ApiError ? (e.body as ConfigApplyRefusal | null) : null;
      if (body?.confirm) setPreview({ ...preview, diff: body.diff ?? '', confirm: body.confirm, secret_changes: body.secret_changes ?? [] });
      else setPreview(null);
      setNote({ ok: false, text: messageOf(e) });
      if (body?.problems) setCheck({ ok: false, problems: body.problems, more_problems: body.more_problems });
    }
  };
  const lines = text.split('\n').length;
  const count = check ? check.problems.length + (check.more_problems ?? 0) : 0;
  // Issue 24 §2: a disabled Apply says why.
  const applyBlocked = noFile ?? (!text.trim() ? 'the editor is empty' : !check ? 'the text is being checked…' : !check.ok ? `the check finds ${count} problem${count === 1 ? '' : 's'} (listed below); Apply is possible once it passes` : null);
  const more = check?.more_problems ? (
    <li class="bad">
      <span class="dot"></span>… and {check.more_problems} more
    </li>
  ) : (
    ''
  );
  return (
    <section class="card">
      <div class="card-head">
        <h2>Configuration {path ? <span class="muted small mono">{path}</span> : ''}</h2>
        <div class="row">
          <span class={`pill ${check ? (check.ok ? 'ok' : 'bad') : 'warn'}`} data-testid="check-state">
            {check ? (check.ok ? 'check passes' : `${count} problem${count === 1 ? '' : 's'}`) : 'not checked'}
          </span>
          <button class="primary" disabled={applyBlocked !== null} title={applyBlocked ?? undefined} onClick={review} data-testid="apply-config">
            Apply…
          </button>
        </div>
      </div>
      {applyBlocked ? (
        <p class="hint warn small" data-testid="apply-reason">
          Apply is not possible: {applyBlocked}
        </p>
      ) : (
        ''
      )}
      <p class="muted small">
        Paste or edit a configuration: it is checked as you type, as <code>edge-gateway check</code> does. Secrets written in the file show hidden and are kept as they are. Apply shows the changes first, then writes the file and reloads the gateway.
      </p>
      <div class="editor">
        <pre class="gutter">{Array.from({ length: lines }, (_, i) => `${i + 1}\n`).join('')}</pre>
        <textarea spellcheck={false} value={text} onInput={(e) => setText(e.currentTarget.value)} data-testid="config-text"></textarea>
      </div>
      {check && !check.ok ? (
        <ul class="problems" data-testid="check-problems">
          {check.problems.map((p) => (
            <li class="bad">
              <span class="dot"></span>
              {p.line ? (
                <>
                  <b>line {p.line}</b> ·{' '}
                </>
              ) : (
                ''
              )}
              {p.message}
            </li>
          ))}
          {more}
        </ul>
      ) : (
        ''
      )}
      {check?.ok && check.warnings?.length ? (
        <ul class="problems">
          {check.warnings.map((w) => (
            <li class="warn">
              <span class="dot"></span>
              {w}
            </li>
          ))}
        </ul>
      ) : (
        ''
      )}
      {preview ? (
        <div class="preview" data-testid="config-preview">
          <h3>Changes to {path}</h3>
          {preview.secret_changes.length ? (
            <>
              <p class={preview.refused ? 'err-line' : 'muted small'}>{preview.refused ? preview.message : 'These changes send secrets where they were not sent before; check each destination:'}</p>
              <ul class="problems" data-testid="secret-changes">
                {preview.secret_changes.map((c) => (
                  <li class={preview.refused ? 'bad' : 'warn'}>
                    <span class="dot"></span>
                    <span>
                      <b class="mono">{c.setting}</b>: {c.secret} → <b class="mono">{c.destination}</b> ({c.reason})
                    </span>
                  </li>
                ))}
              </ul>
            </>
          ) : (
            ''
          )}
          <Diff text={preview.diff} />
          <div class="row">
            <button class="primary" disabled={preview.refused || !preview.diff} onClick={apply} data-testid="confirm-apply">
              {preview.secret_changes.length ? 'Send the secrets there and apply' : 'Apply these changes'}
            </button>
            <button onClick={() => setPreview(null)} data-testid="cancel-apply">
              Cancel
            </button>
          </div>
        </div>
      ) : (
        ''
      )}
      {note ? (
        <p class={note.ok ? 'ok-line' : 'err-line'} data-testid="apply-note">
          {note.text}
        </p>
      ) : (
        ''
      )}
    </section>
  );
}

type Tab = 'opcua' | 'modbus' | 'config';

export function Build() {
  const [tab, setTab] = useState<Tab>('opcua');
  const [insert, setInsert] = useState<string | null>(null);
  const tabs: Array<[Tab, string]> = [
    ['opcua', 'OPC UA'],
    ['modbus', 'Modbus probe'],
    ['config', 'Configuration'],
  ];
  return (
    <div class="stack">
      <div class="seg big">
        {tabs.map(([k, l]) => (
          <button class={tab === k ? 'on' : ''} onClick={() => setTab(k)} data-testid={`tab-${k}`}>
            {l}
          </button>
        ))}
      </div>
      <div hidden={tab !== 'opcua'}>
        <OpcuaBrowse onSnippet={(y) => setInsert(y)} />
      </div>
      <div hidden={tab !== 'modbus'}>
        <ModbusProbe />
      </div>
      <div hidden={tab !== 'config'}>
        <ConfigEditor insert={insert} />
      </div>
    </div>
  );
}
