import { h, Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { SECURITY_MODE_CHOICES, SECURITY_POLICY_CHOICES, type BrowseNode, type BrowseRequest, type BrowseResponse, type Catalog, type SecurityMode } from '../api/build.js';
import { fmtNum } from '../../web/format.js';
import { api, messageOf } from './lib.js';
import { loadVariables, store, useStore } from './store.js';
import type { AddToConfig } from './page-build.js';

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
  // The leaf alone is no evidence when the path says more (Press1/Running must not guess Mixer 1's
  // running): a guess shares at least one other word of the path.
  const needed = words.length > 1 ? 2 : 1;
  for (const v of vars) {
    const hay = `_${slug(`${v.id} ${v.name} ${v.machine ?? ''}`)}_`;
    if (!hay.includes(`_${leaf}_`)) continue;
    const s = words.filter((w) => hay.includes(`_${w}_`) || hay.includes(w)).length;
    if (s >= needed && s > score) {
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

/** What every request of one tree is sent with: the form as it was when the tree was loaded. */
type Connection = Required<Pick<BrowseRequest, 'endpoint' | 'security_mode' | 'trust_server' | 'include_properties'>> & Pick<BrowseRequest, 'security_policy' | 'user' | 'password'>;

/** The root's children are kept under this key; a node's under its node id. */
const ROOT = '';

/** The syntax of a machine variable id (sources/common-schema.ts machineVariableId). */
const MACHINE_VARIABLE = /^mvr_[A-Za-z0-9_]+$/;

/**
 * Build the config → OPC UA: browse a server as a tree loaded one level at a time (each expansion
 * is one request, queued so only one runs at once: the gateway refuses a second browse with 409),
 * tick variables, map them to machine variables (flagged inline when an id is not in the catalog or
 * mapped twice) and add them to the configuration.
 */
export function OpcuaBrowse({ addToConfig }: { addToConfig: AddToConfig }) {
  useStore();
  const first = store.status?.sources.find((s) => s.kind === 'opcua');
  const configured = typeof first?.detail?.endpoint === 'string' ? first.detail.endpoint : null;
  const [endpoint, setEndpoint] = useState(configured ?? 'opc.tcp://127.0.0.1:4840');
  // Loaded at #/build directly, the page renders before the first status arrives: the configured
  // server's endpoint (and name) replace the placeholder then, unless they were typed meanwhile.
  const typed = useRef({ endpoint: false, name: false });
  useEffect(() => {
    if (!configured || !first) return;
    if (!typed.current.endpoint) setEndpoint(configured);
    if (!typed.current.name) setName(first.name);
  }, [configured, first?.name]);
  const [root, setRoot] = useState('i=85');
  const [mode, setMode] = useState<SecurityMode>('None');
  const [policy, setPolicy] = useState<BrowseRequest['security_policy'] | ''>('');
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [trust, setTrust] = useState(false);
  const [showProperties, setShowProperties] = useState(false);
  const [conn, setConn] = useState<Connection | null>(null);
  const [meta, setMeta] = useState<BrowseResponse | null>(null);
  const [children, setChildren] = useState<Record<string, BrowseNode[]>>({});
  const [open, setOpen] = useState<Record<string, boolean>>({});
  const [loading, setLoading] = useState<Record<string, boolean>>({});
  const [nodeErr, setNodeErr] = useState<Record<string, string>>({});
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);
  const [ticked, setTicked] = useState<Record<string, Ticked>>({});
  const [catalog, setCatalog] = useState<CatalogState | null>(null);
  const [name, setName] = useState(first?.name ?? 'plc1');
  // Ids this tab added to the editor's text (not applied yet): mapped as far as the merge is concerned.
  const [added, setAdded] = useState<Record<string, string>>({});
  const queue = useRef<Promise<unknown>>(Promise.resolve());
  useEffect(() => {
    api<Catalog>('/console/api/catalog').then(setCatalog, (e: unknown) => setCatalog({ error: messageOf(e), variables: [] }));
    if (!store.vars) void loadVariables();
  }, []);

  /** One browse request after the previous one has ended (the gateway runs one at a time). */
  const request = (c: Connection, extra: Pick<BrowseRequest, 'root' | 'path'>): Promise<BrowseResponse> => {
    const body: BrowseRequest = { ...c, ...extra, depth: 1 };
    const next = queue.current.then(() => api<BrowseResponse>('/console/api/opcua/browse', { method: 'POST', body }));
    queue.current = next.catch(() => undefined);
    return next;
  };

  const browse = async () => {
    const c: Connection = {
      endpoint: endpoint.trim(),
      security_mode: mode,
      ...(policy ? { security_policy: policy } : {}),
      ...(user.trim() ? { user: user.trim(), password } : {}),
      trust_server: trust,
      include_properties: showProperties,
    };
    setBusy(true);
    setErr(null);
    try {
      const r = await request(c, { root: root.trim() || 'i=85' });
      setConn(c);
      setMeta(r);
      setChildren({ [ROOT]: r.nodes });
      setOpen({});
      setNodeErr({});
      setTicked({});
    } catch (e) {
      setErr(messageOf(e));
    } finally {
      setBusy(false);
    }
  };

  const toggle = async (n: BrowseNode) => {
    if (!conn) return;
    if (children[n.nodeId]) {
      setOpen((o) => ({ ...o, [n.nodeId]: !o[n.nodeId] }));
      return;
    }
    setLoading((l) => ({ ...l, [n.nodeId]: true }));
    try {
      const r = await request(conn, { root: n.nsu, path: n.path });
      setChildren((c) => ({ ...c, [n.nodeId]: r.nodes }));
      setOpen((o) => ({ ...o, [n.nodeId]: true }));
      setNodeErr(({ [n.nodeId]: _, ...rest }) => rest);
    } catch (e) {
      setNodeErr((x) => ({ ...x, [n.nodeId]: messageOf(e) }));
    } finally {
      setLoading(({ [n.nodeId]: _, ...rest }) => rest);
    }
  };

  const tick = (n: BrowseNode) => {
    const next = { ...ticked };
    if (next[n.nodeId]) delete next[n.nodeId];
    else next[n.nodeId] = { node: n, variable: guess(n, catalog?.variables ?? []) ?? `mvr_CHANGE_ME_${slug(n.path)}` };
    setTicked(next);
  };

  // --- the mapping's flags (issue 24 §3) ---------------------------------------------------------
  const catalogIds = catalog && !('error' in catalog) ? new Set(catalog.variables.map((v) => v.id)) : null;
  const mappedBy = new Map<string, string>();
  for (const v of store.vars ?? []) if (v.mapped) mappedBy.set(v.id, v.source ? `by ${v.source}` : 'in the configuration');
  for (const [id, where] of Object.entries(added)) if (!mappedBy.has(id)) mappedBy.set(id, where);
  const chosen = new Map<string, number>();
  for (const t of Object.values(ticked)) chosen.set(t.variable, (chosen.get(t.variable) ?? 0) + 1);
  const flagsOf = (variable: string): string[] => {
    const f: string[] = [];
    if (!MACHINE_VARIABLE.test(variable)) f.push('not a machine variable id (mvr_ followed by letters, digits, _)');
    else if (catalogIds && !catalogIds.has(variable)) f.push("not in the organisation's catalog");
    const where = mappedBy.get(variable);
    if (where) f.push(`already mapped ${where}`);
    const n = chosen.get(variable) ?? 0;
    if (n > 1) f.push(`chosen for ${n} ticked nodes`);
    return f;
  };
  const tickedList = Object.values(ticked);
  // The unit setting of a new mapping: the server's EngineeringUnits (what the value is in: Apply
  // then flags it when the catalog's differs), else the catalog's; none when neither gives one.
  const unitFor = (n: BrowseNode, variable: string): { unit?: string } => {
    const unit = (n.unit?.trim() || (catalog && !('error' in catalog) ? catalog.variables.find((v) => v.id === variable)?.unit?.trim() : undefined)) ?? '';
    return unit && unit.length <= 32 ? { unit } : {};
  };
  const flagged = tickedList.filter((t) => flagsOf(t.variable).length > 0).length;

  const make = async () => {
    if (!meta) return;
    try {
      const nodes = tickedList.map((t) => ({ node_id: t.node.nsu, variable: t.variable, ...unitFor(t.node, t.variable), comment: t.node.comment }));
      const r = await addToConfig({
        opcua: {
          server: { name, endpoint: meta.endpoint, security_mode: meta.security_mode, security_policy: meta.security_policy, ...(meta.user ? { user: meta.user } : {}) },
          nodes,
        },
      });
      const skipped = new Set(r.skipped.map((s) => s.what));
      const now: Record<string, string> = {};
      for (const n of nodes) if (!skipped.has(n.node_id)) now[n.variable] = 'in the configuration being edited (added, not applied yet)';
      setAdded((a) => ({ ...a, ...now }));
      setTicked({});
      setErr(null);
    } catch (e) {
      setErr(messageOf(e));
    }
  };

  const row = (n: BrowseNode, level: number): h.JSX.Element => {
    const t = ticked[n.nodeId];
    const expandable = n.hasChildren !== false;
    const isOpen = !!open[n.nodeId];
    const flags = t ? flagsOf(t.variable) : [];
    return (
      <>
        <div class="tnode" style={`padding-left:${level * 18 + 6}px`} data-testid={`node-${n.path}`}>
          {expandable ? (
            <button class="expander" onClick={() => toggle(n)} disabled={!!loading[n.nodeId]} aria-expanded={isOpen} title={isOpen ? 'Collapse' : 'Expand'} data-testid={`expand-${n.path}`}>
              {loading[n.nodeId] ? '…' : isOpen ? '▾' : '▸'}
            </button>
          ) : (
            <span class="expander-gap"></span>
          )}
          {n.nodeClass === 'Object' ? (
            <span class="folder">{n.displayName}</span>
          ) : (
            <>
              <label class={n.mappable ? '' : 'muted'}>
                <input type="checkbox" disabled={!n.mappable} checked={!!t} onChange={() => tick(n)} data-testid={`tick-${n.path}`} /> {n.displayName}
              </label>
              <span class="muted small mono" title={n.properties?.length ? `properties: ${n.properties.join(', ')}` : undefined} data-testid={`value-${n.path}`}>
                {n.dataType}
                {n.scalar === false ? '[]' : ''} = {n.value ?? ''}
                {n.unit ? ` ${n.unit}` : ''}
                {n.range ? `  (${n.range.low} to ${n.range.high})` : ''}
              </span>
              {t ? (
                <span class="mapping">
                  <input
                    class={`mvar mono${flags.length ? ' flagged' : ''}`}
                    list="mvars"
                    value={t.variable}
                    aria-invalid={flags.length > 0}
                    onInput={(e) => setTicked({ ...ticked, [n.nodeId]: { ...t, variable: e.currentTarget.value.trim() } })}
                    data-testid={`map-${n.path}`}
                  />
                  {flags.length ? (
                    <span class="flag small" data-testid={`flag-${n.path}`}>
                      ⚠ {flags.join('; ')}
                    </span>
                  ) : (
                    ''
                  )}
                </span>
              ) : !n.mappable ? (
                <span class="muted small">not mappable: {n.scalar === false ? 'array' : 'not numeric'}</span>
              ) : (
                ''
              )}
            </>
          )}
          {nodeErr[n.nodeId] ? (
            <span class="err-text small" data-testid={`expand-error-${n.path}`}>
              {nodeErr[n.nodeId]}
            </span>
          ) : (
            ''
          )}
        </div>
        {isOpen ? levelRows(n.nodeId, level + 1) : ''}
      </>
    );
  };
  const levelRows = (key: string, level: number): h.JSX.Element | h.JSX.Element[] => {
    const kids = children[key] ?? [];
    if (kids.length === 0 && key !== ROOT)
      return (
        <div class="tnode muted small" style={`padding-left:${level * 18 + 30}px`}>
          no children{conn && !conn.include_properties ? ' (properties are not listed)' : ''}
        </div>
      );
    return kids.map((n): h.JSX.Element => row(n, level));
  };

  const count = tickedList.length;
  const catalogLine =
    catalog && 'error' in catalog ? (
      <p class="muted small" data-testid="catalog-state">
        The organisation's catalog could not be read ({catalog.error}): the ids cannot be checked against it; type them.
      </p>
    ) : catalog ? (
      <p class="muted small" data-testid="catalog-state">
        {fmtNum(catalog.variables.length)} machine variables in the organisation's catalog (GET /machine-variables).
      </p>
    ) : (
      ''
    );
  return (
    <section class="card">
      <h2>OPC UA: browse, tick, map</h2>
      <div class="form">
        <label>
          Endpoint
          <input
            value={endpoint}
            onInput={(e) => {
              typed.current.endpoint = true;
              setEndpoint(e.currentTarget.value);
            }}
            data-testid="opcua-endpoint"
          />
        </label>
        <label class="mid">
          Start at
          <input value={root} onInput={(e) => setRoot(e.currentTarget.value)} title="Node id whose children the tree starts with (i=85: the Objects folder; ns=, i= or nsu= form)" data-testid="opcua-root" />
        </label>
        <label class="mid">
          Security mode
          <select value={mode} onChange={(e) => setMode(e.currentTarget.value as SecurityMode)} data-testid="opcua-security-mode">
            {SECURITY_MODE_CHOICES.map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
        </label>
        <label class="mid">
          Security policy
          <select value={policy} onChange={(e) => setPolicy(e.currentTarget.value as typeof policy)} data-testid="opcua-security-policy">
            <option value="">default ({mode === 'None' ? 'None' : 'Basic256Sha256'})</option>
            {SECURITY_POLICY_CHOICES.map((p) => (
              <option value={p}>{p}</option>
            ))}
          </select>
        </label>
      </div>
      <div class="form">
        <label class="mid">
          User name
          <input value={user} autocomplete="off" placeholder="anonymous" onInput={(e) => setUser(e.currentTarget.value)} data-testid="opcua-user" />
        </label>
        <label class="mid">
          Password
          <input type="password" value={password} autocomplete="new-password" disabled={!user.trim()} onInput={(e) => setPassword(e.currentTarget.value)} data-testid="opcua-password" />
        </label>
        <label class="check">
          <input type="checkbox" checked={trust} onChange={(e) => setTrust(e.currentTarget.checked)} data-testid="opcua-trust" /> Trust the server certificate
        </label>
        <label class="check">
          <input type="checkbox" checked={showProperties} onChange={(e) => setShowProperties(e.currentTarget.checked)} data-testid="opcua-properties" /> List properties
        </label>
        <button class="primary" onClick={browse} disabled={busy} data-testid="opcua-browse">
          {busy ? 'Browsing…' : 'Browse'}
        </button>
      </div>
      <p class="muted small">
        The password is used for this browse only: sent to the gateway with each request of the tree, never stored or shown. Trusting the certificate keeps it in the console's trust folder; the gateway's OPC UA source trusts server certificates in its own folder.
      </p>
      {err ? (
        <p class="err-line" data-testid="build-error">
          {err}
        </p>
      ) : (
        ''
      )}
      {catalogLine}
      <datalist id="mvars">
        {(catalog?.variables ?? []).map((v) => (
          <option value={v.id}>
            {v.name}
            {v.machine ? ` · ${v.machine}` : ''}
          </option>
        ))}
      </datalist>
      {meta && conn ? (
        <>
          <p class="muted small" data-testid="opcua-connected">
            {meta.endpoint} · {meta.security_mode}/{meta.security_policy} · {meta.user ? `user ${meta.user}` : 'anonymous'}
          </p>
          <div class="tree" data-testid="opcua-tree">
            {levelRows(ROOT, 0)}
            {meta.truncated ? (
              <p class="muted" data-testid="browse-truncated">
                Stopped after {meta.nodes.length} nodes{meta.stopped_by === 'timeout' ? ' (time limit)' : ''}.
              </p>
            ) : (
              ''
            )}
          </div>
          <div class="form">
            <label class="narrow">
              Server name
              <input
                value={name}
                onInput={(e) => {
                  typed.current.name = true;
                  setName(e.currentTarget.value);
                }}
                data-testid="opcua-server-name"
              />
            </label>
            <button class="primary" disabled={count === 0} onClick={make} data-testid="add-opcua">
              Add {count} node{count === 1 ? '' : 's'} to the configuration{flagged ? ` (${flagged} flagged)` : ''}
            </button>
          </div>
          {flagged ? (
            <p class="hint warn small" data-testid="flag-summary">
              {flagged} of {count} mapping{count === 1 ? '' : 's'} flagged: an id not in the catalog can still be added (create it in the tracking service); an id the configuration being edited already maps is left out when adding, and the Configuration tab says so.
            </p>
          ) : (
            ''
          )}
          {meta.user ? (
            <p class="hint small" data-testid="password-hint">
              The configuration gets the user <b class="mono">{meta.user}</b> with <code>password: {'{'}env: OPCUA_PASSWORD{'}'}</code>: the password is never written. Set OPCUA_PASSWORD (or OPCUA_PASSWORD_FILE) in the gateway's environment: the check and Apply refuse the configuration while it is not set. When another server of the file reads OPCUA_PASSWORD already, the new one reads OPCUA_PASSWORD_&lt;SERVER NAME&gt; (the diff shows which).
            </p>
          ) : (
            ''
          )}
        </>
      ) : (
        ''
      )}
    </section>
  );
}
