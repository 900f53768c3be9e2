import { TABLE_INFO, type Table } from './address.js';
import { BYTE_ORDERS, REGISTER_COUNT, bitAt, decodeRaw, float32ToShortest, type ByteOrder, type DataType } from './decode.js';

/**
 * What `edge-gateway modbus-probe` prints: the raw registers and every candidate decoding (each
 * type that fits, starting at each register, in all four byte orders), so an engineer can match
 * the device display to a row and a column and copy the settings.
 */

export const PROBE_TYPES: readonly DataType[] = ['int16', 'uint16', 'int32', 'uint32', 'float32', 'int64', 'uint64', 'float64'];

export interface CandidateRow {
  /** Protocol address of the first register of the value. */
  address: number;
  type: DataType;
  values: Record<ByteOrder, string>;
}

export function formatRaw(raw: number | bigint, type: DataType): string {
  if (typeof raw === 'bigint') return raw.toString();
  if (Number.isNaN(raw)) return 'NaN';
  if (raw === Infinity) return 'Infinity';
  if (raw === -Infinity) return '-Infinity';
  if (type === 'float32') return String(float32ToShortest(raw));
  return String(raw);
}

export function candidateRows(bytes: Uint8Array, start: number): CandidateRow[] {
  const registers = bytes.length >> 1;
  const rows: CandidateRow[] = [];
  for (let offset = 0; offset < registers; offset++) {
    for (const type of PROBE_TYPES) {
      const n = REGISTER_COUNT[type];
      if (offset + n > registers) continue;
      const wire = bytes.subarray(offset * 2, (offset + n) * 2);
      const values = {} as Record<ByteOrder, string>;
      for (const order of BYTE_ORDERS) values[order] = formatRaw(decodeRaw(wire, type, order), type);
      rows.push({ address: start + offset, type, values });
    }
  }
  return rows;
}

function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(headers), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export interface ProbeReport {
  endpoint: string;
  unitId: number;
  table: Table;
  /** Protocol address of the first register or bit read. */
  start: number;
  count: number;
  base: 0 | 1;
  elapsedMs: number;
  bytes: Uint8Array;
}

export function renderProbe(r: ProbeReport): string {
  const info = TABLE_INFO[r.table];
  const shown = (a: number) => String(a + r.base);
  const last = r.start + r.count - 1;
  const baseNote = r.base === 1 ? 'Addresses are 1-based register numbers (as with address_base: 1).' : 'Addresses are protocol addresses (as with address_base: 0).';
  const out: string[] = [];
  out.push(
    `Read ${r.count} ${r.count === 1 ? info.singular : info.plural} ${shown(r.start)}${r.count > 1 ? `-${shown(last)}` : ''} (FC${info.functionCode}) from ${r.endpoint} unit ${r.unitId} in ${r.elapsedMs} ms.`,
  );
  out.push(baseNote);
  out.push('');
  if (info.bits) {
    const rows: string[][] = [];
    for (let i = 0; i < r.count; i++) rows.push([shown(r.start + i), String(bitAt(r.bytes, i))]);
    out.push(table(['address', 'value'], rows));
    out.push('');
    out.push(`Configure one as: { table: ${r.table}, address: ${shown(r.start)}, type: bool${r.base === 1 ? ' }  (device address_base: 1)' : ' }'}`);
    return out.join('\n') + '\n';
  }
  const rawRows: string[][] = [];
  for (let i = 0; i < r.count; i++) {
    const hi = r.bytes[i * 2];
    const lo = r.bytes[i * 2 + 1];
    const word = (hi << 8) | lo;
    const bits = word.toString(2).padStart(16, '0').replace(/(\d{4})(?=\d)/g, '$1 ');
    rawRows.push([shown(r.start + i), `0x${word.toString(16).toUpperCase().padStart(4, '0')}`, String(word), String(word >= 0x8000 ? word - 0x10000 : word), bits]);
  }
  out.push('Raw registers:');
  out.push(table(['address', 'hex', 'uint16', 'int16', 'bits 15..0'], rawRows));
  out.push('');
  const candidates = candidateRows(r.bytes, r.start);
  out.push('Candidate decodings (address = first register of the value):');
  out.push(
    table(
      ['address', 'type', ...BYTE_ORDERS],
      candidates.map((c) => [shown(c.address), c.type, ...BYTE_ORDERS.map((o) => c.values[o])]),
    ),
  );
  out.push('');
  out.push('Find the value the device display shows, then configure that row and column, for example:');
  out.push(`  { variable: mvr_..., table: ${r.table}, address: ${shown(r.start)}, type: float32, byte_order: CDAB }${r.base === 1 ? '  (device address_base: 1)' : ''}`);
  out.push('One register has no words to swap, so 16-bit types read the same in ABCD and CDAB, and in DCBA and BADC.');
  out.push('A value that makes sense in several columns: change it on the device (or wait for it to change) and probe again.');
  return out.join('\n') + '\n';
}
