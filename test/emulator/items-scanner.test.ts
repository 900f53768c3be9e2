import { describe, expect, it } from 'vitest';
import { ItemsScanner } from '../../src/emulator/items-scanner.js';

/** Feeds `text` to a scanner cut at the given byte offsets. */
function scan(text: string | Buffer, cuts: number[] = [], parse = true) {
  const buf = Buffer.isBuffer(text) ? text : Buffer.from(text);
  const items: unknown[] = [];
  const s = new ItemsScanner({ parse, onItem: (x, i) => items.push([i, x]) });
  let from = 0;
  for (const c of [...cuts, buf.length]) {
    s.push(buf.subarray(from, c));
    from = c;
  }
  s.end();
  return { items, count: s.count, error: s.error };
}

const tricky = {
  items: [
    { timestamp: '2026-01-01T00:00:00.000Z', machine_variable_id: 'mvr_"quoted"', value: 1 },
    { s: 'back\\slash\\\\', t: '\\"', u: 'ünïcödé €', nested: { a: [1, [2, { b: '}]' }]] } },
    'a string with , and ] and }',
    123.5e-3,
    null,
    [1, 2, 3],
    {},
  ],
  'key with \\"escapes\\"': { items: 'not these' },
};

describe('ItemsScanner', () => {
  it('yields every element of items, parsed, at every possible chunk boundary', () => {
    const text = JSON.stringify(tricky);
    const expected = tricky.items.map((x, i) => [i, x]);
    const bytes = Buffer.byteLength(text);
    for (let cut = 0; cut <= bytes; cut++) {
      const r = scan(text, [cut]);
      expect(r.error, `cut at ${cut}`).toBeNull();
      expect(r.items, `cut at ${cut}`).toEqual(expected);
    }
    // One byte at a time.
    const r = scan(text, Array.from({ length: bytes - 1 }, (_, i) => i + 1));
    expect(r.items).toEqual(expected);
  });

  it('counts elements without parsing at every boundary', () => {
    const text = JSON.stringify(tricky);
    for (let cut = 0; cut <= text.length; cut += 3) expect(scan(text, [cut], false).count).toBe(7);
  });

  it('handles whitespace, a BOM, and items not first', () => {
    const text = '\uFEFF \n { "meta" : { "x" : [ 1 , 2 ] } ,\n "items" : [ \n 1 , \t {"a" : "b"} \n ] \n } \n';
    expect(scan(text)).toEqual({ items: [[0, 1], [1, { a: 'b' }]], count: 2, error: null });
    expect(scan('{"items":[]}')).toEqual({ items: [], count: 0, error: null });
  });

  it.each([
    ['', /empty/],
    ['[]', /JSON array/],
    ['"items"', /not a JSON object/],
    ['{}', /no "items" array/],
    ['{"items": 5}', /"items" is not an array/],
    ['{"items": [1,]}', /trailing comma/],
    ['{"items": [1,,2]}', /not valid JSON in items\[1\]/],
    ['{"items": [1, {"a": }]}', /not valid JSON in items\[1\]/],
    ['{"items": [1]', /ends in the middle/],
    ['{"items": [1]} {}', /after the JSON document/],
    ['{"items": [1], "items": [2]}', /appears twice/],
    ['{"items": [1} ', /unexpected "}"/],
    ['{"x": 1] , "items": []}', /unexpected "]"/],
    ['{"x" 1, "items": []}', /expected ":"/],
    ['{items: []}', /expected an object key/],
    ['{"items": [1] x}', /expected "," or "}"/],
    ['{"x": tru, "items": []}', /not valid JSON in "x"/],
  ])('reports %j as unreadable', (text, why) => {
    const r = scan(text);
    expect(r.error).toMatch(why);
  });

  it('stops at the first error', () => {
    const r = scan('{"items": [1, {bad}, 3]}');
    expect(r.items).toEqual([[0, 1]]);
    expect(r.error).toMatch(/items\[1\]/);
  });
});

describe('ItemsScanner: one value never holds the file', () => {
  const item = { timestamp: '2026-01-01T00:00:00.000Z', machine_variable_id: 'mvr_a', value: 1 };
  const big = 'x'.repeat(200_000);
  it('refuses an item, another top-level value or a key longer than 64 KiB, in one chunk or across many, naming it', () => {
    const cases: Array<[string, RegExp]> = [
      [JSON.stringify({ items: [item, { ...item, value: big }] }), /^items\[1\] is longer than 64 KiB; an item of an import file is \{timestamp, machine_variable_id, value\}, a few hundred bytes \(at byte \d+\)$/],
      [JSON.stringify({ note: [big], items: [item] }), /^"note" is longer than 64 KiB/],
      [JSON.stringify({ [big]: 1, items: [item] }), /^a key is longer than 64 KiB/],
    ];
    for (const [text, message] of cases) {
      for (const cuts of [[], Array.from({ length: Math.floor(text.length / 65_536) }, (_, i) => (i + 1) * 65_536)]) {
        const r = scan(text, cuts);
        expect(r.error, `${cuts.length} cuts`).toMatch(message);
      }
    }
    // Items within the bound, whatever the chunks, are read.
    expect(scan(JSON.stringify({ items: [item, { ...item, value: 'y'.repeat(60_000) }] }), [100, 30_000]).items).toHaveLength(2);
  });
});
