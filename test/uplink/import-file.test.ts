import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildImportFile } from '../../src/uplink/import-file.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';

const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
});

const names = ['mvr_a', 'mvr_b', 'mvr_ünïcode', 'mvr_"quoted"\\back'];
const T0 = Date.parse('2026-11-22T23:59:59.990Z');

/** A real buffer holding `stamps.length` samples; value i * 1.25 (with a few awkward values). */
async function bufferWith(stamps: number[], values?: number[]) {
  const b = openTestBuffer();
  open.push(b);
  await b.buffer.append(stamps.map((ts, i) => ({ variable: names[i % 4], ts, value: values?.[i] ?? i * 1.25 })));
  const seqs = b.rows().map((r) => r.seq);
  return { b, range: { from: seqs[0], to: seqs[seqs.length - 1] } };
}
const tmpFile = () => join(mkdtempSync(join(tmpdir(), 'gw-file-')), 'f.json');

describe('import file builder', () => {
  it('writes {"items": [...]} with ISO UTC millisecond timestamps, the configured id field, and exact values', async () => {
    const stamps = Array.from({ length: 2_500 }, (_, i) => T0 + i * 7);
    const values = stamps.map((_, i) => [0.1 + 0.2, 1 / 3, -0.5, 1e300 * 10, 5e-324, -0, 123456789.123456789, 42][i % 8] * (i % 3 === 0 ? 1 : -1));
    const { b, range } = await bufferWith(stamps, values);
    const path = tmpFile();
    const r = await buildImportFile(b.buffer.importReader(range, 'machine_data_point_config_id'), path, 10_000_000);
    const doc = JSON.parse(readFileSync(path, 'utf8')) as { items: Array<Record<string, unknown>> };
    expect(doc.items).toHaveLength(2_500);
    expect(r).toEqual({ itemCount: 2_500, lastSeq: range.to, bytes: statSync(path).size });
    doc.items.forEach((item, i) => {
      expect(item).toEqual({ timestamp: new Date(stamps[i]).toISOString(), machine_data_point_config_id: names[i % 4], value: values[i] }); // −0 included: rows keep it (src/buffer/row-value.ts)
      expect(Object.keys(item)).toEqual(['timestamp', 'machine_data_point_config_id', 'value']);
    });
  });

  it('stops before the byte limit (inside a block) and reports the last row the file holds', async () => {
    const stamps = Array.from({ length: 3_000 }, (_, i) => T0 + i);
    const { b, range } = await bufferWith(stamps);
    const path = tmpFile();
    const r = await buildImportFile(b.buffer.importReader(range, 'machine_variable_id'), path, 150_000);
    const size = statSync(path).size;
    expect(size).toBeLessThanOrEqual(150_000);
    expect(size).toBeGreaterThan(149_800); // filled up to the limit, item by item in the last block
    expect(size).toBe(r.bytes); // the byte count is exact, multi-byte ids included
    const doc = JSON.parse(readFileSync(path, 'utf8')) as { items: unknown[] };
    expect(doc.items).toHaveLength(r.itemCount);
    expect(r.itemCount).toBeGreaterThan(1_000);
    expect(r.itemCount).toBeLessThan(3_000);
    expect(r.lastSeq).toBe(range.from + r.itemCount - 1);
  });

  it('writes timestamps identical to Date.toISOString across days, leap years and centuries', async () => {
    const stamps = [0, 1, 86_399_999, 86_400_000, Date.parse('2024-02-29T12:34:56.789Z'), Date.parse('2000-03-01T00:00:00.001Z'), Date.parse('2099-12-31T23:59:59.999Z')];
    for (let i = 0; i < 20_000; i++) stamps.push(Math.floor((i * 7_919_993_337) % 4.1e12));
    const { b, range } = await bufferWith(stamps);
    const path = tmpFile();
    await buildImportFile(b.buffer.importReader(range, 'machine_variable_id'), path, 100_000_000);
    const doc = JSON.parse(readFileSync(path, 'utf8')) as { items: Array<{ timestamp: string }> };
    doc.items.forEach((item, i) => expect(item.timestamp).toBe(new Date(stamps[i]).toISOString()));
  });

  it('writes an empty list when there are no rows', async () => {
    const { b } = await bufferWith([T0]);
    const path = tmpFile();
    const r = await buildImportFile(b.buffer.importReader({ from: 1_000, to: 2_000 }, 'machine_variable_id'), path, 1_000);
    expect(readFileSync(path, 'utf8')).toBe('{"items":[]}');
    expect(r).toEqual({ itemCount: 0, lastSeq: null, bytes: 12 });
  });
});
