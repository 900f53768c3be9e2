import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmulatorHandle, FixtureInput } from '../../src/emulator/index.js';
import { client, getToken, withEmulator } from './helpers.js';

// 37 variables over 4 machines at 2 sites of org_a, written to the fixture in a shuffled order;
// plus a machine and variable of org_b that must never show.
function fixture(): FixtureInput {
  const vars: Array<{ id: string; name: string; machine: string; unit: string }> = [];
  const machines = ['mch_a1', 'mch_a2', 'mch_b1', 'mch_b2'];
  for (let i = 0; i < 37; i++) {
    const machine = machines[i % 4];
    vars.push({ id: `mvr_${String(i).padStart(2, '0')}`, name: `v${i}`, machine, unit: i % 2 ? 'bar' : '°C' });
  }
  // Deterministic shuffle.
  for (let i = vars.length - 1; i > 0; i--) {
    const j = (i * 7919) % (i + 1);
    [vars[i], vars[j]] = [vars[j], vars[i]];
  }
  return {
    clients: [{ client_id: 'c', client_secret: 's', organisations: ['org_a'] }],
    organisations: [
      { id: 'org_a', name: 'A' },
      { id: 'org_b', name: 'B' },
    ],
    sites: [
      { id: 'ste_s1', external_id: 'site-1', organisation: 'org_a' },
      { id: 'ste_s2', external_id: null, organisation: 'org_a' },
      { id: 'ste_b', external_id: 'b', organisation: 'org_b' },
    ],
    machines: [
      { id: 'mch_b2', name: 'B2', site: 'ste_s2' },
      { id: 'mch_a1', name: 'A1', site: 'ste_s1' },
      { id: 'mch_b1', name: 'B1', site: 'ste_s2' },
      { id: 'mch_a2', name: 'A2', site: 'ste_s1' },
      { id: 'mch_zz', name: 'other org', site: 'ste_b' },
    ],
    machine_variables: [...vars, { id: 'mvr_zz', name: 'other', machine: 'mch_zz', unit: '' }],
  };
}

describe('GET /machines and /machine-variables (§4.2, §8)', () => {
  let em: EmulatorHandle;
  let c: ReturnType<typeof client>;
  beforeAll(async () => {
    em = await withEmulator({ fixture: fixture() });
    c = client(em, await getToken(em, 'c', 's'), 'org_a');
  });
  afterAll(() => em.close());

  async function walk(path: string, limit: number): Promise<{ ids: string[]; pages: any[] }> {
    const ids: string[] = [];
    const pages: any[] = [];
    let cursor: string | null = null;
    for (let guard = 0; guard < 100; guard++) {
      const sep = path.includes('?') ? '&' : '?';
      const r = await c.get(`${path}${sep}limit=${limit}${cursor ? `&starting_after=${cursor}` : ''}`);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      pages.push(r.body);
      expect(r.body.pagination.starting_after).toBe(cursor);
      expect(r.body.pagination.limit).toBe(limit);
      ids.push(...r.body.data.map((x: { id: string }) => x.id));
      if (!r.body.pagination.has_more) {
        expect(r.body.pagination.next_cursor).toBeNull();
        return { ids, pages };
      }
      expect(r.body.data).toHaveLength(limit);
      expect(r.body.pagination.next_cursor).toBe(r.body.data[r.body.data.length - 1].id);
      cursor = r.body.pagination.next_cursor;
    }
    throw new Error('pagination does not end');
  }

  const allIds = Array.from({ length: 37 }, (_, i) => `mvr_${String(i).padStart(2, '0')}`);

  it('walks all 37 variables with limit 5: 8 pages, every id once, sorted by id', async () => {
    const { ids, pages } = await walk('/machine-variables', 5);
    expect(pages).toHaveLength(8);
    expect(pages[7].data).toHaveLength(2);
    expect(ids).toEqual(allIds);
  });

  it('walks with the site filter', async () => {
    const s1 = await walk('/machine-variables?site_id=ste_s1', 5);
    const expected1 = allIds.filter((_, i) => i % 4 < 2);
    expect(s1.ids).toEqual(expected1);
    const s2 = await walk('/machine-variables?site_id=ste_s2', 5);
    expect(s2.ids).toEqual(allIds.filter((_, i) => i % 4 >= 2));
    expect(s1.ids.length + s2.ids.length).toBe(37);
  });

  it('the last page exactly full has has_more false', async () => {
    const { pages } = await walk('/machine-variables', 37);
    expect(pages).toHaveLength(1);
    expect(pages[0].pagination).toEqual({ starting_after: null, limit: 37, has_more: false, next_cursor: null });
  });

  it('default limit is 10', async () => {
    const r = await c.get('/machine-variables');
    expect(r.body.data).toHaveLength(10);
    expect(r.body.pagination).toEqual({ starting_after: null, limit: 10, has_more: true, next_cursor: 'mvr_09' });
  });

  it('machine variable record: {id, name, machine: {id}, site: {id, external_id}, unit}', async () => {
    const r = await c.get('/machine-variables?limit=4');
    expect(r.body.data[0]).toEqual({ id: 'mvr_00', name: 'v0', machine: { id: 'mch_a1' }, site: { id: 'ste_s1', external_id: 'site-1' }, unit: '°C' });
    expect(r.body.data[2]).toEqual({ id: 'mvr_02', name: 'v2', machine: { id: 'mch_b1' }, site: { id: 'ste_s2', external_id: null }, unit: '°C' });
  });

  it('machines: {id, name, site}, sorted, own organisation only, with site filter', async () => {
    const r = await c.get('/machines?limit=50');
    expect(r.body.data).toEqual([
      { id: 'mch_a1', name: 'A1', site: { id: 'ste_s1', external_id: 'site-1' } },
      { id: 'mch_a2', name: 'A2', site: { id: 'ste_s1', external_id: 'site-1' } },
      { id: 'mch_b1', name: 'B1', site: { id: 'ste_s2', external_id: null } },
      { id: 'mch_b2', name: 'B2', site: { id: 'ste_s2', external_id: null } },
    ]);
    const p1 = await c.get('/machines?limit=1&site_id=ste_s2');
    expect(p1.body.data.map((m: { id: string }) => m.id)).toEqual(['mch_b1']);
    expect(p1.body.pagination).toEqual({ starting_after: null, limit: 1, has_more: true, next_cursor: 'mch_b1' });
    const p2 = await c.get('/machines?limit=1&site_id=ste_s2&starting_after=mch_b1');
    expect(p2.body.data.map((m: { id: string }) => m.id)).toEqual(['mch_b2']);
    expect(p2.body.pagination).toEqual({ starting_after: 'mch_b1', limit: 1, has_more: false, next_cursor: null });
  });

  it.each(['0', '51', 'abc', '', '-1', '2.5', '1e1'])('limit=%s is a 400', async (limit) => {
    for (const path of ['/machines', '/machine-variables']) {
      const r = await c.get(`${path}?limit=${limit}`);
      expect(r.status, `${path} limit=${limit}`).toBe(400);
      expect(r.body.code).toBe('bad_request');
      expect(r.body.message).toMatch(/^limit: /);
    }
  });

  it('limit 1 and 50 are accepted', async () => {
    expect((await c.get('/machine-variables?limit=1')).body.data).toHaveLength(1);
    expect((await c.get('/machine-variables?limit=50')).body.data).toHaveLength(37);
  });

  it('an unknown cursor, or one of another kind or organisation, is a 400', async () => {
    for (const cursor of ['mvr_nope', 'mch_a1', 'mvr_zz']) {
      const r = await c.get(`/machine-variables?starting_after=${cursor}`);
      expect(r.status, cursor).toBe(400);
      expect(r.body.message).toMatch(/^starting_after: unknown machine variable/);
    }
    expect((await c.get('/machines?starting_after=mvr_00')).status).toBe(400);
  });

  it('an unknown site filter or a site of another organisation is a 400', async () => {
    for (const site of ['ste_nope', 'ste_b']) {
      const r = await c.get(`/machines?site_id=${site}`);
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/^site_id: unknown site/);
    }
  });

  it('a cursor from outside the filtered site still pages by id', async () => {
    const r = await c.get('/machine-variables?site_id=ste_s2&starting_after=mvr_00&limit=2');
    expect(r.status).toBe(200);
    expect(r.body.data.map((v: { id: string }) => v.id)).toEqual(['mvr_02', 'mvr_03']);
  });
});
