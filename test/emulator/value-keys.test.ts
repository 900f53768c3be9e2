import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { DEMO_API_KEY, call, client, item, withEmulator } from './helpers.js';

/**
 * GET /_emulator/value-keys: which (variable, instant) pairs the emulator holds, a page of variables
 * at a time, so a benchmark can check exactly which sent values arrived (bench/plant-scale.ts,
 * BENCH_KILL) without a request per variable.
 */
describe('GET /_emulator/value-keys', () => {
  let em: EmulatorHandle;
  let c: ReturnType<typeof client>;
  beforeAll(async () => {
    em = await withEmulator();
    c = client(em, DEMO_API_KEY);
  });
  beforeEach(() => em.reset());
  afterAll(() => em.close());

  const T0 = Date.parse('2026-01-01T00:00:00.000Z');
  const iso = (ms: number) => new Date(ms).toISOString();

  it('lists each variable with its instants ascending and the writes that replaced a value', async () => {
    expect((await c.batch([item('mvr_press1_speed', iso(T0 + 2000), 1), item('mvr_press1_speed', iso(T0), 2), item('mvr_press1_state', iso(T0), 3)])).status).toBe(200);
    // The same instant again, written with another offset: one key, written twice.
    expect((await c.batch([item('mvr_press1_speed', '2026-01-01T01:00:00.000+01:00', 4)])).status).toBe(200);
    const r = await call(`${em.inspectUrl}/value-keys`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      variables: [
        { id: 'mvr_press1_speed', epoch_ms: [T0, T0 + 2000], overwritten: 1 },
        { id: 'mvr_press1_state', epoch_ms: [T0], overwritten: 0 },
      ],
      next_cursor: null,
    });
  });

  it('filters by prefix and pages in id order with starting_after', async () => {
    const ids = ['mvr_gen_1', 'mvr_gen_2', 'mvr_gen_10', 'mvr_press1_speed'];
    expect((await c.batch(ids.map((id, i) => item(id, iso(T0 + i), i)))).status).toBe(200);
    const page1 = (await call(`${em.inspectUrl}/value-keys?prefix=mvr_gen_&limit=2`)).body;
    expect(page1.variables.map((v: { id: string }) => v.id)).toEqual(['mvr_gen_1', 'mvr_gen_10']);
    expect(page1.next_cursor).toBe('mvr_gen_10');
    const page2 = (await call(`${em.inspectUrl}/value-keys?prefix=mvr_gen_&limit=2&starting_after=${page1.next_cursor}`)).body;
    expect(page2).toEqual({ variables: [{ id: 'mvr_gen_2', epoch_ms: [T0 + 1], overwritten: 0 }], next_cursor: null });
  });

  it('gives the value stored at each instant with values=1', async () => {
    expect((await c.batch([item('mvr_press1_speed', iso(T0 + 2000), 1.5), item('mvr_press1_speed', iso(T0), 2.25)])).status).toBe(200);
    // A later write replaces the value at its instant: the stored one is the last.
    expect((await c.batch([item('mvr_press1_speed', iso(T0), 7)])).status).toBe(200);
    const r = await call(`${em.inspectUrl}/value-keys?values=1`);
    expect(r.body).toEqual({ variables: [{ id: 'mvr_press1_speed', epoch_ms: [T0, T0 + 2000], overwritten: 1, values: [7, 1.5] }], next_cursor: null });
    const bad = await call(`${em.inspectUrl}/value-keys?values=yes`);
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('values: "yes"');
  });

  it('refuses a bad limit naming it, and other methods', async () => {
    for (const bad of ['0', 'abc', '2.5', '10001']) {
      const r = await call(`${em.inspectUrl}/value-keys?limit=${bad}`);
      expect(r.status).toBe(400);
      expect(r.body.message).toContain(`limit: "${bad}"`);
    }
    expect((await call(`${em.inspectUrl}/value-keys`, { method: 'DELETE' })).status).toBe(405);
    expect((await call(`${em.inspectUrl}/`)).body.endpoints).toContain('GET /_emulator/value-keys?prefix=mvr_...&limit=N&starting_after=mvr_...&values=1');
  });
});
