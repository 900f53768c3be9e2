import { setImmediate as nextTurn } from 'node:timers/promises';
import { Document } from 'yaml';
import { parseYamlDocument } from '../config/load.js';
import { ConfigError } from '../core/errors.js';
import { machineVariableId, sourceName } from '../sources/common-schema.js';
import { resolveAddress, TABLE_INFO, TABLES, type AddressBase, type Table } from '../sources/modbus/address.js';
import { BYTE_ORDERS, DATA_TYPES } from '../sources/modbus/decode.js';
import { parseNodeId } from '../sources/opcua/node-id.js';
import { mappingRows, type MappingKind, type MappingRow } from './config-mappings.js';
import { ConfigMerge, MergeError, type ModbusDeviceAddition, type ModbusRegisterAddition, type OpcuaNodeAddition } from './config-merge.js';
import { CsvError, formatCsv, parseCsv } from './csv.js';

/**
 * Mappings as CSV, the way Kepware and Neuron users keep their tag lists in a spreadsheet
 * (issue 24 §3; the columns are documented in docs/mappings-csv.md):
 *
 * - export: every mapping of a configuration text (OPC UA nodes, Modbus registers, MQTT
 *   subscriptions), one row each, with the settings of its source;
 * - import: rows added to a configuration text through the merge (config-merge.ts), grouped by
 *   source; each row that cannot be added is reported with its row number, the field and the
 *   value, and every other row is added. A row that is already in the configuration as it is
 *   counts as unchanged, so an exported file imports back without a change. Import only adds:
 *   a row that would change a mapping is reported, never applied.
 */

export const CSV_COLUMNS = [
  'kind',
  'source',
  'variable',
  'node_id',
  'table',
  'address',
  'type',
  'bit',
  'byte_order',
  'scale',
  'offset',
  'comment',
  'endpoint',
  'security_mode',
  'transport',
  'host',
  'port',
  'path',
  'unit_id',
  'topic',
  'format',
  'key',
] as const;
type Column = (typeof CSV_COLUMNS)[number];

/** Bounds of an import: rows of data, and the size of a field. */
export const CSV_MAX_ROWS = 20_000;
const LIMITS = { maxRecords: CSV_MAX_ROWS + 1, maxFields: 64, maxFieldChars: 4_096 };
/** Problems listed one by one; more are counted. */
const MAX_PROBLEMS = 500;

/** Spreadsheets run a cell that starts like a formula: such a comment is written with a leading `'` (read back without it). */
const FORMULA_START = /^[=+\-@\t\r]/;

function cell(v: string | number | undefined): string {
  return v === undefined ? '' : String(v);
}

/** The CSV of every mapping of a parsed document (`value` its value), the header first (no byte order mark). */
export function mappingsCsvOf(doc: Document, value?: unknown): { csv: string; rows: number } {
  const rows = mappingRows(doc, value);
  const records = rows.map((r) => {
    // A Modicon reference names its table: the table column stays empty, so "40101" reads back as the reference (docs/mappings-csv.md).
    const modicon = typeof r.address === 'string' && /^[0134]\d{4,5}$/.test(r.address.trim());
    const values: Record<Column, string | number | undefined> = {
      kind: r.kind,
      source: r.source,
      variable: r.variable,
      node_id: r.node_id,
      table: modicon ? undefined : r.table,
      address: r.address,
      type: r.type,
      bit: r.bit,
      byte_order: r.byte_order,
      scale: r.scale,
      offset: r.offset,
      comment: r.comment && FORMULA_START.test(r.comment) ? `'${r.comment}` : r.comment,
      endpoint: r.endpoint,
      security_mode: r.security_mode,
      transport: r.transport,
      host: r.host,
      port: r.port,
      path: r.path,
      unit_id: r.unit_id,
      topic: r.topic,
      format: r.format,
      key: r.key,
    };
    return CSV_COLUMNS.map((c) => cell(values[c]));
  });
  return { csv: formatCsv([[...CSV_COLUMNS], ...records]), rows: rows.length };
}

/** The CSV of a configuration text; a text that is not YAML is a MergeError. */
export function mappingsCsv(text: string): { csv: string; rows: number } {
  let parsed;
  try {
    parsed = parseYamlDocument(text, 'the configuration');
  } catch (err) {
    if (err instanceof ConfigError) throw new MergeError(`the configuration is not valid YAML (${err.problems[0]?.replace(/^the configuration: /, '')}); fix it in the editor first`);
    throw err;
  }
  return mappingsCsvOf(parsed.doc ?? new Document(), parsed.value);
}

/** Yields to the event loop: the import is parsed and merged in steps, the gateway's other work runs between them. */
const pauseTurn = (): Promise<void> => nextTurn().then(() => undefined);

// --- Import --------------------------------------------------------------------------------------

export interface ImportProblem {
  /** Row number as the spreadsheet shows it (the header is row 1). */
  row: number;
  /** The column at fault, when one is. */
  field: string | null;
  value: string | null;
  message: string;
}

export interface ImportResult {
  yaml: string;
  /** Rows of data read. */
  rows: number;
  added: number;
  /** Rows already in the configuration as they are. */
  unchanged: number;
  problems: ImportProblem[];
  more_problems: number;
  /** Each source that received rows: its setting path, whether the import created it, how many rows it got. */
  targets: Array<{ source: string; target: string; created: boolean; added: number }>;
}

/** A row read and checked, ready for the merge. */
type Ready =
  | { kind: 'opcua'; row: number; source: string; node: OpcuaNodeAddition; endpoint?: string; securityMode?: 'None' | 'Sign' | 'SignAndEncrypt' }
  | { kind: 'modbus'; row: number; source: string; register: ModbusRegisterAddition; device?: DeviceGiven; address: string };

/** The device columns a row fills in (a device the import creates takes them from the first row that gives its address). */
interface DeviceGiven {
  transport?: ModbusDeviceAddition['transport'];
  host?: string;
  port?: number;
  path?: string;
  unit_id?: number;
}

const SECURITY_MODES = ['None', 'Sign', 'SignAndEncrypt'] as const;
const TRANSPORTS = ['tcp', 'rtu', 'rtu_over_tcp'] as const;

/** Header text as a column: case, blanks and dashes do not matter (`Node ID`, `node-id`, `node_id`). */
function columnOf(header: string): string {
  return header.trim().toLowerCase().replace(/[\s-]+/g, '_');
}

export async function importMappingsCsv(yaml: string, csv: string, pause: () => Promise<void> = pauseTurn): Promise<ImportResult> {
  let parsed;
  try {
    parsed = parseCsv(csv, LIMITS);
  } catch (err) {
    if (err instanceof CsvError) throw new MergeError(`CSV row ${err.row}: ${err.message}`);
    throw err;
  }
  const [head, ...data] = parsed.records;
  if (!head) throw new MergeError('the CSV is empty: the first row names the columns (docs/mappings-csv.md)');
  const problems: ImportProblem[] = [];
  const problem = (row: number, field: string | null, value: string | null, message: string) => problems.push({ row, field, value, message });

  const columns = head.fields.map(columnOf);
  const known = new Set<string>(CSV_COLUMNS);
  columns.forEach((c, i) => {
    if (c && !known.has(c)) problem(head.row, c, head.fields[i], `unknown column, left out (known: ${CSV_COLUMNS.join(', ')})`);
  });
  for (const required of ['variable', 'source'] as const) {
    if (!columns.includes(required)) throw new MergeError(`the CSV has no column "${required}" (its first row is: ${head.fields.join(parsed.delimiter)}); the columns are ${CSV_COLUMNS.join(', ')}`);
  }
  if (!columns.includes('node_id') && !columns.includes('address')) throw new MergeError('the CSV has neither a node_id column (OPC UA) nor an address column (Modbus)');

  await pause();
  const merge = await ConfigMerge.open(yaml, pause);
  const existing = mappingRows(merge.doc, merge.value);
  await pause();
  // What the text feeds (a validation of the whole text): read now, between two pauses, not inside a merge step.
  merge.fedNow();
  await pause();
  const byVariable = new Map(existing.map((r) => [r.variable, r]));
  const js = (merge.value ?? {}) as Js;

  // Semicolon files come from spreadsheets where the comma is the decimal mark: 0,1 is 0.1.
  const decimalComma = parsed.delimiter === ';';
  const ready: Ready[] = [];
  let unchanged = 0;

  for (const rec of data) {
    const get = (c: Column): string => {
      const i = columns.indexOf(c);
      return i < 0 ? '' : (rec.fields[i] ?? '').trim();
    };
    // Rows a spreadsheet leaves with only delimiters are blank.
    if (rec.fields.every((f) => f.trim() === '')) continue;
    const row = rec.row;
    const before = problems.length;
    const bad = (field: Column, message: string) => problem(row, field, get(field), message);
    const number = (field: Column, opts: { integer?: boolean; min?: number; max?: number } = {}): number | undefined => {
      const t = get(field);
      if (t === '') return undefined;
      const n = Number(decimalComma && /^-?\d+,\d+$/.test(t) ? t.replace(',', '.') : t);
      if (!Number.isFinite(n) || (opts.integer && !Number.isInteger(n)) || (opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max)) {
        bad(field, `is not ${opts.integer ? 'a whole number' : 'a number'}${opts.min !== undefined ? ` from ${opts.min} to ${opts.max}` : ''}`);
        return undefined;
      }
      return n;
    };

    const kindText = get('kind').toLowerCase();
    const kind: MappingKind | null = kindText === '' ? (get('node_id') ? 'opcua' : get('address') ? 'modbus' : null) : kindText === 'opcua' || kindText === 'modbus' || kindText === 'mqtt' ? kindText : null;
    if (!kind) {
      bad('kind', kindText === '' ? 'is empty, and the row has neither node_id nor address to tell' : 'is not opcua, modbus or mqtt');
      continue;
    }
    const source = get('source');
    const variable = get('variable');
    if (!sourceName.safeParse(source).success) bad('source', 'is not a source name (1-64 letters, digits, "_", "." or "-")');
    if (!machineVariableId.safeParse(variable).success) bad('variable', 'is not a machine variable id (mvr_ followed by letters, digits and "_")');
    if (problems.length > before) continue;
    if (kind === 'mqtt') {
      const has = byVariable.get(variable);
      if (has?.kind === 'mqtt' && has.source === source) unchanged += 1;
      else problem(row, 'kind', 'mqtt', 'import adds OPC UA nodes and Modbus registers; add MQTT subscriptions in the editor (MQTT rows are exported for reference)');
      continue;
    }

    const scale = number('scale');
    const offset = number('offset');
    const rawComment = get('comment');
    const comment = rawComment.startsWith("'") && FORMULA_START.test(rawComment.slice(1)) ? rawComment.slice(1) : rawComment;

    if (kind === 'opcua') {
      const nodeId = get('node_id');
      const parsedId = parseNodeId(nodeId);
      if (nodeId === '') bad('node_id', 'is empty: an OPC UA row names its node (ns=2;s=Line1.Temp, nsu=urn:...;s=...)');
      else if ('problem' in parsedId) bad('node_id', parsedId.problem);
      const endpoint = get('endpoint');
      const server = entryNamed(js.opcua?.servers, source);
      if (endpoint && !/^opc\.tcp:\/\/./.test(endpoint)) bad('endpoint', 'must start with opc.tcp://');
      else if (server && endpoint && typeof server.endpoint === 'string' && endpoint !== server.endpoint) bad('endpoint', `differs from the endpoint of the configured server ${source} (${server.endpoint}); a row adds to a server, it does not move it`);
      const mode = get('security_mode');
      if (mode && !(SECURITY_MODES as readonly string[]).includes(mode)) bad('security_mode', `is not one of ${SECURITY_MODES.join(', ')}`);
      if (problems.length > before) continue;
      const has = byVariable.get(variable);
      if (has) {
        if (has.kind === 'opcua' && has.source === source && has.node_id === nodeId && (has.scale ?? 1) === (scale ?? 1) && (has.offset ?? 0) === (offset ?? 0)) unchanged += 1;
        else if (has.kind === 'opcua' && has.source === source && has.node_id === nodeId) problem(row, null, null, `${variable} differs from the configuration (${describe(has)}); import adds mappings, it does not change them: edit it in the editor`);
        else problem(row, 'variable', variable, `duplicate: ${variable} is already mapped at ${has.setting} (${describe(has)})`);
        continue;
      }
      ready.push({ kind, row, source, node: { node_id: nodeId, variable, scale, offset, comment: comment || undefined }, endpoint: endpoint || undefined, securityMode: (mode || undefined) as (typeof SECURITY_MODES)[number] | undefined });
      continue;
    }

    // Modbus.
    const device = entryNamed(js.modbus?.devices, source);
    const base: AddressBase = device?.address_base === 1 ? 1 : 0;
    let newDevice: DeviceGiven | undefined;
    if (!device) {
      const transport = get('transport') as ModbusDeviceAddition['transport'] | '';
      if (transport && !(TRANSPORTS as readonly string[]).includes(transport)) bad('transport', `is not one of ${TRANSPORTS.join(', ')}`);
      const port = number('port', { integer: true, min: 1, max: 65_535 });
      const unit = number('unit_id', { integer: true, min: 0, max: 255 });
      const host = get('host');
      const path = get('path');
      // Its address may be given on any one row of the device (checked by source below).
      newDevice = { transport: transport || undefined, host: host || undefined, port, path: path || undefined, unit_id: unit };
    } else {
      // A row for a configured device: its address columns, when given, must be that device.
      const d = device as { host?: unknown; port?: unknown; unit_id?: unknown };
      const host = get('host');
      const unit = get('unit_id');
      if (host && typeof d.host === 'string' && host.toLowerCase() !== d.host.toLowerCase()) bad('host', `differs from the host of the configured device ${source} (${d.host}); a row adds to a device, it does not move it`);
      if (unit && Number(unit) !== (typeof d.unit_id === 'number' ? d.unit_id : 1)) bad('unit_id', `differs from the unit_id of the configured device ${source} (${typeof d.unit_id === 'number' ? d.unit_id : 1})`);
    }
    const tableText = get('table').toLowerCase();
    const addressText = get('address');
    let table: Table | undefined;
    if (tableText && !(TABLES as readonly string[]).includes(tableText)) bad('table', `is not one of ${TABLES.join(', ')}`);
    else if (tableText) table = tableText as Table;
    // "40101" with no table is a Modicon reference (it names the table), as modbus-probe reads --address.
    const modicon = !table && /^[0134]\d{4,5}$/.test(addressText);
    const written: number | string | undefined = addressText === '' ? undefined : /^\d+$/.test(addressText) && !modicon ? Number(addressText) : addressText;
    let protocol: number | undefined;
    if (written === undefined) bad('address', 'is empty: a Modbus row names its register (a number, 0x0064, or a Modicon reference like 40101)');
    else {
      const resolved = resolveAddress(written, base);
      if (!resolved.ok) bad('address', resolved.problem);
      else {
        protocol = resolved.protocolAddress;
        if (resolved.table && table && resolved.table !== table) bad('table', `contradicts address ${addressText}, a Modicon reference to the ${TABLE_INFO[resolved.table].plural}`);
        table = resolved.table ?? table;
        if (!table && !tableText) bad('table', 'is empty: give coil, discrete_input, holding or input (or a Modicon reference such as 40101 as the address)');
      }
    }
    const typeText = get('type').toLowerCase();
    if (typeText && !(DATA_TYPES as readonly string[]).includes(typeText)) bad('type', `is not one of ${DATA_TYPES.join(', ')}`);
    else if (table && TABLE_INFO[table].bits && typeText && typeText !== 'bool') bad('type', `cannot be read from ${TABLE_INFO[table].plural}: they hold single bits (type bool)`);
    const bit = number('bit', { integer: true, min: 0, max: 15 });
    if (typeText === 'bit' && bit === undefined && get('bit') === '') bad('bit', 'is empty: type bit reads one bit of the register (0-15)');
    const order = get('byte_order').toUpperCase();
    if (order && !(BYTE_ORDERS as readonly string[]).includes(order)) bad('byte_order', `is not one of ${BYTE_ORDERS.join(', ')}`);
    if (problems.length > before || table === undefined || protocol === undefined || written === undefined) continue;
    const bits = TABLE_INFO[table].bits;
    const type = typeText || (bits ? 'bool' : 'uint16');

    const has = byVariable.get(variable);
    if (has) {
      const same = has.kind === 'modbus' && has.source === source && has.table === table && has.protocol_address === protocol;
      const settings = same && has.type === type && (type !== 'bit' || has.bit === bit) && (bits || !order || has.byte_order === order) && (has.scale ?? 1) === (scale ?? 1) && (has.offset ?? 0) === (offset ?? 0);
      if (settings) unchanged += 1;
      else if (same) problem(row, null, null, `${variable} differs from the configuration (${describe(has)}); import adds mappings, it does not change them: edit it in the editor`);
      else problem(row, 'variable', variable, `duplicate: ${variable} is already mapped at ${has.setting} (${describe(has)})`);
      continue;
    }
    ready.push({
      kind,
      row,
      source,
      address: addressText,
      device: newDevice,
      register: { variable, table, address: protocol, written_address: written, type, bit: type === 'bit' ? bit : undefined, byte_order: bits ? undefined : order || undefined, scale, offset, comment: comment || undefined },
    });
  }

  // A variable on two rows: the first is added, the second reported.
  const seenVariable = new Map<string, number>();
  const unique = ready.filter((r) => {
    const v = r.kind === 'opcua' ? r.node.variable : r.register.variable;
    const first = seenVariable.get(v);
    if (first !== undefined) {
      problem(r.row, 'variable', v, `duplicate: ${v} is also on row ${first}`);
      return false;
    }
    seenVariable.set(v, r.row);
    return true;
  });

  // By source, in the order of their first row; each through the merge.
  const groups = new Map<string, Ready[]>();
  for (const r of unique) {
    const key = `${r.kind}\u0000${r.source}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  let added = 0;
  const targets: ImportResult['targets'] = [];
  for (const rows of groups.values()) {
    await pause();
    const first = rows[0];
    const result = first.kind === 'opcua' ? mergeOpcuaGroup(merge, rows as Array<Ready & { kind: 'opcua' }>, js, problem) : mergeModbusGroup(merge, rows as Array<Ready & { kind: 'modbus' }>, js, problem);
    if (!result) continue;
    added += result.added;
    if (result.added > 0) targets.push({ source: first.source, target: result.target, created: result.created, added: result.added });
    for (const s of result.skipped) {
      const r = rows[s.index];
      problem(r.row, r.kind === 'opcua' ? 'node_id' : 'address', r.kind === 'opcua' ? r.node.node_id : r.address, `duplicate: ${s.reason}`);
    }
  }
  const text = await merge.resultSliced(pause);
  problems.sort((a, b) => a.row - b.row);
  return { yaml: text, rows: data.filter((r) => !r.fields.every((f) => f.trim() === '')).length, added, unchanged, problems: problems.slice(0, MAX_PROBLEMS), more_problems: Math.max(0, problems.length - MAX_PROBLEMS), targets };
}

type Problem = (row: number, field: string | null, value: string | null, message: string) => void;
type Js = { opcua?: { servers?: unknown[] }; modbus?: { devices?: unknown[] } };

function entryNamed(list: unknown[] | undefined, name: string): Record<string, unknown> | undefined {
  return (Array.isArray(list) ? list : []).map((e) => (e && typeof e === 'object' ? (e as Record<string, unknown>) : {})).find((e) => e.name === name);
}

function mergeOpcuaGroup(merge: ConfigMerge, rows: Array<Ready & { kind: 'opcua' }>, js: Js, problem: Problem) {
  const source = rows[0].source;
  const server = entryNamed(js.opcua?.servers, source);
  let endpoint = typeof server?.endpoint === 'string' ? server.endpoint : undefined;
  let mode = server ? ((server.security_mode as 'None' | 'Sign' | 'SignAndEncrypt' | undefined) ?? 'None') : undefined;
  if (!endpoint) {
    const withEndpoint = rows.find((r) => r.endpoint);
    if (!withEndpoint) {
      for (const r of rows) problem(r.row, 'endpoint', '', `server ${source} is not in the configuration: give its endpoint (opc.tcp://host:4840) to create it`);
      return null;
    }
    endpoint = withEndpoint.endpoint!;
    mode = withEndpoint.securityMode ?? 'None';
  }
  const take = rows.filter((r) => {
    if (r.endpoint && r.endpoint !== endpoint) {
      problem(r.row, 'endpoint', r.endpoint, `differs from ${endpoint}, given for server ${source} on row ${rows.find((x) => x.endpoint === endpoint)?.row ?? rows[0].row}`);
      return false;
    }
    return true;
  });
  const result = merge.opcua({ name: source, endpoint, security_mode: mode }, take.map((r) => r.node));
  return { ...result, skipped: result.skipped.map((s) => ({ ...s, index: rows.indexOf(take[s.index]) })) };
}

function mergeModbusGroup(merge: ConfigMerge, rows: Array<Ready & { kind: 'modbus' }>, js: Js, problem: Problem) {
  const source = rows[0].source;
  const configured = entryNamed(js.modbus?.devices, source);
  let device: ModbusDeviceAddition;
  let take = rows;
  if (configured) {
    const transport = (configured.transport as ModbusDeviceAddition['transport'] | undefined) ?? 'tcp';
    const unit_id = typeof configured.unit_id === 'number' ? configured.unit_id : 1;
    device = transport === 'rtu' ? { name: source, transport, path: String((configured.serial as { path?: unknown } | undefined)?.path ?? ''), unit_id } : { name: source, transport, host: String(configured.host ?? ''), port: typeof configured.port === 'number' ? configured.port : 502, unit_id };
  } else {
    const given = rows.find((r) => r.device?.host || r.device?.path)?.device;
    if (!given) {
      for (const r of rows) problem(r.row, r.device?.transport === 'rtu' ? 'path' : 'host', '', `device ${source} is not in the configuration: give its host (and port, unit_id), or path for a serial device, on one of its rows to create it`);
      return null;
    }
    const transport = given.transport ?? (given.path ? 'rtu' : 'tcp');
    device = transport === 'rtu' ? { name: source, transport, path: given.path, unit_id: given.unit_id ?? 1 } : { name: source, transport, host: given.host, port: given.port ?? 502, unit_id: given.unit_id ?? 1 };
    const from = rows.find((r) => r.device === given)!.row;
    take = rows.filter((r) => {
      const g = r.device ?? {};
      const differs = (['transport', 'host', 'port', 'path', 'unit_id'] as const).find((k) => g[k] !== undefined && (k === 'transport' ? g[k] !== transport : g[k] !== device[k]));
      if (differs) problem(r.row, differs, String(g[differs]), `differs from device ${source} as row ${from} gives it (${where(device)}); one name is one device`);
      return !differs;
    });
  }
  const result = merge.modbus(device, take.map((r) => r.register));
  return { ...result, skipped: result.skipped.map((s) => ({ ...s, index: rows.indexOf(take[s.index]) })) };
}

function where(d: ModbusDeviceAddition): string {
  return `${d.transport === 'rtu' ? d.path : `${d.host}:${d.port ?? 502}`}, unit ${d.unit_id}`;
}

/** Where a configured mapping reads, for messages. */
function describe(r: MappingRow): string {
  if (r.kind === 'opcua') return `${r.source} node ${r.node_id}${r.scale !== undefined ? `, scale ${r.scale}` : ''}${r.offset !== undefined ? `, offset ${r.offset}` : ''}`;
  if (r.kind === 'modbus') return `${r.source} ${r.table ?? '?'} ${r.address}, ${r.type}${r.type === 'bit' ? ` ${r.bit}` : ''}${r.byte_order ? ` ${r.byte_order}` : ''}${r.scale !== undefined ? `, scale ${r.scale}` : ''}${r.offset !== undefined ? `, offset ${r.offset}` : ''}`;
  return `${r.source} topic ${r.topic}${r.key ? ` ${r.key}` : ''}`;
}
