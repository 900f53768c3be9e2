import { isRecord, list, num, str } from '../../core/untyped.js';
import { definePlugin, namesIn } from '../plugin.js';
import { opcuaSectionSchema } from './config.js';

/** OPC UA servers; node-opcua is loaded only when a server is configured. */
export const opcuaPlugin = definePlugin({
  kind: 'opcua',
  label: 'OPC UA',
  schema: opcuaSectionSchema,
  create: async (section, makeContext) => (section.servers.length > 0 ? (await import('./index.js')).createOpcuaSources(section, makeContext) : []),
  inventory: (section) => section.servers.map((s) => [s.name, { variables: s.nodes.map((n) => n.variable), devices: new Map(), historyAuto: s.history.backfill === 'auto' }]),
  mappedVariables(section, use) {
    section.servers.forEach((s, i) => s.nodes.forEach((n, j) => use(n.variable, i, () => `opcua.servers[${i}].nodes[${j}].variable`, n.unit)));
    return [];
  },
  mappingSource: (section, index) => {
    const s = section.servers[index];
    return s ? { name: s.name, onChange: s.mode !== 'polling' } : undefined;
  },
  names: (section) => (isRecord(section) ? namesIn(section.servers, ['opcua', 'servers']) : []),
  statusSummary(d) {
    const invalid = list(d.invalid_nodes).length;
    return `${num(d.nodes_monitored) ?? 0}/${num(d.nodes_configured) ?? '?'} nodes monitored${invalid ? `, ${invalid} INVALID` : ''} (${str(d.mode) ?? '?'}, ${str(d.security) ?? '?'}) at ${str(d.endpoint) ?? '?'}`;
  },
});
