import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ImportCsvResponse } from './api/build.js';
import { machineVariableId, sourceName, unitSetting } from '../sources/common-schema.js';
import { resolveAddress, TABLE_INFO, TABLES, type AddressBase, type Table } from '../sources/modbus/address.js';
import { BYTE_ORDERS, DATA_TYPES } from '../sources/modbus/decode.js';
import { parseNodeId } from '../sources/opcua/node-id.js';
import { mappingRows, type MappingKind, type MappingRow } from './config-mappings.js';
import { ConfigMerge, MergeError, type ModbusDeviceAddition, type ModbusRegisterAddition, type OpcuaNodeAddition } from './config-merge.js';
import { CsvError, parseCsv, type CsvRecord } from './csv.js';
import { CSV_COLUMNS, fromSpreadsheet, type Column } from './mapping-csv.js';

/**
 * The mappings CSV import (docs/mappings-csv.md): rows merged into a configuration text through the
 * merge (config-merge.ts), grouped by source; each row that cannot be taken is reported with its
 * row number, the field and the value, and every other row is taken.
 *
 * - A row for a variable the text does not map is added.
 * - A row for a variable the same source already maps, as it is, is unchanged (an exported file
 *   imports back without a change); one that reads it elsewhere in that source or otherwise (node
 *   id, register, type, byte order, scale, offset) is a change: listed with what it was and what it
 *   becomes, and made in the text only when the import is asked to (`update`, after the person has
 *   seen the list). A variable mapped by another source stays a duplicate: moving a mapping between
 *   sources is an edit for the editor.
 * - Rows whose variable the organisation's catalog does not list are flagged (the service refuses
 *   such samples), as the Build page's other tabs flag them; they are still taken.
 *
 * Linear in the rows: the work of each is bounded, and it yields to the event loop every few
 * milliseconds when run on the main thread.
 */

/** Bounds of an import: rows of data, and the size of a field. */
export const CSV_MAX_ROWS = 20_000;
const LIMITS = { maxRecords: CSV_MAX_ROWS + 1, maxFields: 64, maxFieldChars: 4_096 };
/** Problems, changes and flags listed one by one; more are counted. */
const MAX_LISTED = 500;
/** Work between two yields to the event loop, in milliseconds. */
const SLICE_MS = 20;

/** What an import answers (api/build.ts, the route adds the diff). */
export type ImportResult = Omit<ImportCsvResponse, 'diff'>;
export type ImportProblem = ImportResult['problems'][number];
/** A row that changes a mapping the text has: made in the text (`update` asked), or only listed. */
export type ImportChange = ImportResult['changes'][number];

export interface ImportOptions {
  /** Make the changes to existing mappings in the text (else they are only listed). */
  update?: boolean;
  /** The organisation's catalog, id -> unit; null or absent: not known, nothing flagged. */
  catalog?: ReadonlyMap<string, string | null> | null;
  /** Awaited between slices of work (a turn of the event loop on the main thread). */
  pause?: () => Promise<void>;
}

/** A row read and checked, ready for the merge. */
type Ready =
  | { kind: 'opcua'; row: number; source: string; node: OpcuaNodeAddition; endpoint?: string; securityMode?: 'None' | 'Sign' | 'SignAndEncrypt' }
  | { kind: 'modbus'; row: number; source: string; register: ModbusRegisterAddition; device?: DeviceGiven; address: string };

/** A row that changes an existing mapping: what it becomes. */
type Change = { row: number; has: MappingRow; to: Ready };

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

const nextTurnPause = (): Promise<void> => nextTurn().then(() => undefined);

type Problem = (row: number, field: string | null, value: string | null, message: string) => void;
type Js = { opcua?: { servers?: unknown[] }; modbus?: { devices?: unknown[] } };

/** What reading the rows needs: the text's mappings and sources, and where problems go. */
interface ImportContext {
  columns: Map<string, number>;
  decimalComma: boolean;
  byVariable: Map<string, MappingRow>;
  js: Js;
  problem: Problem;
}

/** What each row came to. */
interface Outcome {
  ready: Ready[];
  changes: Change[];
  unchanged: number;
  /** Rows that name a valid mapping, with their variable and the unit they give (for the catalog's flags). */
  named: Array<{ row: number; variable: string; unit?: string }>;
}

export async function importMappingsCsv(yaml: string, csv: string, options: ImportOptions | (() => Promise<void>) = {}): Promise<ImportResult> {
  const o: ImportOptions = typeof options === 'function' ? { pause: options } : options;
  const pause = o.pause ?? nextTurnPause;
  const { head, data, delimiter } = readCsv(csv);
  const problems: ImportProblem[] = [];
  const problem: Problem = (row, field, value, message) => void problems.push({ row, field, value, message });

  const columns = new Map<string, number>();
  head.fields.forEach((h, i) => {
    const c = columnOf(h);
    if (c && !(CSV_COLUMNS as readonly string[]).includes(c)) problem(head.row, c, h, `unknown column, left out (known: ${CSV_COLUMNS.join(', ')})`);
    else if (!columns.has(c)) columns.set(c, i);
  });
  for (const required of ['variable', 'source'] as const) {
    if (!columns.has(required)) throw new MergeError(`the CSV has no column "${required}" (its first row is: ${head.fields.join(delimiter)}); the columns are ${CSV_COLUMNS.join(', ')}`);
  }
  if (!columns.has('node_id') && !columns.has('address')) throw new MergeError('the CSV has neither a node_id column (OPC UA) nor an address column (Modbus)');

  await pause();
  const merge = await ConfigMerge.open(yaml, pause);
  const existing = mappingRows(merge.doc, merge.value);
  await pause();
  // What the text feeds (a validation of the whole text): read now, between two pauses, not inside a merge step.
  merge.fedNow();
  await pause();
  // Semicolon files come from spreadsheets where the comma is the decimal mark: 0,1 is 0.1.
  const ctx: ImportContext = { columns, decimalComma: delimiter === ';', byVariable: new Map(existing.map((r) => [r.variable, r])), js: (merge.value ?? {}) as Js, problem };
  const outcome = await readRows(data, ctx, pause);
  const { added, targets } = await mergeAdditions(merge, outcome.ready, ctx, pause);
  const updated = applyChanges(merge, outcome.changes, o.update === true, problem);
  const text = await merge.resultSliced(pause);
  problems.sort((a, b) => a.row - b.row);
  const changed = new Set(updated.applied);
  const changes = outcome.changes.filter((c) => !updated.refused.has(c.row)).map((c) => changeOf(c, changed.has(c.row)));
  const flags = catalogFlagsOf(outcome.named, o.catalog ?? null);
  return {
    yaml: text,
    rows: data.length,
    added,
    updated: changed.size,
    unchanged: outcome.unchanged,
    problems: problems.slice(0, MAX_LISTED),
    more_problems: Math.max(0, problems.length - MAX_LISTED),
    changes: changes.slice(0, MAX_LISTED),
    more_changes: Math.max(0, changes.length - MAX_LISTED),
    not_in_catalog: flags ? flags.unknown.slice(0, MAX_LISTED) : null,
    more_not_in_catalog: flags ? Math.max(0, flags.unknown.length - MAX_LISTED) : 0,
    other_units: flags ? flags.units.slice(0, MAX_LISTED) : null,
    more_other_units: flags ? Math.max(0, flags.units.length - MAX_LISTED) : 0,
    targets,
  };
}

/**
 * Against the organisation's catalog (id -> unit), as Apply's preview checks a text
 * (catalog-flags.ts): the rows whose variable it does not have, and those whose unit is not its.
 */
function catalogFlagsOf(named: Outcome['named'], catalog: ReadonlyMap<string, string | null> | null) {
  if (!catalog) return null;
  const unknown: Array<{ row: number; variable: string }> = [];
  const units: Array<{ row: number; variable: string; unit: string; catalog: string }> = [];
  for (const n of named) {
    if (!catalog.has(n.variable)) unknown.push({ row: n.row, variable: n.variable });
    else {
      const theirs = catalog.get(n.variable)?.trim();
      if (n.unit !== undefined && theirs && n.unit !== theirs) units.push({ row: n.row, variable: n.variable, unit: n.unit, catalog: theirs });
    }
  }
  return { unknown, units };
}

/** The CSV's header and its rows of data (blank rows left out); a file that cannot be read is a MergeError. */
function readCsv(csv: string): { head: CsvRecord; data: CsvRecord[]; delimiter: string } {
  let parsed;
  try {
    parsed = parseCsv(csv, LIMITS);
  } catch (err) {
    if (err instanceof CsvError) throw new MergeError(`CSV row ${err.row}: ${err.message}`);
    throw err;
  }
  const [head, ...rest] = parsed.records;
  if (!head) throw new MergeError('the CSV is empty: the first row names the columns (docs/mappings-csv.md)');
  // Rows a spreadsheet leaves with only delimiters are blank.
  const data = rest.filter((r) => !r.fields.every((f) => f.trim() === ''));
  return { head, data, delimiter: parsed.delimiter };
}

/** Every row read: added, changed, unchanged or reported; a variable on two rows is taken from the first. */
async function readRows(data: readonly CsvRecord[], ctx: ImportContext, pause: () => Promise<void>): Promise<Outcome> {
  const outcome: Outcome = { ready: [], changes: [], unchanged: 0, named: [] };
  const firstRow = new Map<string, number>();
  let slice = performance.now();
  for (const rec of data) {
    if (performance.now() - slice > SLICE_MS) {
      await pause();
      slice = performance.now();
    }
    const r = readRow(rec, ctx);
    if (!r) continue;
    const first = firstRow.get(r.variable);
    if (first !== undefined) {
      ctx.problem(rec.row, 'variable', r.variable, `duplicate: ${r.variable} is also on row ${first}`);
      continue;
    }
    firstRow.set(r.variable, rec.row);
    outcome.named.push({ row: rec.row, variable: r.variable, unit: r.unit });
    if (r.outcome === 'unchanged') outcome.unchanged += 1;
    else if (r.outcome === 'change') outcome.changes.push(r.change);
    else outcome.ready.push(r.ready);
  }
  return outcome;
}

type RowResult = { variable: string; unit?: string } & ({ outcome: 'unchanged' } | { outcome: 'change'; change: Change } | { outcome: 'add'; ready: Ready });

/** One row: what it maps, checked field by field (each bad field reported), and how it compares with the text. */
function readRow(rec: CsvRecord, ctx: ImportContext): RowResult | null {
  const row = rec.row;
  const get = (c: Column): string => {
    const i = ctx.columns.get(c);
    return i === undefined ? '' : fromSpreadsheet(rec.fields[i] ?? '').trim();
  };
  const kindText = get('kind').toLowerCase();
  const kind: MappingKind | null = kindText === '' ? (get('node_id') ? 'opcua' : get('address') ? 'modbus' : null) : kindText === 'opcua' || kindText === 'modbus' || kindText === 'mqtt' ? kindText : null;
  if (!kind) {
    ctx.problem(row, 'kind', get('kind'), kindText === '' ? 'is empty, and the row has neither node_id nor address to tell' : 'is not opcua, modbus or mqtt');
    return null;
  }
  const source = get('source');
  const variable = get('variable');
  let bad = false;
  if (!sourceName.safeParse(source).success) (bad = true), ctx.problem(row, 'source', source, 'is not a source name (1-64 letters, digits, "_", "." or "-")');
  if (!machineVariableId.safeParse(variable).success) (bad = true), ctx.problem(row, 'variable', variable, 'is not a machine variable id (mvr_ followed by letters, digits and "_")');
  if (bad) return null;
  const has = ctx.byVariable.get(variable);
  if (kind === 'mqtt') {
    if (has?.kind === 'mqtt' && has.source === source) return { variable, unit: has.unit, outcome: 'unchanged' };
    ctx.problem(row, 'kind', 'mqtt', 'import adds OPC UA nodes and Modbus registers; add MQTT subscriptions in the editor (MQTT rows are exported for reference)');
    return null;
  }
  const ready = kind === 'opcua' ? readOpcua(row, source, get, ctx) : readModbus(row, source, get, ctx);
  if (!ready) return null;
  const unit = unitOfReady(ready);
  if (!has) return { variable, unit, outcome: 'add', ready };
  if (has.kind !== kind || has.source !== source) {
    ctx.problem(row, 'variable', variable, `duplicate: ${variable} is already mapped at ${has.setting} (${describe(has)}); an import changes a mapping within its source only: move it in the editor`);
    return null;
  }
  return sameMapping(has, ready) ? { variable, unit, outcome: 'unchanged' } : { variable, unit, outcome: 'change', change: { row, has, to: ready } };
}

const unitOfReady = (r: Ready): string | undefined => (r.kind === 'opcua' ? r.node.unit : r.register.unit);

/**
 * The unit column: empty leaves the mapping's unit as it is (a file without the column, or a cell
 * left blank, never removes one: that is an edit for the editor); else checked as the setting is.
 */
function unitOf(row: number, get: (c: Column) => string, ctx: ImportContext): string | undefined | null {
  const t = get('unit');
  if (t === '') return undefined;
  const parsed = unitSetting.safeParse(t);
  if (parsed.success) return parsed.data;
  ctx.problem(row, 'unit', t, parsed.error.issues[0]?.message ?? 'is not a unit');
  return null;
}

/** A number column: empty is undefined; a bad one is reported (and undefined). */
function numberOf(row: number, field: Column, get: (c: Column) => string, ctx: ImportContext, opts: { integer?: boolean; min?: number; max?: number } = {}): number | undefined | null {
  const t = get(field);
  if (t === '') return undefined;
  const n = Number(ctx.decimalComma && /^-?\d+,\d+$/.test(t) ? t.replace(',', '.') : t);
  if (!Number.isFinite(n) || (opts.integer && !Number.isInteger(n)) || (opts.min !== undefined && n < opts.min) || (opts.max !== undefined && n > opts.max)) {
    ctx.problem(row, field, t, `is not ${opts.integer ? 'a whole number' : 'a number'}${opts.min !== undefined ? ` from ${opts.min} to ${opts.max}` : ''}`);
    return null;
  }
  return n;
}

function readOpcua(row: number, source: string, get: (c: Column) => string, ctx: ImportContext): Ready | null {
  let bad = false;
  const report = (field: Column, message: string) => ((bad = true), ctx.problem(row, field, get(field), message));
  const scale = numberOf(row, 'scale', get, ctx);
  const offset = numberOf(row, 'offset', get, ctx);
  const unit = unitOf(row, get, ctx);
  const nodeId = get('node_id');
  const parsedId = parseNodeId(nodeId);
  if (nodeId === '') report('node_id', 'is empty: an OPC UA row names its node (ns=2;s=Line1.Temp, nsu=urn:...;s=...)');
  else if ('problem' in parsedId) report('node_id', parsedId.problem);
  const endpoint = get('endpoint');
  const server = entryNamed(ctx.js.opcua?.servers, source);
  if (endpoint && !/^opc\.tcp:\/\/./.test(endpoint)) report('endpoint', 'must start with opc.tcp://');
  else if (server && endpoint && typeof server.endpoint === 'string' && endpoint !== server.endpoint) report('endpoint', `differs from the endpoint of the configured server ${source} (${server.endpoint}); a row adds to a server, it does not move it`);
  const mode = get('security_mode');
  if (mode && !(SECURITY_MODES as readonly string[]).includes(mode)) report('security_mode', `is not one of ${SECURITY_MODES.join(', ')}`);
  if (bad || scale === null || offset === null || unit === null) return null;
  const comment = get('comment');
  return { kind: 'opcua', row, source, node: { node_id: nodeId, variable: get('variable'), scale, offset, unit, comment: comment || undefined }, endpoint: endpoint || undefined, securityMode: (mode || undefined) as (typeof SECURITY_MODES)[number] | undefined };
}

function readModbus(row: number, source: string, get: (c: Column) => string, ctx: ImportContext): Ready | null {
  let bad = false;
  const report = (field: Column, message: string) => ((bad = true), ctx.problem(row, field, get(field), message));
  const scale = numberOf(row, 'scale', get, ctx);
  const offset = numberOf(row, 'offset', get, ctx);
  const unit = unitOf(row, get, ctx);
  const device = entryNamed(ctx.js.modbus?.devices, source);
  const base: AddressBase = device?.address_base === 1 ? 1 : 0;
  const newDevice = device ? checkDeviceColumns(device, source, get, report) : deviceColumns(row, get, ctx, report);
  const tableText = get('table').toLowerCase();
  const addressText = get('address');
  let table: Table | undefined;
  if (tableText && !(TABLES as readonly string[]).includes(tableText)) report('table', `is not one of ${TABLES.join(', ')}`);
  else if (tableText) table = tableText as Table;
  // "40101" with no table is a Modicon reference (it names the table), as modbus-probe reads --address.
  const modicon = !table && /^[0134]\d{4,5}$/.test(addressText);
  const written: number | string | undefined = addressText === '' ? undefined : /^\d+$/.test(addressText) && !modicon ? Number(addressText) : addressText;
  let protocol: number | undefined;
  if (written === undefined) report('address', 'is empty: a Modbus row names its register (a number, 0x0064, or a Modicon reference like 40101)');
  else {
    const resolved = resolveAddress(written, base);
    if (!resolved.ok) report('address', resolved.problem);
    else {
      protocol = resolved.protocolAddress;
      if (resolved.table && table && resolved.table !== table) report('table', `contradicts address ${addressText}, a Modicon reference to the ${TABLE_INFO[resolved.table].plural}`);
      table = resolved.table ?? table;
      if (!table && !tableText) report('table', 'is empty: give coil, discrete_input, holding or input (or a Modicon reference such as 40101 as the address)');
    }
  }
  const typeText = get('type').toLowerCase();
  if (typeText && !(DATA_TYPES as readonly string[]).includes(typeText)) report('type', `is not one of ${DATA_TYPES.join(', ')}`);
  else if (table && TABLE_INFO[table].bits && typeText && typeText !== 'bool') report('type', `cannot be read from ${TABLE_INFO[table].plural}: they hold single bits (type bool)`);
  const bit = numberOf(row, 'bit', get, ctx, { integer: true, min: 0, max: 15 });
  if (typeText === 'bit' && bit === undefined) report('bit', 'is empty: type bit reads one bit of the register (0-15)');
  const order = get('byte_order').toUpperCase();
  if (order && !(BYTE_ORDERS as readonly string[]).includes(order)) report('byte_order', `is not one of ${BYTE_ORDERS.join(', ')}`);
  if (bad || newDevice === null || scale === null || offset === null || unit === null || bit === null || table === undefined || protocol === undefined || written === undefined) return null;
  const bits = TABLE_INFO[table].bits;
  const type = typeText || (bits ? 'bool' : 'uint16');
  const comment = get('comment');
  const register: ModbusRegisterAddition = { variable: get('variable'), table, address: protocol, written_address: written, type, bit: type === 'bit' ? bit : undefined, byte_order: bits ? undefined : order || undefined, scale, offset, unit, comment: comment || undefined };
  return { kind: 'modbus', row, source, address: addressText, device: newDevice, register };
}

/** A row for a device the text does not have: its address columns (its address may be given on any one row of the device). */
function deviceColumns(row: number, get: (c: Column) => string, ctx: ImportContext, report: (field: Column, message: string) => void): DeviceGiven | null {
  const transport = get('transport') as ModbusDeviceAddition['transport'] | '';
  if (transport && !(TRANSPORTS as readonly string[]).includes(transport)) report('transport', `is not one of ${TRANSPORTS.join(', ')}`);
  const port = numberOf(row, 'port', get, ctx, { integer: true, min: 1, max: 65_535 });
  const unit = numberOf(row, 'unit_id', get, ctx, { integer: true, min: 0, max: 255 });
  if (port === null || unit === null) return null;
  return { transport: transport || undefined, host: get('host') || undefined, port, path: get('path') || undefined, unit_id: unit };
}

/** A row for a configured device: its address columns, when given, must be that device. */
function checkDeviceColumns(device: Record<string, unknown>, source: string, get: (c: Column) => string, report: (field: Column, message: string) => void): undefined {
  const host = get('host');
  const unit = get('unit_id');
  if (host && typeof device.host === 'string' && host.toLowerCase() !== device.host.toLowerCase()) report('host', `differs from the host of the configured device ${source} (${device.host}); a row adds to a device, it does not move it`);
  const configured = typeof device.unit_id === 'number' ? device.unit_id : 1;
  if (unit && Number(unit) !== configured) report('unit_id', `differs from the unit_id of the configured device ${source} (${configured})`);
  return undefined;
}

/** The row maps its variable as the text does (comments aside; a row without a unit keeps the text's). */
function sameMapping(has: MappingRow, r: Ready): boolean {
  const unit = unitOfReady(r);
  const sameScale = (has.scale ?? 1) === ((r.kind === 'opcua' ? r.node.scale : r.register.scale) ?? 1) && (has.offset ?? 0) === ((r.kind === 'opcua' ? r.node.offset : r.register.offset) ?? 0) && (unit === undefined || unit === has.unit);
  if (r.kind === 'opcua') return has.node_id === r.node.node_id && sameScale;
  const g = r.register;
  const bits = TABLE_INFO[g.table].bits;
  return has.table === g.table && has.protocol_address === g.address && has.type === g.type && (g.type !== 'bit' || has.bit === g.bit) && (bits || !g.byte_order || has.byte_order === g.byte_order) && sameScale;
}

/** The additions merged source by source, in the order of their first row; what each source received. */
async function mergeAdditions(merge: ConfigMerge, ready: readonly Ready[], ctx: ImportContext, pause: () => Promise<void>): Promise<{ added: number; targets: ImportResult['targets'] }> {
  const groups = new Map<string, Ready[]>();
  for (const r of ready) {
    const key = `${r.kind}\u0000${r.source}`;
    const group = groups.get(key);
    if (group) group.push(r);
    else groups.set(key, [r]);
  }
  let added = 0;
  const targets: ImportResult['targets'] = [];
  for (const rows of groups.values()) {
    await pause();
    const first = rows[0];
    const result = first.kind === 'opcua' ? mergeOpcuaGroup(merge, rows as Array<Ready & { kind: 'opcua' }>, ctx.js, ctx.problem) : mergeModbusGroup(merge, rows as Array<Ready & { kind: 'modbus' }>, ctx.js, ctx.problem);
    if (!result) continue;
    added += result.added;
    if (result.added > 0) targets.push({ source: first.source, target: result.target, created: result.created, added: result.added });
    for (const s of result.skipped) {
      const r = result.rows[s.index];
      ctx.problem(r.row, r.kind === 'opcua' ? 'node_id' : 'address', r.kind === 'opcua' ? r.node.node_id : r.address, `duplicate: ${s.reason}`);
    }
  }
  return { added, targets };
}

/** The changes made in the text when asked (`update`); a change that cannot be made is reported. */
function applyChanges(merge: ConfigMerge, changes: readonly Change[], update: boolean, problem: Problem): { applied: number[]; refused: Set<number> } {
  const applied: number[] = [];
  const refused = new Set<number>();
  if (!update) return { applied, refused };
  for (const c of changes) {
    const at = /^(?:opcua\.servers|modbus\.devices)\[(\d+)\]\.(?:nodes|registers)\[(\d+)\]/.exec(c.has.setting);
    if (!at) continue;
    const why = c.to.kind === 'opcua' ? merge.updateOpcuaNode(Number(at[1]), Number(at[2]), c.to.node) : merge.updateModbusRegister(Number(at[1]), Number(at[2]), c.to.register);
    if (why === null) applied.push(c.row);
    else {
      refused.add(c.row);
      problem(c.row, c.to.kind === 'opcua' ? 'node_id' : 'address', c.to.kind === 'opcua' ? c.to.node.node_id : c.to.address, `cannot change ${c.has.variable}: ${why}`);
    }
  }
  return { applied, refused };
}

function changeOf(c: Change, applied: boolean): ImportChange {
  const to = c.to;
  const after: MappingRow =
    to.kind === 'opcua'
      ? { ...c.has, node_id: to.node.node_id, scale: to.node.scale === 1 ? undefined : to.node.scale, offset: to.node.offset === 0 ? undefined : to.node.offset, unit: to.node.unit ?? c.has.unit }
      : { ...c.has, table: to.register.table, address: to.register.written_address, type: to.register.type, bit: to.register.bit, byte_order: to.register.byte_order ?? c.has.byte_order, scale: to.register.scale === 1 ? undefined : to.register.scale, offset: to.register.offset === 0 ? undefined : to.register.offset, unit: to.register.unit ?? c.has.unit };
  return { row: c.row, variable: c.has.variable, setting: c.has.setting.replace(/\.variable$/, ''), before: describe(c.has), after: describe(after), applied };
}

function entryNamed(list: unknown[] | undefined, name: string): Record<string, unknown> | undefined {
  if (!Array.isArray(list)) return undefined;
  for (const e of list) if (e && typeof e === 'object' && (e as Record<string, unknown>).name === name) return e as Record<string, unknown>;
  return undefined;
}

function mergeOpcuaGroup(merge: ConfigMerge, rows: Array<Ready & { kind: 'opcua' }>, js: Js, problem: Problem) {
  const source = rows[0].source;
  const server = entryNamed(js.opcua?.servers, source);
  let endpoint = typeof server?.endpoint === 'string' ? server.endpoint : undefined;
  let mode = server ? ((server.security_mode as 'None' | 'Sign' | 'SignAndEncrypt' | undefined) ?? 'None') : undefined;
  let from = rows[0].row;
  if (!endpoint) {
    const withEndpoint = rows.find((r) => r.endpoint);
    if (!withEndpoint) {
      for (const r of rows) problem(r.row, 'endpoint', '', `server ${source} is not in the configuration: give its endpoint (opc.tcp://host:4840) to create it`);
      return null;
    }
    endpoint = withEndpoint.endpoint!;
    mode = withEndpoint.securityMode ?? 'None';
    from = withEndpoint.row;
  } else from = rows.find((x) => x.endpoint === endpoint)?.row ?? from;
  const take = rows.filter((r) => {
    if (r.endpoint && r.endpoint !== endpoint) {
      problem(r.row, 'endpoint', r.endpoint, `differs from ${endpoint}, given for server ${source} on row ${from}`);
      return false;
    }
    return true;
  });
  const result = merge.opcua({ name: source, endpoint, security_mode: mode }, take.map((r) => r.node));
  return { ...result, rows: take };
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
    const givenRow = rows.find((r) => r.device?.host || r.device?.path);
    const given = givenRow?.device;
    if (!givenRow || !given) {
      for (const r of rows) problem(r.row, r.device?.transport === 'rtu' ? 'path' : 'host', '', `device ${source} is not in the configuration: give its host (and port, unit_id), or path for a serial device, on one of its rows to create it`);
      return null;
    }
    const transport = given.transport ?? (given.path ? 'rtu' : 'tcp');
    device = transport === 'rtu' ? { name: source, transport, path: given.path, unit_id: given.unit_id ?? 1 } : { name: source, transport, host: given.host, port: given.port ?? 502, unit_id: given.unit_id ?? 1 };
    take = rows.filter((r) => {
      const g = r.device ?? {};
      const differs = (['transport', 'host', 'port', 'path', 'unit_id'] as const).find((k) => g[k] !== undefined && (k === 'transport' ? g[k] !== transport : g[k] !== device[k]));
      if (differs) problem(r.row, differs, String(g[differs]), `differs from device ${source} as row ${givenRow.row} gives it (${where(device)}); one name is one device`);
      return !differs;
    });
  }
  const result = merge.modbus(device, take.map((r) => r.register));
  return { ...result, rows: take };
}

function where(d: ModbusDeviceAddition): string {
  return `${d.transport === 'rtu' ? d.path : `${d.host}:${d.port ?? 502}`}, unit ${d.unit_id}`;
}

/** Where a configured mapping reads, for messages. */
export function describe(r: MappingRow): string {
  const value = `${r.scale !== undefined ? `, scale ${r.scale}` : ''}${r.offset !== undefined ? `, offset ${r.offset}` : ''}${r.unit !== undefined ? `, unit ${r.unit}` : ''}`;
  if (r.kind === 'opcua') return `${r.source} node ${r.node_id}${value}`;
  if (r.kind === 'modbus') return `${r.source} ${r.table ?? '?'} ${r.address}, ${r.type}${r.type === 'bit' ? ` ${r.bit}` : ''}${r.byte_order ? ` ${r.byte_order}` : ''}${value}`;
  return `${r.source} topic ${r.topic}${r.key ? ` ${r.key}` : ''}`;
}
