import { isMap, isPair, isScalar, isSeq, parseDocument, YAMLMap, YAMLSeq, type Document } from 'yaml';
import { parseYamlDocument, parseYamlDocumentSliced, validateConfig, type ParsedYaml } from '../config/load.js';
import { ConfigError } from '../core/errors.js';
import { withoutReadingSecrets } from '../config/secrets.js';
import { mappedVariables } from '../sources/mapped-variables.js';
import { SOURCE_PLUGINS } from '../sources/plugins.js';
import { mappingRows } from './config-mappings.js';
import { describeRange, resolveAddress, TABLE_INFO, type AddressBase, type Table } from '../sources/modbus/address.js';
import { render, renderSliced, scalarText, type Splice } from './merge-text.js';

export { commentColumn } from './merge-text.js';
import { REGISTER_COUNT, type DataType } from '../sources/modbus/decode.js';

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
 * - A Modbus device is the same device when transport, host (or serial path), port and unit id
 *   all match; otherwise a new device is appended, its name made unique. The `modbus:` section is
 *   created (name `modbus`) when missing. Register addresses come as protocol addresses and are
 *   written in the device's `address_base` (or as the caller wrote them, e.g. "40101" from a CSV).
 * - A mapping is skipped, with the reason, when its variable is already fed by a source anywhere
 *   in the configuration (a variable fed by two sources would interleave two series; annotations
 *   only refer to variables, so they do not count), when the node id is already mapped on that
 *   server, or when the register overlaps one already read on that device (the rule of
 *   sources/modbus/plan.ts: `bit` values may share a register, other values may not overlap).
 *   Nothing is ever removed or rewritten.
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
  /** Written when not 1 and 0. */
  scale?: number;
  offset?: number;
  /** The stored value's unit, written as the node's `unit` setting (checked against the catalog's). */
  unit?: string;
  /** Written as a comment after the node id (`# Press1/Temperature (Double)`). */
  comment?: string;
}

export interface ModbusDeviceAddition {
  name: string;
  transport: 'tcp' | 'rtu' | 'rtu_over_tcp';
  host?: string;
  port?: number;
  /** Serial port of a `rtu` device (written as `serial.path`). */
  path?: string;
  /** Line settings of a new `rtu` device, written when given (else the schema's defaults apply). */
  serial?: { baud_rate?: number; parity?: 'none' | 'even' | 'odd' | 'mark' | 'space'; data_bits?: 7 | 8; stop_bits?: 1 | 2 };
  unit_id: number;
}

export interface ModbusRegisterAddition {
  variable: string;
  table: Table;
  /** Protocol address (0-65535), what the probe read. */
  address: number;
  /** How to write the address (`"40101"`, `"0x0064"`, `101` in a 1-based device); default the protocol address in the device's address_base. */
  written_address?: number | string;
  type?: string;
  /** For type bit: which bit of the register. */
  bit?: number;
  byte_order?: string;
  scale?: number;
  offset?: number;
  /** The stored value's unit, written as the register's `unit` setting. */
  unit?: string;
  comment?: string;
}

export interface MergeResult {
  /** The merged configuration text (the input unchanged when nothing was added). */
  yaml: string;
  /** Setting path of the entry that received the mappings, e.g. `opcua.servers[1]`, and whether it is new. */
  target: string;
  created: boolean;
  added: number;
  /** What was left out and why; `index` is the position in the nodes/registers given. */
  skipped: Array<{ what: string; reason: string; index: number }>;
}

export class MergeError extends Error {}

// --- A merge ------------------------------------------------------------------------------------

/** What one selection added to a merge: the entry that received it, whether it is new, what was left out. */
export type MergeStep = Omit<MergeResult, 'yaml'>;

/**
 * One merge of the editor's text: parsed once, any number of selections added (the CSV import adds
 * one per source), written back once. `open` parses the text in slices, yielding to the event loop
 * between them, as the console's check does (config/load.ts parseYamlDocumentSliced).
 */
export class ConfigMerge {
  private readonly splices: Splice[] = [];
  private fed: Map<string, string> | null = null;
  private changed = false;

  private constructor(
    readonly text: string,
    /** The document being added to (its nodes keep their positions in `text`). */
    readonly doc: Document.Parsed,
    /** The text's value before the merge. */
    readonly value: unknown,
  ) {}

  /** The text parsed at once (small texts, tests). */
  static fromText(text: string): ConfigMerge {
    return ConfigMerge.of(text, () => parseYamlDocument(text, 'the configuration'));
  }

  /** The text parsed in slices, `pause` awaited between them. */
  static async open(text: string, pause: () => Promise<void>): Promise<ConfigMerge> {
    let parsed: ParsedYaml;
    try {
      parsed = await parseYamlDocumentSliced(text, 'the configuration', pause);
    } catch (err) {
      throw mergeErrorOf(err);
    }
    return ConfigMerge.of(text, () => parsed);
  }

  private static of(text: string, parse: () => ParsedYaml): ConfigMerge {
    let parsed: ParsedYaml;
    try {
      parsed = parse();
    } catch (err) {
      throw mergeErrorOf(err);
    }
    // An empty text has no document: one is made to add to.
    const doc = parsed.doc ?? parseDocument(text);
    if (doc.contents !== null && !isMap(doc.contents)) throw new MergeError('the configuration is not a mapping of settings (opcua:, modbus: ...); fix it in the editor first');
    if (doc.contents === null) doc.contents = new YAMLMap() as unknown as typeof doc.contents;
    return new ConfigMerge(text, doc, parsed.value);
  }

  /** Variable → the setting that feeds it, in the text as it was and as this merge added to it. */
  fedNow(): Map<string, string> {
    this.fed ??= fedVariables(this.doc, this.value);
    return this.fed;
  }

  /** The merged text (the text itself when nothing was added), written in at once. */
  result(): string {
    return this.changed ? render(this.text, this.doc, this.splices) : this.text;
  }

  /** `result`, the check of the merged text parsed in slices. */
  async resultSliced(pause: () => Promise<void>): Promise<string> {
    return this.changed ? renderSliced(this.text, this.doc, this.splices, pause) : this.text;
  }

  // --- OPC UA ------------------------------------------------------------------------------------

  opcua(server: OpcuaServerAddition, nodes: readonly OpcuaNodeAddition[]): MergeStep {
    const { doc, splices } = this;
    const servers = sectionList(doc, 'opcua', 'servers', () => undefined, splices);
    // Only the endpoints are read: a server's nodes may be thousands.
    let index = servers.items.findIndex((s) => isMap(s) && typeof s.get('endpoint') === 'string' && sameEndpoint(s.get('endpoint') as string, server.endpoint));
    const created = index < 0;
    if (created) {
      const entry: Record<string, unknown> = { name: uniqueName(server.name, sourceNames(doc)), endpoint: server.endpoint, security_mode: server.security_mode ?? 'None' };
      if (server.security_policy && server.security_policy !== 'None') entry.security_policy = server.security_policy;
      if (server.user) entry.user = { type: 'username', username: server.user, password: { env: passwordEnv(doc, entry.name as string) } };
      entry.nodes = [];
      const node = doc.createNode(entry) as YAMLMap;
      const password = node.getIn(['user', 'password'], true);
      if (isMap(password)) password.flow = true;
      addEntry(servers, node, splices);
      index = servers.items.length - 1;
    }
    const target = servers.items[index] as YAMLMap;
    const nodeList = listIn(target, 'nodes');
    const mapped = this.fedNow();
    const onServer = new Set(nodeList.items.map((n) => (isMap(n) ? String(n.get('node_id')) : '')));
    const skipped: MergeResult['skipped'] = [];
    const seen = new Set<string>();
    let added = 0;
    nodes.forEach((n, i) => {
      const reason = onServer.has(n.node_id) ? 'the node is already mapped on this server' : mapped.get(n.variable) ? `${n.variable} is already mapped (${mapped.get(n.variable)})` : seen.has(n.variable) ? `${n.variable} is chosen for another node of this selection` : null;
      if (reason) {
        skipped.push({ what: n.node_id, reason, index: i });
        return;
      }
      seen.add(n.variable);
      onServer.add(n.node_id);
      const entry: Record<string, unknown> = { node_id: n.node_id, variable: n.variable };
      if (n.scale !== undefined && n.scale !== 1) entry.scale = n.scale;
      if (n.offset !== undefined && n.offset !== 0) entry.offset = n.offset;
      if (n.unit) entry.unit = n.unit;
      addEntry(nodeList, entryNode(doc, nodeList, entry, 'node_id', n.comment), splices);
      added += 1;
    });
    for (const v of seen) mapped.set(v, `opcua.servers[${index}].nodes`);
    this.changed ||= added > 0 || created;
    return { target: `opcua.servers[${index}]`, created, added, skipped };
  }

  // --- Modbus ------------------------------------------------------------------------------------

  modbus(device: ModbusDeviceAddition, registers: readonly ModbusRegisterAddition[]): MergeStep {
    const { doc, splices } = this;
    const devices = sectionList(doc, 'modbus', 'devices', (section) => section.set('name', uniqueName('modbus', sourceNames(doc))), splices);
    let index = devices.items.findIndex((d) => isMap(d) && sameDevice(d, device));
    const created = index < 0;
    if (created) {
      const entry: Record<string, unknown> = { name: uniqueName(device.name, sourceNames(doc)), transport: device.transport };
      if (device.transport === 'rtu') entry.serial = { path: device.path, ...Object.fromEntries(Object.entries(device.serial ?? {}).filter(([, v]) => v !== undefined)) };
      else Object.assign(entry, { host: device.host, port: device.port ?? 502 });
      entry.unit_id = device.unit_id;
      entry.registers = [];
      const node = doc.createNode(entry) as YAMLMap;
      const serial = node.get('serial', true);
      if (isMap(serial)) serial.flow = true;
      addEntry(devices, node, splices);
      index = devices.items.length - 1;
    }
    const target = devices.items[index] as YAMLMap;
    const base: AddressBase = target.get('address_base') === 1 ? 1 : 0;
    const order = target.get('byte_order');
    const deviceOrder = typeof order === 'string' ? order : 'ABCD';
    const regList = listIn(target, 'registers');
    const mapped = this.fedNow();
    const read = new SpanIndex(regList, base);
    const skipped: MergeResult['skipped'] = [];
    const seen = new Set<string>();
    let added = 0;
    registers.forEach((r, i) => {
      const span = newSpan(r);
      const overlap = read.overlap(span);
      const reason = overlap
        ? `${describeSpan(span, base)} ${overlap.type === 'bit' && span.type === 'bit' ? 'reads the same bit as' : 'overlaps'} ${describeSpan(overlap, base)}, read as ${overlap.variable}`
        : mapped.get(r.variable)
          ? `${r.variable} is already mapped (${mapped.get(r.variable)})`
          : seen.has(r.variable)
            ? `${r.variable} is chosen for another register of this selection`
            : null;
      if (reason) {
        skipped.push({ what: `${r.table} ${r.written_address ?? r.address + base}`, reason, index: i });
        return;
      }
      seen.add(r.variable);
      read.add(span);
      const bits = TABLE_INFO[r.table].bits;
      // A Modicon reference ("40101") names its table: written without one, as the manual writes it.
      const modicon = typeof r.written_address === 'string' && /^[0134]\d{4,5}$/.test(r.written_address.trim());
      const entry: Record<string, unknown> = modicon ? { variable: r.variable, address: r.written_address } : { variable: r.variable, table: r.table, address: r.written_address ?? r.address + base };
      // A coil or discrete input is a bool, the default there; a register's type is always written.
      if (r.type && !(bits && r.type === 'bool')) entry.type = r.type;
      if (r.type === 'bit' && r.bit !== undefined) entry.bit = r.bit;
      if (!bits && r.byte_order && r.byte_order !== deviceOrder) entry.byte_order = r.byte_order;
      if (r.scale !== undefined && r.scale !== 1) entry.scale = r.scale;
      if (r.offset !== undefined && r.offset !== 0) entry.offset = r.offset;
      if (r.unit) entry.unit = r.unit;
      addEntry(regList, entryNode(doc, regList, entry, 'variable', r.comment), splices);
      added += 1;
    });
    for (const v of seen) mapped.set(v, `modbus.devices[${index}].registers`);
    this.changed ||= added > 0 || created;
    return { target: `modbus.devices[${index}]`, created, added, skipped };
  }

  // --- Changes to existing mappings --------------------------------------------------------------

  /**
   * Changes an OPC UA node entry (`opcua.servers[i].nodes[j]`): its node id, scale, offset or unit
   * (a unit not given is left as written).
   * Returns why it cannot (another node of the server reads that node id), or null once done.
   */
  updateOpcuaNode(server: number, node: number, to: { node_id: string; scale?: number; offset?: number; unit?: string }): string | null {
    const list = this.doc.getIn(['opcua', 'servers', server, 'nodes'], true);
    const entry = isSeq(list) ? list.items[node] : undefined;
    if (!isSeq(list) || !isMap(entry)) return `opcua.servers[${server}].nodes[${node}] is not an entry the text holds`;
    const other = list.items.findIndex((n, k) => k !== node && isMap(n) && n.get('node_id') === to.node_id);
    if (other >= 0) return `node ${to.node_id} is already read at opcua.servers[${server}].nodes[${other}] (${String((list.items[other] as YAMLMap).get('variable'))})`;
    this.setValues(entry, { node_id: to.node_id, scale: to.scale ?? 1, offset: to.offset ?? 0, ...(to.unit ? { unit: to.unit } : {}) }, { scale: 1, offset: 0 });
    return null;
  }

  /**
   * Changes a Modbus register entry (`modbus.devices[i].registers[j]`): where it reads and how.
   * Returns why it cannot (it would overlap another register of the device), or null once done.
   */
  updateModbusRegister(device: number, register: number, to: ModbusRegisterAddition): string | null {
    const target = this.doc.getIn(['modbus', 'devices', device], true);
    const list = isMap(target) ? target.get('registers', true) : undefined;
    const entry = isSeq(list) ? list.items[register] : undefined;
    if (!isMap(target) || !isSeq(list) || !isMap(entry)) return `modbus.devices[${device}].registers[${register}] is not an entry the text holds`;
    const base: AddressBase = target.get('address_base') === 1 ? 1 : 0;
    const others = new SpanIndex(list, base, entry);
    const span = newSpan(to);
    const overlap = others.overlap(span);
    if (overlap) return `${describeSpan(span, base)} ${overlap.type === 'bit' && span.type === 'bit' ? 'reads the same bit as' : 'overlaps'} ${describeSpan(overlap, base)}, read as ${overlap.variable}`;
    const bits = TABLE_INFO[to.table].bits;
    const modicon = typeof to.written_address === 'string' && /^[0134]\d{4,5}$/.test(to.written_address.trim());
    const values: Record<string, string | number> = { address: to.written_address ?? to.address + base };
    if (!modicon || entry.has('table')) values.table = to.table;
    if (to.type && (!bits || to.type !== 'bool' || entry.has('type'))) values.type = to.type;
    if (to.type === 'bit' && to.bit !== undefined) values.bit = to.bit;
    if (!bits && to.byte_order) values.byte_order = to.byte_order;
    values.scale = to.scale ?? 1;
    values.offset = to.offset ?? 0;
    if (to.unit) values.unit = to.unit;
    this.setValues(entry, values, { scale: 1, offset: 0 });
    return null;
  }

  /**
   * Writes `values` into an entry of the text: a value it has is replaced where it is written, in
   * its quoting; one it lacks is added (a value equal to its default in `defaults` is not added).
   */
  private setValues(entry: YAMLMap, values: Record<string, string | number>, defaults: Record<string, string | number>): void {
    let grown = 0;
    for (const [key, value] of Object.entries(values)) {
      const pair = entry.items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === key);
      const current = isScalar(pair?.value) ? pair.value : null;
      if (current ? current.value === value : value === defaults[key]) continue;
      const splice = current?.range ? { kind: 'replace' as const, start: current.range[0], end: current.range[1], text: scalarText(value, current.type, entry.flow === true) } : keyAdded(this.text, entry, key, value);
      this.splices.push(splice);
      grown += splice.text.length - (splice.end - splice.start);
      if (current?.range) current.value = value;
      else entry.set(key, value);
      this.changed = true;
    }
    if (entry.flow && grown !== 0) this.keepCommentColumn(entry, grown);
  }

  /** A flow entry's line grown (or shrunk) by `grown` characters: the padding before its comment takes it back, so aligned comments stay aligned where they can. */
  private keepCommentColumn(entry: YAMLMap, grown: number): void {
    const end = entry.range?.[1];
    if (end === undefined) return;
    const eol = this.text.indexOf('\n', end);
    const rest = this.text.slice(end, eol < 0 ? this.text.length : eol);
    const pad = /^([ \t]+)#/.exec(rest);
    if (!pad) return;
    const width = Math.max(1, pad[1].length - grown);
    if (width !== pad[1].length) this.splices.push({ kind: 'replace', start: end, end: end + pad[1].length, text: ' '.repeat(width) });
  }
}

/** A `key: value` added to an entry of the text: before the `}` of a flow map, or as a line after the last one of a block map. */
function keyAdded(text: string, entry: YAMLMap, key: string, value: string | number): Extract<Splice, { kind: 'replace' }> {
  const range = entry.range;
  if (!range) throw new MergeError(`the entry to change is not in the text`);
  if (entry.flow) {
    let at = text.lastIndexOf('}', range[1]);
    while (at > range[0] && /[ \t]/.test(text[at - 1])) at -= 1;
    return { kind: 'replace', start: at, end: at, text: `, ${key}: ${scalarText(value, undefined, true)}` };
  }
  const first = entry.items[0];
  const keyAt = isPair(first) && isScalar(first.key) && first.key.range ? first.key.range[0] : range[0];
  const column = keyAt - (text.lastIndexOf('\n', keyAt - 1) + 1);
  const nl = text.indexOf('\n', Math.max(range[0], range[1] - 1));
  const at = nl < 0 ? text.length : nl + 1;
  return { kind: 'replace', start: at, end: at, text: `${nl < 0 ? '\n' : ''}${' '.repeat(column)}${key}: ${scalarText(value, undefined, false)}\n` };
}

/** The registers a device reads, by table and register, so that checking a new one costs its own registers, not the device's. */
class SpanIndex {
  private readonly at = new Map<string, Span[]>();

  constructor(list: YAMLSeq, base: AddressBase, except?: unknown) {
    for (const r of list.items) {
      if (r === except || !isMap(r)) continue;
      const span = readSpan(r, base);
      if (span) this.add(span);
    }
  }

  add(span: Span): void {
    for (let a = span.start; a < span.start + span.count; a++) {
      const key = `${span.table}:${a}`;
      const list = this.at.get(key);
      if (list) list.push(span);
      else this.at.set(key, [span]);
    }
  }

  overlap(span: Span): Span | undefined {
    for (let a = span.start; a < span.start + span.count; a++) {
      const found = this.at.get(`${span.table}:${a}`)?.find((o) => overlaps(o, span));
      if (found) return found;
    }
    return undefined;
  }
}

/** The parser's refusal (a syntax error with its line, nesting too deep, an alias to nothing) as the merge's. */
function mergeErrorOf(err: unknown): Error {
  if (!(err instanceof ConfigError)) return err as Error;
  const first = err.problems[0]?.replace(/^the configuration: /, '') ?? err.message;
  return new MergeError(`the configuration is not valid YAML (${first}); fix it in the editor first`);
}

/** "Add to configuration" of OPC UA nodes of one server. */
export function mergeOpcuaNodes(text: string, server: OpcuaServerAddition, nodes: readonly OpcuaNodeAddition[]): MergeResult {
  const m = ConfigMerge.fromText(text);
  return { ...m.opcua(server, nodes), yaml: m.result() };
}

/** "Add to configuration" of Modbus registers of one device. */
export function mergeModbusRegisters(text: string, device: ModbusDeviceAddition, registers: readonly ModbusRegisterAddition[]): MergeResult {
  const m = ConfigMerge.fromText(text);
  return { ...m.modbus(device, registers), yaml: m.result() };
}

/**
 * The environment variable a new server's password is read from: OPCUA_PASSWORD, or
 * OPCUA_PASSWORD_<NAME> when another server of the file reads that one already (two servers with
 * different passwords cannot share it).
 */
export function passwordEnv(doc: Document.Parsed, serverName: string): string {
  const js = (doc.toJS({ maxAliasCount: 1_000 }) ?? {}) as { opcua?: { servers?: Array<{ user?: { password?: { env?: unknown } } }> } };
  const taken = new Set((js.opcua?.servers ?? []).map((s) => s?.user?.password?.env).filter((e): e is string => typeof e === 'string'));
  if (!taken.has('OPCUA_PASSWORD')) return 'OPCUA_PASSWORD';
  const base = `OPCUA_PASSWORD_${serverName.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}`;
  let name = base;
  for (let i = 2; taken.has(name); i++) name = `${base}_${i}`;
  return name;
}

/** Endpoints name the same server: opc.tcp URLs compared with the host case-insensitive and no trailing slash. */
export function sameEndpoint(a: string, b: string): boolean {
  const norm = (u: string) => u.trim().replace(/\/+$/, '').replace(/^(opc\.tcp:\/\/)([^/:]+)/i, (_, p: string, h: string) => `${p.toLowerCase()}${h.toLowerCase()}`);
  return norm(a) === norm(b);
}

/** A configured device (its map, only the address settings read) is the device added to. */
function sameDevice(d: YAMLMap, a: ModbusDeviceAddition): boolean {
  if ((d.get('transport') ?? 'tcp') !== a.transport || Number(d.get('unit_id') ?? 1) !== a.unit_id) return false;
  if (a.transport === 'rtu') {
    const serial = d.get('serial');
    return isMap(serial) && serial.get('path') === a.path;
  }
  return String(d.get('host') ?? '').toLowerCase() === String(a.host ?? '').toLowerCase() && Number(d.get('port') ?? 502) === (a.port ?? 502);
}

/** The registers a value reads: protocol addresses [start, start + count). */
interface Span {
  variable: string;
  table: Table;
  start: number;
  count: number;
  type: DataType | string;
  bit?: number;
}

function countOf(table: Table, type: string): number {
  return TABLE_INFO[table].bits ? 1 : (REGISTER_COUNT[type as DataType] ?? 1);
}

/** A configured register (its map) as a span, or null when its address or table cannot be read (the check names it). */
function readSpan(r: YAMLMap, base: AddressBase): Span | null {
  const address = r.get('address');
  if (typeof address !== 'number' && typeof address !== 'string') return null;
  const resolved = resolveAddress(address, base);
  if (!resolved.ok) return null;
  const t = r.get('table');
  const table = resolved.table ?? (typeof t === 'string' && t in TABLE_INFO ? (t as Table) : null);
  if (!table) return null;
  const typed = r.get('type');
  const type = typeof typed === 'string' ? typed : TABLE_INFO[table].bits ? 'bool' : 'uint16';
  const bit = r.get('bit');
  return { variable: String(r.get('variable')), table, start: resolved.protocolAddress, count: countOf(table, type), type, bit: typeof bit === 'number' ? bit : undefined };
}

function newSpan(r: ModbusRegisterAddition): Span {
  const type = r.type ?? (TABLE_INFO[r.table].bits ? 'bool' : 'uint16');
  return { variable: r.variable, table: r.table, start: r.address, count: countOf(r.table, type), type, bit: r.bit };
}

/** sources/modbus/plan.ts findOverlaps: `bit` values share a register unless they read the same bit; others may not overlap. */
function overlaps(a: Span, b: Span): boolean {
  if (a.table !== b.table || a.start + a.count <= b.start || b.start + b.count <= a.start) return false;
  if (a.type === 'bit' && b.type === 'bit') return a.bit === b.bit;
  return a.type !== 'bit' && b.type !== 'bit';
}

function describeSpan(s: Span, base: AddressBase): string {
  return `${describeRange(s.table, s.start, s.count, base)} (${s.type}${s.type === 'bit' ? ` ${s.bit}` : ''})`;
}

// --- The document --------------------------------------------------------------------------------

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
    splices.push({ kind: 'section', section, node: created });
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
  if (list.range) splices.push({ kind: 'append', seq: list, node });
}

/** Names of every source and device of every protocol (sources/plugins.ts): a new one must not reuse one. */
function sourceNames(doc: Document.Parsed): Set<string> {
  const js = (doc.toJS() ?? {}) as Record<string, unknown>;
  return new Set(SOURCE_PLUGINS.flatMap((p) => p.names(js[p.kind]).map((e) => e.name)));
}

function uniqueName(base: string, taken: Set<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/**
 * Variable id → the first setting that feeds it (a source: generator, OPC UA, Modbus, MQTT;
 * annotations only refer to variables). When the text is a valid configuration this is the
 * gateway's own list (sources/mapped-variables.ts); while it is not, the mappings the CSV export
 * reads from the document (config-mappings.ts), so a half-written file still gets the duplicates
 * it can see.
 */
export function fedVariables(doc: Document, js: unknown = doc.toJS({ maxAliasCount: 1_000 })): Map<string, string> {
  const out = new Map<string, string>();
  let config;
  try {
    config = withoutReadingSecrets(() => validateConfig(js)).config;
  } catch {
    for (const row of mappingRows(doc, js)) if (!out.has(row.variable)) out.set(row.variable, row.setting);
    return out;
  }
  for (const [id, settings] of mappedVariables(config).variables) {
    const feeding = settings.find((s) => !s.startsWith('annotations.'));
    if (feeding) out.set(id, feeding);
  }
  return out;
}
