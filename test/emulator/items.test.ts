import { describe, expect, it } from 'vitest';
import { parseIsoWithOffset } from '../../src/core/time.js';
import { loadFixture } from '../../src/emulator/fixture.js';
import { checkItem, isProblem } from '../../src/emulator/items.js';

const fixture = loadFixture();
const scope = { fixture, organisationId: 'org_demo', principal: { kind: 'client' as const, name: 'c', organisations: new Set(['org_demo']), sites: null } };
const accept = (timestamp: string) => {
  const r = checkItem({ timestamp, machine_variable_id: 'mvr_gen_1', value: 1 }, scope);
  return isProblem(r) ? undefined : r.epochMs;
};

describe('item timestamp check agrees with core/time.ts parseIsoWithOffset(ts, true)', () => {
  it('on edge cases', () => {
    const cases = [
      '2026-01-01T00:00:00.000Z', '2024-02-29T23:59:59.999Z', '2023-02-29T00:00:00.000Z', '2100-02-29T00:00:00.000Z', '2000-02-29T00:00:00.000Z',
      '2026-04-31T00:00:00.000Z', '2026-12-31T23:59:59.999Z', '2026-00-10T00:00:00.000Z', '2026-01-00T00:00:00.000Z', '2026-01-01T24:00:00.000Z',
      '2026-01-01T00:60:00.000Z', '2026-01-01T00:00:60.000Z', '0099-01-01T00:00:00.000Z', '0100-01-01T00:00:00.000Z', '0000-01-01T00:00:00.000Z',
      '9999-12-31T23:59:59.999Z', '2026-01-01T00:00:00.000z', '2026-01-01t00:00:00.000Z', '2026-01-01T00:00:00,000Z', '2026-01-01T00:00:00.0a0Z',
      '2026-01-01T00:00:00.000+00:00', '2026-01-01T00:00:00.000-00:00', '2026-01-01T00:00:00.000+14:00', '2026-01-01T00:00:00.000+14:60', '+02026-01-01T00:00:00.000Z',
      '2026-1-01T00:00:00.000Z', ' 2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z ', '２026-01-01T00:00:00.000Z',
    ];
    for (const ts of cases) expect(accept(ts), ts).toBe(parseIsoWithOffset(ts, true));
  });

  it('on 20,000 random near-valid strings', () => {
    let seed = 42;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const pick = <T,>(a: T[]) => a[Math.floor(rnd() * a.length)];
    const d = (n: number, w: number) => String(Math.floor(rnd() * n)).padStart(w, '0');
    let accepted = 0;
    for (let i = 0; i < 20_000; i++) {
      const ts = `${d(10_000, 4)}-${d(14, 2)}-${d(33, 2)}T${d(26, 2)}:${d(62, 2)}:${d(62, 2)}.${d(1000, 3)}${pick(['Z', 'Z', 'Z', '+01:00', '-13:45', '+15:00', '', 'z'])}`;
      const a = accept(ts);
      expect(a, ts).toBe(parseIsoWithOffset(ts, true));
      if (a !== undefined) accepted++;
    }
    expect(accepted).toBeGreaterThan(1000);
  });
});
