import { h, Fragment } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { BrowseNode, BrowseResponse, Catalog } from '../api/build.js';
import { fmtNum } from '../../web/format.js';
import { api, messageOf } from './lib.js';
import { store } from './store.js';
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

/** Build the config → OPC UA: browse a server, tick nodes, map them to machine variables. */
export function OpcuaBrowse({ addToConfig }: { addToConfig: AddToConfig }) {
  const first = store.status?.sources.find((s) => s.kind === 'opcua');
  const [endpoint, setEndpoint] = useState(typeof first?.detail?.endpoint === 'string' ? first.detail.endpoint : 'opc.tcp://127.0.0.1:4840');
  const [depth, setDepth] = useState('4');
  const [result, setResult] = useState<BrowseResponse | null>(null);
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState<string | null>(null);
  const [ticked, setTicked] = useState<Record<string, Ticked>>({});
  const [catalog, setCatalog] = useState<CatalogState | null>(null);
  const [name, setName] = useState('plc1');
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
      const nodes = Object.values(ticked).map((t) => ({ node_id: t.node.nsu, variable: t.variable, comment: `${t.node.path} (${t.node.dataType})` }));
      await addToConfig({ opcua: { server: { name, endpoint: result.endpoint, security_mode: result.security_mode, security_policy: result.security_policy }, nodes } });
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
            <button class="primary" disabled={count === 0} onClick={make} data-testid="add-opcua">
              Add {count} node{count === 1 ? '' : 's'} to the configuration
            </button>
          </div>
        </>
      ) : (
        ''
      )}
    </section>
  );
}

