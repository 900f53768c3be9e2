import { isMap, isScalar, type Document } from 'yaml';
import { resolveAddress, TABLE_INFO, type AddressBase, type Table } from '../sources/modbus/address.js';

/**
 * Every mapping of a configuration text, one row each: which source feeds which machine variable
 * from where (an OPC UA node, a Modbus register, an MQTT topic and payload key), with the comment
 * written after it. Read from the YAML document as written, with the schema's defaults where a
 * setting is left out, so a text that does not pass the check yet still lists what it maps. The
 * CSV export (mapping-csv.ts) writes these rows; the merge reads them to find a variable mapped
 * twice while the text is half written.
 */

export type MappingKind = 'opcua' | 'modbus' | 'mqtt';

export interface MappingRow {
  kind: MappingKind;
  /** The server, device or connection name. */
  source: string;
  variable: string;
  /** The setting that names the variable, e.g. `modbus.devices[0].registers[2].variable`. */
  setting: string;
  /** The trailing comment of the entry's first line, without `#`. */
  comment?: string;
  // OPC UA
  node_id?: string;
  endpoint?: string;
  security_mode?: string;
  // Modbus: the address as written (a number in the device's address_base, "0x0064", "40101").
  table?: Table;
  address?: number | string;
  /** The address on the wire (0-65535), when the address can be read. */
  protocol_address?: number;
  /** address_base of the device. */
  address_base?: AddressBase;
  type?: string;
  bit?: number;
  byte_order?: string;
  transport?: string;
  host?: string;
  port?: number;
  path?: string;
  unit_id?: number;
  // OPC UA and Modbus
  scale?: number;
  offset?: number;
  /** The mapping's `unit` setting, when written (an MQTT number subscription's applies to each of its variables). */
  unit?: string;
  // MQTT: the topic filter, the payload format and the key in it (JSON path, metric name, topic level text).
  topic?: string;
  format?: string;
  key?: string;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
/** scale and offset as they change a value: 1 and 0 (the defaults) are left out, as not written. */
const scaleOf = (v: unknown) => (num(v) === 1 ? undefined : num(v));
const offsetOf = (v: unknown) => (num(v) === 0 ? undefined : num(v));
const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/** The trailing comment of an entry's first line: a flow map's comment, or the first key's or value's. */
function entryComment(node: unknown): string | undefined {
  if (!isMap(node)) return undefined;
  let c: string | null | undefined = node.flow ? node.comment : undefined;
  if (!c) {
    const pair = node.items[0];
    c = (isScalar(pair?.key) ? pair.key.comment : undefined) ?? (isScalar(pair?.value) ? pair.value.comment : undefined);
  }
  const t = c?.trim();
  return t ? t : undefined;
}

/**
 * The mapping rows of a parsed document. `doc` gives the comments; the values are read as plain
 * data (`value`, the document's, aliases resolved), so an entry that is not a mapping yet (no
 * variable) is left out.
 */
export function mappingRows(doc: Document, value: unknown = doc.toJS({ maxAliasCount: 1_000 })): MappingRow[] {
  const js = obj(value);
  const comment = (...path: Array<string | number>) => entryComment(doc.getIn(path, true));
  const rows: MappingRow[] = [];

  arr(obj(js.opcua).servers).forEach((raw, i) => {
    const s = obj(raw);
    const source = str(s.name) ?? `servers[${i}]`;
    arr(s.nodes).forEach((rawNode, j) => {
      const n = obj(rawNode);
      if (!isId(n.variable)) return;
      rows.push({
        kind: 'opcua',
        source,
        variable: n.variable,
        setting: `opcua.servers[${i}].nodes[${j}].variable`,
        node_id: str(n.node_id),
        endpoint: str(s.endpoint),
        security_mode: str(s.security_mode) ?? 'None',
        scale: scaleOf(n.scale),
        offset: offsetOf(n.offset),
        unit: str(n.unit),
        comment: comment('opcua', 'servers', i, 'nodes', j),
      });
    });
  });

  arr(obj(js.modbus).devices).forEach((raw, i) => {
    const d = obj(raw);
    const source = str(d.name) ?? `devices[${i}]`;
    const transport = str(d.transport) ?? 'tcp';
    const base: AddressBase = d.address_base === 1 ? 1 : 0;
    const deviceOrder = str(d.byte_order) ?? 'ABCD';
    const where = transport === 'rtu' ? { path: str(obj(d.serial).path) } : { host: str(d.host), port: num(d.port) ?? 502 };
    arr(d.registers).forEach((rawReg, j) => {
      const r = obj(rawReg);
      if (!isId(r.variable)) return;
      const address = typeof r.address === 'number' || typeof r.address === 'string' ? r.address : undefined;
      const resolved = address === undefined ? null : resolveAddress(address, base);
      const ok = resolved?.ok ? resolved : null;
      const table = ok?.table ?? (typeof r.table === 'string' && r.table in TABLE_INFO ? (r.table as Table) : undefined);
      const bits = table ? TABLE_INFO[table].bits : false;
      const type = str(r.type) ?? (table ? (bits ? 'bool' : 'uint16') : undefined);
      rows.push({
        kind: 'modbus',
        source,
        variable: r.variable,
        setting: `modbus.devices[${i}].registers[${j}].variable`,
        table,
        address,
        protocol_address: ok?.protocolAddress,
        address_base: base,
        type,
        bit: num(r.bit),
        byte_order: bits ? undefined : (str(r.byte_order) ?? deviceOrder),
        scale: scaleOf(r.scale),
        offset: offsetOf(r.offset),
        unit: str(r.unit),
        transport,
        ...where,
        unit_id: num(d.unit_id) ?? 1,
        comment: comment('modbus', 'devices', i, 'registers', j),
      });
    });
  });

  arr(obj(js.mqtt).connections).forEach((raw, i) => {
    const c = obj(raw);
    const source = str(c.name) ?? `connections[${i}]`;
    arr(c.subscriptions).forEach((rawSub, j) => {
      const s = obj(rawSub);
      const at = `mqtt.connections[${i}].subscriptions[${j}]`;
      const row = (variable: unknown, setting: string, key: string | undefined, entry?: Array<string | number>, unit?: unknown) => {
        if (isId(variable)) rows.push({ kind: 'mqtt', source, variable, setting, topic: str(s.topic), format: str(s.format), key, unit: str(unit), comment: entry ? comment('mqtt', 'connections', i, 'subscriptions', j, ...entry) : undefined });
      };
      switch (s.format) {
        case 'number':
          row(s.variable, `${at}.variable`, undefined, undefined, s.unit);
          for (const [text, id] of Object.entries(obj(obj(s.variable_from_topic).variables))) row(id, `${at}.variable_from_topic.variables.${text}`, text, undefined, s.unit);
          break;
        case 'json':
          arr(s.values).forEach((v, k) => row(obj(v).variable, `${at}.values[${k}].variable`, str(obj(v).path), ['values', k], obj(v).unit));
          break;
        case 'metrics':
          for (const [name, id] of Object.entries(obj(s.names))) row(id, `${at}.names.${name}`, name);
          break;
        case 'sparkplug':
          arr(s.metrics).forEach((m, k) => row(obj(m).variable, `${at}.metrics[${k}].variable`, str(obj(m).name), ['metrics', k], obj(m).unit));
          break;
      }
    });
  });
  return rows;
}
