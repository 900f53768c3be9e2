import { readFileSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { toIsoUtc } from '../../src/core/time.js';
import { buildImportFile, type RawRow } from '../../src/uplink/import-file.js';

const names = ['mvr_a', 'mvr_b', 'mvr_ünïcode', 'mvr_"quoted"'];
function source(rows: RawRow[], chunk = 7) {
  return {
    chunks: (function* () {
      for (let i = 0; i < rows.length; i += chunk) yield rows.slice(i, i + chunk);
    })(),
    variableName: (id: number) => names[id],
  };
}
const T0 = Date.parse('2026-11-22T23:59:59.990Z');
const rows: RawRow[] = Array.from({ length: 100 }, (_, i) => [i + 10, i % 4, T0 + i * 7, i === 3 ? -0.5 : i * 1.25]);

describe('import file builder', () => {
  it('writes {"items": [...]} with ISO UTC millisecond timestamps and the configured id field', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'gw-file-')), 'f.json');
    const r = await buildImportFile(source(rows), path, 1_000_000, 'machine_data_point_config_id');
    const doc = JSON.parse(readFileSync(path, 'utf8')) as { items: Array<Record<string, unknown>> };
    expect(doc.items).toHaveLength(100);
    expect(r).toEqual({ itemCount: 100, lastSeq: 109, bytes: statSync(path).size });
    expect(doc.items[0]).toEqual({ timestamp: '2026-11-22T23:59:59.990Z', machine_data_point_config_id: 'mvr_a', value: 0 });
    expect(doc.items[2]).toEqual({ timestamp: toIsoUtc(T0 + 14), machine_data_point_config_id: 'mvr_ünïcode', value: 2.5 }); // crosses midnight
    // Every timestamp is exactly what Date.toISOString gives (the builder writes digits itself).
    doc.items.forEach((item, i) => expect(item.timestamp).toBe(new Date(T0 + i * 7).toISOString()));
    expect(doc.items[3].machine_data_point_config_id).toBe('mvr_"quoted"');
    expect(doc.items[3].value).toBe(-0.5);
  });

  it('stops before the byte limit and reports the last row the file holds', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'gw-file-')), 'f.json');
    const r = await buildImportFile(source(rows), path, 2_000, 'machine_variable_id');
    const size = statSync(path).size;
    expect(size).toBeLessThanOrEqual(2_000);
    expect(size).toBe(r.bytes); // the byte count is exact, multi-byte ids included
    const doc = JSON.parse(readFileSync(path, 'utf8')) as { items: unknown[] };
    expect(doc.items).toHaveLength(r.itemCount);
    expect(r.itemCount).toBeGreaterThan(10);
    expect(r.itemCount).toBeLessThan(100);
    expect(r.lastSeq).toBe(10 + r.itemCount - 1);
  });

  it('writes timestamps identical to Date.toISOString across days, years and before 1970', async () => {
    const stamps = [0, -1, 1, 86_399_999, 86_400_000, Date.parse('2024-02-29T12:34:56.789Z'), Date.parse('1969-12-31T23:59:59.999Z'), Date.parse('2099-12-31T23:59:59.999Z')];
    for (let i = 0; i < 5_000; i++) stamps.push(Math.floor((i * 7_919_993_337) % 4e12) - 1e11);
    const raw: RawRow[] = stamps.map((ts, i) => [i + 1, 0, ts, i]);
    const path = join(mkdtempSync(join(tmpdir(), 'gw-file-')), 'f.json');
    await buildImportFile(source(raw, 1_000), path, 10_000_000, 'machine_variable_id');
    const doc = JSON.parse(readFileSync(path, 'utf8')) as { items: Array<{ timestamp: string }> };
    doc.items.forEach((item, i) => expect(item.timestamp).toBe(new Date(stamps[i]).toISOString()));
  });

  it('writes an empty list when there are no rows', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'gw-file-')), 'f.json');
    const r = await buildImportFile(source([]), path, 1_000, 'machine_variable_id');
    expect(readFileSync(path, 'utf8')).toBe('{"items":[]}');
    expect(r).toEqual({ itemCount: 0, lastSeq: null, bytes: 12 });
  });
});
