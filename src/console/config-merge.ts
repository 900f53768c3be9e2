import { isDeepStrictEqual } from 'node:util';
import { Document, isMap, isScalar, isSeq, parseDocument, YAMLMap, YAMLSeq, type Node } from 'yaml';
import { validateConfig } from '../config/load.js';
import { withoutReadingSecrets } from '../config/secrets.js';
import { mappedVariables } from '../sources/mapped-variables.js';

/**
 * "Add to configuration" (issue 24 §3): merges what the Build page selected (OPC UA nodes of one
 * server, Modbus registers of one device, CSV rows) into the text of the configuration the user is
 * editing. It edits the YAML document, so every comment, blank line and flow/block style the user
 * wrote stays as it was; new entries take the style of their siblings (a register list written as
 * `- { variable: ..., address: ... }` gets new lines in the same form).
 *
 * Rules (the issue leaves them open):
 * - An OPC UA server is the same server when its endpoint matches (case-insensitive host, trailing
 *   slash ignored); nodes go to that server, otherwise a new server entry is appended (its name
 *   made unique: a name says nothing about which machine it is). The `opcua:` section is created
 *   when missing.
 * - A Modbus device is the same device when transport, host/path, port and unit id all match;
 *   otherwise a new device is appended, its name made unique. The `modbus:` section is created
 *   (name `modbus`) when missing.
 * - A mapping is skipped, with the reason, when its variable is already mapped anywhere in the
 *   configuration (a variable fed by two sources would interleave two series), when the node id is
 *   already mapped on that server, or when the register (table, address) is already read on that
 *   device. Nothing is ever removed or rewritten.
 */

export interface OpcuaServerAddition {
  name: string;
  endpoint: string;
  security_mode?: 'None' | 'Sign' | 'SignAndEncrypt';
  security_policy?: string;
  /** User name of a `type: username` identity; its password is written as `{env: OPCUA_PASSWORD}`, never as text. */
  user?: string;
}

export interface OpcuaNodeAddition {
  node_id: string;
  variable: string;
  /** Written as a comment after the node id (`# Press1/Temperature (Double)`). */
  comment?: string;
}

export interface ModbusDeviceAddition {
  name: string;
  transport: 'tcp' | 'rtu' | 'rtu_over_tcp';
  host?: string;
  port?: number;
  path?: string;
  unit_id: number;
}

export interface ModbusRegisterAddition {
  variable: string;
  table: 'coil' | 'discrete_input' | 'holding' | 'input';
  address: number;
  type?: string;
  byte_order?: string;
  scale?: number;
  offset?: number;
  comment?: string;
}

export interface MergeResult {
  /** The merged configuration text (the input unchanged when nothing was added). */
  yaml: string;
  /** Setting path of the entry that received the mappings, e.g. `opcua.servers[1]`, and whether it is new. */
  target: string;
  created: boolean;
  added: number;
  skipped: Array<{ what: string; reason: string }>;
}

export class MergeError extends Error {}

/**
 * What a merge added, to write into the user's text as it is: new list entries after the last
 * entry of a list the file already has, or a new section at the end. Everything else in the text
 * stays byte for byte (the yaml library would re-space aligned comments and flow lists if the
 * whole document were printed again).
 */
type Splice = { seq: YAMLSeq; node: YAMLMap } | { section: string; node: YAMLMap };

// --- OPC UA --------------------------------------------------------------------------------------

export function mergeOpcuaNodes(text: string, server: OpcuaServerAddition, nodes: readonly OpcuaNodeAddition[]): MergeResult {
  const doc = editableDocument(text);
  const splices: Splice[] = [];
  const servers = sectionList(doc, 'opcua', 'servers', () => undefined, splices);
  const list = servers.items.map((s) => (isMap(s) ? (s.toJSON() as Record<string, unknown>) : {}));
  let index = list.findIndex((s) => typeof s.endpoint === 'string' && sameEndpoint(s.endpoint, server.endpoint));
  const created = index < 0;
  if (created) {
    const entry: Record<string, unknown> = { name: uniqueName(server.name, sourceNames(doc)), endpoint: server.endpoint, security_mode: server.security_mode ?? 'None' };
    if (server.security_policy && server.security_policy !== 'None') entry.security_policy = server.security_policy;
    if (server.user) entry.user = { type: 'username', username: server.user, password: { env: 'OPCUA_PASSWORD' } };
    entry.nodes = [];
    const node = doc.createNode(entry) as YAMLMap;
    const password = node.getIn(['user', 'password'], true);
    if (isMap(password)) password.flow = true;
    addEntry(servers, node, splices);
    index = servers.items.length - 1;
  }
  const target = servers.items[index] as YAMLMap;
  const nodeList = listIn(target, 'nodes');
  const mapped = mappedVariableIds(doc);
  const onServer = new Set(nodeList.items.map((n) => (isMap(n) ? String(n.get('node_id')) : '')));
  const skipped: MergeResult['skipped'] = [];
  const seen = new Set<string>();
  let added = 0;
  for (const n of nodes) {
    const reason = onServer.has(n.node_id) ? 'the node is already mapped on this server' : mapped.get(n.variable) ? `${n.variable} is already mapped (${mapped.get(n.variable)})` : seen.has(n.variable) ? `${n.variable} is chosen for another node of this selection` : null;
    if (reason) {
      skipped.push({ what: n.node_id, reason });
      continue;
    }
    seen.add(n.variable);
    onServer.add(n.node_id);
    addEntry(nodeList, entryNode(doc, nodeList, { node_id: n.node_id, variable: n.variable }, 'node_id', n.comment), splices);
    added += 1;
  }
  return { yaml: added || created ? render(text, doc, splices) : text, target: `opcua.servers[${index}]`, created, added, skipped };
}

/** Endpoints name the same server: opc.tcp URLs compared with the host case-insensitive and no trailing slash. */
export function sameEndpoint(a: string, b: string): boolean {
  const norm = (u: string) => u.trim().replace(/\/+$/, '').replace(/^(opc\.tcp:\/\/)([^/:]+)/i, (_, p: string, h: string) => `${p.toLowerCase()}${h.toLowerCase()}`);
  return norm(a) === norm(b);
}

// --- Modbus --------------------------------------------------------------------------------------

export function mergeModbusRegisters(text: string, device: ModbusDeviceAddition, registers: readonly ModbusRegisterAddition[]): MergeResult {
  const doc = editableDocument(text);
  const splices: Splice[] = [];
  const devices = sectionList(doc, 'modbus', 'devices', (section) => section.set('name', uniqueName('modbus', sourceNames(doc))), splices);
  const list = devices.items.map((d) => (isMap(d) ? (d.toJSON() as Record<string, unknown>) : {}));
  let index = list.findIndex((d) => sameDevice(d, device));
  const created = index < 0;
  if (created) {
    const entry: Record<string, unknown> = { name: uniqueName(device.name, sourceNames(doc)), transport: device.transport };
    if (device.transport === 'rtu') entry.path = device.path;
    else Object.assign(entry, { host: device.host, port: device.port ?? 502 });
    entry.unit_id = device.unit_id;
    entry.registers = [];
    addEntry(devices, doc.createNode(entry) as YAMLMap, splices);
    index = devices.items.length - 1;
  }
  const target = devices.items[index] as YAMLMap;
  const regList = listIn(target, 'registers');
  const mapped = mappedVariableIds(doc);
  const read = new Set(regList.items.map((r) => (isMap(r) ? `${String(r.get('table') ?? 'holding')}:${String(r.get('address'))}` : '')));
  const skipped: MergeResult['skipped'] = [];
  const seen = new Set<string>();
  let added = 0;
  for (const r of registers) {
    const at = `${r.table}:${r.address}`;
    const reason = read.has(at) ? `${r.table} ${r.address} is already read on this device` : mapped.get(r.variable) ? `${r.variable} is already mapped (${mapped.get(r.variable)})` : seen.has(r.variable) ? `${r.variable} is chosen for another register of this selection` : null;
    if (reason) {
      skipped.push({ what: `${r.table} ${r.address}`, reason });
      continue;
    }
    seen.add(r.variable);
    read.add(at);
    const entry: Record<string, unknown> = { variable: r.variable, table: r.table, address: r.address };
    if (r.type) entry.type = r.type;
    if (r.byte_order) entry.byte_order = r.byte_order;
    if (r.scale !== undefined && r.scale !== 1) entry.scale = r.scale;
    if (r.offset !== undefined && r.offset !== 0) entry.offset = r.offset;
    addEntry(regList, entryNode(doc, regList, entry, 'variable', r.comment), splices);
    added += 1;
  }
  return { yaml: added || created ? render(text, doc, splices) : text, target: `modbus.devices[${index}]`, created, added, skipped };
}

function sameDevice(d: Record<string, unknown>, a: ModbusDeviceAddition): boolean {
  if ((d.transport ?? 'tcp') !== a.transport || Number(d.unit_id ?? 1) !== a.unit_id) return false;
  if (a.transport === 'rtu') return d.path === a.path;
  return String(d.host ?? '').toLowerCase() === String(a.host ?? '').toLowerCase() && Number(d.port ?? 502) === (a.port ?? 502);
}

// --- The document --------------------------------------------------------------------------------

function editableDocument(text: string): Document.Parsed {
  const doc = parseDocument(text, { keepSourceTokens: false });
  const problem = doc.errors[0];
  if (problem) throw new MergeError(`the configuration is not valid YAML (${problem.message.split('\n')[0]}); fix it in the editor first`);
  if (doc.contents !== null && !isMap(doc.contents)) throw new MergeError('the configuration is not a mapping of settings (opcua:, modbus: ...); fix it in the editor first');
  if (doc.contents === null) doc.contents = new YAMLMap() as unknown as typeof doc.contents;
  return doc;
}

/**
 * `section.key` as a block list, creating `section:` (with `init` run on the new map) and the list
 * when missing. A section or list written in flow style stays in flow style.
 */
function sectionList(doc: Document.Parsed, section: string, key: string, init: (section: YAMLMap) => void, splices: Splice[]): YAMLSeq {
  const root = doc.contents as unknown as YAMLMap;
  let sec: unknown = root.get(section, true);
  if (sec === undefined || sec === null || (isScalar(sec) && sec.value === null)) {
    const created = new YAMLMap();
    init(created);
    const pair = doc.createPair(section, created);
    // A blank line between the user's last section and the new one, as the sample config does.
    if (root.items.length > 0 && isScalar(pair.key)) pair.key.spaceBefore = true;
    root.items.push(pair);
    splices.push({ section, node: created });
    sec = created;
  }
  if (!isMap(sec)) throw new MergeError(`${section}: is not a mapping of settings in the configuration; fix it in the editor first`);
  return listIn(sec, key, section);
}

function listIn(map: YAMLMap, key: string, where = ''): YAMLSeq {
  let list: unknown = map.get(key, true);
  if (list === undefined || list === null || (isScalar(list) && list.value === null)) {
    list = new YAMLSeq();
    map.set(key, list);
  }
  if (!isSeq(list)) throw new MergeError(`${where ? `${where}.` : ''}${key}: is not a list in the configuration; fix it in the editor first`);
  // An empty list written `nodes: []` becomes a block list once it has entries.
  if (list.items.length === 0) list.flow = false;
  return list;
}

/** A new list entry in the style of its siblings, with its comment after the line's first key (block) or after the entry (flow). */
function entryNode(doc: Document.Parsed, list: YAMLSeq, entry: Record<string, unknown>, commentKey: string, comment?: string): YAMLMap {
  const node = doc.createNode(entry) as YAMLMap;
  const sibling = list.items.at(-1);
  if (isMap(sibling) && sibling.flow) node.flow = true;
  if (comment) {
    const line = ` ${comment.replace(/[\r\n]+/g, ' ')}`;
    if (node.flow) node.comment = line;
    else {
      const key = node.get(commentKey, true);
      if (isScalar(key)) key.comment = line;
    }
  }
  return node;
}

/** Adds `node` to `list` and notes where it goes in the text (a list new in this merge is written with its parent). */
function addEntry(list: YAMLSeq, node: YAMLMap, splices: Splice[]): void {
  list.add(node);
  if (list.range) splices.push({ seq: list, node });
}

/**
 * The merged text: the user's text with the splices written in. Checked by reading it back: when
 * it does not mean exactly the merged document (a layout the splicing does not know, such as a
 * list written in flow style over several lines), the whole document is printed instead, which
 * keeps comments but may re-space them.
 */
function render(text: string, doc: Document.Parsed, splices: readonly Splice[]): string {
  const whole = () => doc.toString({ lineWidth: 0 });
  const inserts: Array<{ at: number; text: string }> = [];
  for (const sp of splices) {
    if ('section' in sp) {
      const body = printBlock(new YAMLMap(), sp.section, sp.node);
      inserts.push({ at: text.length, text: `${text.length && !text.endsWith('\n') ? '\n' : ''}${text.trim() ? '\n' : ''}${body}` });
      continue;
    }
    // New entries go after the list's last entry in the file, in the order they were added.
    const last = sp.seq.items.findLast((i): i is Node => (i as Node).range !== undefined && (i as Node).range !== null) as Node | undefined;
    if (!last?.range || sp.seq.flow) return whole();
    const lineStart = text.lastIndexOf('\n', last.range[0] - 1) + 1;
    const lead = /^(\s*)-\s+$/.exec(text.slice(lineStart, last.range[0]));
    if (!lead) return whole();
    let at = last.range[1];
    if (text[at - 1] !== '\n') at = text.indexOf('\n', at) < 0 ? text.length : text.indexOf('\n', at) + 1;
    const first = !inserts.some((i) => i.at === at);
    inserts.push({ at, text: `${first && at === text.length && !text.endsWith('\n') ? '\n' : ''}${printItem(sp.node).replace(/^(?=.)/gm, lead[1])}` });
  }
  let out = text;
  // Same offset: keep the order of the merge (stable sort, then splice from the end).
  const ordered = inserts.map((ins, i) => ({ ...ins, i })).sort((a, b) => b.at - a.at || b.i - a.i);
  for (const ins of ordered) out = out.slice(0, ins.at) + ins.text + out.slice(ins.at);
  const back = parseDocument(out);
  if (back.errors.length || !isDeepStrictEqual(back.toJS({ maxAliasCount: 1_000 }), doc.toJS({ maxAliasCount: 1_000 }))) return whole();
  return out;
}

/** `node` as one entry of a block list (`- key: value`), at indentation 0. */
function printItem(node: YAMLMap): string {
  const d = new Document(new YAMLSeq());
  (d.contents as YAMLSeq).items.push(node);
  return d.toString({ lineWidth: 0 });
}

function printBlock(map: YAMLMap, key: string, node: YAMLMap): string {
  const d = new Document(map);
  map.set(key, node);
  return d.toString({ lineWidth: 0 });
}

/** Names of every source (OPC UA servers, Modbus section and devices, MQTT connections): a new one must not reuse one. */
function sourceNames(doc: Document.Parsed): Set<string> {
  const js = (doc.toJS() ?? {}) as Record<string, unknown>;
  const names = new Set<string>();
  const add = (list: unknown) => {
    if (Array.isArray(list)) for (const e of list) if (e && typeof e === 'object' && typeof (e as { name?: unknown }).name === 'string') names.add((e as { name: string }).name);
  };
  add((js.opcua as { servers?: unknown } | undefined)?.servers);
  const modbus = js.modbus as { name?: unknown; devices?: unknown } | undefined;
  if (typeof modbus?.name === 'string') names.add(modbus.name);
  add(modbus?.devices);
  add((js.mqtt as { connections?: unknown } | undefined)?.connections);
  return names;
}

function uniqueName(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/**
 * Variable id → the first setting that maps it. When the text is a valid configuration this is the
 * gateway's own list (every source kind, annotations too); while it is not, the `variable:` keys of
 * the OPC UA and Modbus sections, so a half-written file still gets the duplicates it can see.
 */
function mappedVariableIds(doc: Document.Parsed): Map<string, string> {
  const out = new Map<string, string>();
  const js = doc.toJS({ maxAliasCount: 1_000 }) as unknown;
  try {
    const { config } = withoutReadingSecrets(() => validateConfig(js));
    for (const [id, settings] of mappedVariables(config).variables) out.set(id, settings[0]);
    return out;
  } catch {
    const c = (js ?? {}) as { opcua?: { servers?: Array<{ nodes?: Array<{ variable?: unknown }> }> }; modbus?: { devices?: Array<{ registers?: Array<{ variable?: unknown }> }> } };
    c.opcua?.servers?.forEach((s, i) => s?.nodes?.forEach((n, j) => typeof n?.variable === 'string' && !out.has(n.variable) && out.set(n.variable, `opcua.servers[${i}].nodes[${j}].variable`)));
    c.modbus?.devices?.forEach((d, i) => d?.registers?.forEach((r, j) => typeof r?.variable === 'string' && !out.has(r.variable) && out.set(r.variable, `modbus.devices[${i}].registers[${j}].variable`)));
    return out;
  }
}
