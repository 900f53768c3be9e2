import { Document } from 'yaml';
import { parseYamlDocument } from '../config/load.js';
import { ConfigError } from '../core/errors.js';
import { mappingRows } from './config-mappings.js';
import { MergeError } from './config-merge.js';
import { formatCsv } from './csv.js';

/**
 * Mappings as CSV, the way Kepware and Neuron users keep their tag lists in a spreadsheet
 * (issue 24 §3; the columns are documented in docs/mappings-csv.md):
 *
 * - export: every mapping of a configuration text (OPC UA nodes, Modbus registers, MQTT
 *   subscriptions), one row each, with the settings of its source;
 * - import (mapping-import.ts): rows added to a configuration text, or changing the mappings of
 *   the variables it already maps, through the merge (config-merge.ts).
 *
 * Every cell a spreadsheet would run as a formula is written with a leading `'` and read back
 * without it (`spreadsheetCell`, `fromSpreadsheet`).
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
  'unit',
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

export type Column = (typeof CSV_COLUMNS)[number];

/**
 * A cell a spreadsheet would run as a formula: one starting with `=`, `+`, `-`, `@`, a tab or a
 * carriage return (OWASP, "CSV Injection"; also their full-width forms, which some spreadsheets
 * take the same way), and one that already starts with `'` before such a character (so that
 * reading back removes exactly the `'` the export added). A plain number (`-0.5`) is left as it is:
 * a spreadsheet reads it as a number, never as a formula.
 */
const FORMULA_START = /^'*[=+\-@\t\r\uFF1D\uFF0B\uFF0D\uFF20]/;
const PLAIN_NUMBER = /^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;

/** A value as a CSV cell no spreadsheet runs: a leading `'` where it would be a formula. */
export function spreadsheetCell(v: string | number | undefined): string {
  const text = v === undefined ? '' : String(v);
  return FORMULA_START.test(text) && !PLAIN_NUMBER.test(text) ? `'${text}` : text;
}

/** A cell read back: the `'` that `spreadsheetCell` (or a person in a spreadsheet) put before a formula character removed. */
export function fromSpreadsheet(cell: string): string {
  return cell.startsWith("'") && FORMULA_START.test(cell) ? cell.slice(1) : cell;
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
      unit: r.unit,
      comment: r.comment,
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
    return CSV_COLUMNS.map((c) => spreadsheetCell(values[c]));
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

