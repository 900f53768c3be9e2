import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { client, getToken, manualClock, withEmulator } from './helpers.js';

const instant = (extra: Record<string, unknown> = {}) => ({
  type: 'instant',
  occurred_at: '2026-01-01T08:15:00+01:00',
  text: 'Tool change',
  machine_variables: [{ id: 'mvr_press1_speed' }],
  site: { id: 'ste_demo1' },
  ...extra,
});
const range = (extra: Record<string, unknown> = {}) => ({
  type: 'range',
  started_at: '2026-01-01T08:00:00Z',
  ended_at: '2026-01-01T09:00:00Z',
  text: 'Planned maintenance',
  machine_variables: [],
  site: { external_id: 'plant-demo' },
  ...extra,
});
const without = (o: Record<string, unknown>, key: string) => {
  const c = { ...o };
  delete c[key];
  return c;
};

describe('POST /machine-data-annotations (§2.3, §4.1)', () => {
  let em: EmulatorHandle;
  let c: ReturnType<typeof client>;
  const clock = manualClock(Date.parse('2026-02-03T04:05:06.789Z'));
  beforeAll(async () => {
    em = await withEmulator({ clock });
    c = client(em, await getToken(em));
  });
  beforeEach(() => em.reset());
  afterAll(() => em.close());

  const post = (body: unknown) => c.post('/machine-data-annotations', body);
  const expect400 = async (body: unknown, message: string | RegExp) => {
    const r = await post(body);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.code).toBe('bad_request');
    if (typeof message === 'string') expect(r.body.message).toBe(message);
    else expect(r.body.message).toMatch(message);
    expect(em.annotations()).toEqual([]);
  };

  it('creates an instant annotation: 201 with the §2.3 response', async () => {
    const r = await post(instant({ text: '  Tool change  ', external_id: 'gw-1_a' }));
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      id: expect.stringMatching(/^mda_[0-9a-z]{26}$/),
      external_id: 'gw-1_a',
      type: 'instant',
      occurred_at: '2026-01-01T07:15:00.000Z',
      site: { id: 'ste_demo1', external_id: 'plant-demo' },
      created_at: '2026-02-03T04:05:06.789Z',
      text: 'Tool change',
      machine_variables: [{ id: 'mvr_press1_speed' }],
    });
    expect(r.body).not.toHaveProperty('started_at');
    expect(em.annotations()).toEqual([{ organisation_id: 'org_demo', ...r.body }]);
    expect(em.stats().annotations).toBe(1);
  });

  it('creates a range annotation by site external_id; external_id null when not given', async () => {
    const r = await post(range({ started_at: '2026-01-01T08:00:00.5-02:00', ended_at: '2026-01-01T10:00:01.123456Z' }));
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ type: 'range', started_at: '2026-01-01T10:00:00.500Z', ended_at: '2026-01-01T10:00:01.123Z', external_id: null, site: { id: 'ste_demo1', external_id: 'plant-demo' }, machine_variables: [] });
    expect(r.body).not.toHaveProperty('occurred_at');
  });

  describe('type', () => {
    it('is required and must be instant or range', async () => {
      await expect400(without(instant(), 'type'), /^type: required field is missing/);
      await expect400(instant({ type: 'interval' }), 'type: "interval" is not one of instant, range');
    });
    it("refuses the other variant's fields", async () => {
      await expect400(instant({ started_at: '2026-01-01T08:00:00Z' }), /^started_at: not allowed when type is "instant"/);
      await expect400(range({ occurred_at: '2026-01-01T08:00:00Z' }), /^occurred_at: not allowed when type is "range"/);
    });
  });

  describe('date-times', () => {
    it('occurred_at is required for instant', async () => {
      await expect400(without(instant(), 'occurred_at'), 'occurred_at: required field is missing');
    });
    it('started_at and ended_at are required for range', async () => {
      await expect400(without(range(), 'started_at'), 'started_at: required field is missing');
      await expect400(without(range(), 'ended_at'), 'ended_at: required field is missing');
    });
    it.each(['2026-01-01T08:15:00', '2026-01-01', '2026-01-01T08:15:00.000+0100', 'yesterday', '2026-02-30T00:00:00Z'])('refuses %s (no explicit offset or not a date)', async (ts) => {
      await expect400(instant({ occurred_at: ts }), `occurred_at: ${JSON.stringify(ts)} is not an ISO 8601 date-time with an explicit offset (Z or ±hh:mm)`);
    });
    it('refuses a non-string date-time', async () => {
      await expect400(instant({ occurred_at: 1767225600000 }), 'occurred_at: 1767225600000 is not a string');
    });
    it('ended_at must be strictly after started_at', async () => {
      await expect400(range({ ended_at: '2026-01-01T08:00:00Z' }), /^ended_at: .* must be after started_at/);
      await expect400(range({ ended_at: '2026-01-01T07:59:59.999Z' }), /^ended_at: /);
      // Same instant written with another offset is not after it either.
      await expect400(range({ ended_at: '2026-01-01T09:00:00+01:00' }), /^ended_at: /);
      expect((await post(range({ ended_at: '2026-01-01T08:00:00.001Z' }))).status).toBe(201);
    });
  });

  describe('text', () => {
    it('is required and a string', async () => {
      await expect400(without(instant(), 'text'), 'text: required field is missing');
      await expect400(instant({ text: 5 }), 'text: 5 is not a string');
    });
    it('must not be blank', async () => {
      await expect400(instant({ text: '' }), 'text: must not be blank');
      await expect400(instant({ text: ' \n\t ' }), 'text: must not be blank');
    });
    it('is at most 5000 characters after trimming', async () => {
      await expect400(instant({ text: 'x'.repeat(5001) }), 'text: 5001 characters after trimming is more than the maximum of 5000');
      const r = await post(instant({ text: `   ${'x'.repeat(5000)}   ` }));
      expect(r.status).toBe(201);
      expect(r.body.text).toHaveLength(5000);
    });
  });

  describe('machine_variables', () => {
    it('is required and a list; may be empty', async () => {
      await expect400(without(instant(), 'machine_variables'), /^machine_variables: required field is missing/);
      await expect400(instant({ machine_variables: { id: 'mvr_press1_speed' } }), 'machine_variables: an object is not a list');
      expect((await post(instant({ machine_variables: [] }))).status).toBe(201);
    });
    it('has at most 100 entries', async () => {
      const gen = Array.from({ length: 20 }, (_, i) => ({ id: `mvr_gen_${i + 1}` }));
      const hundred = Array.from({ length: 5 }, () => gen).flat();
      expect((await post(instant({ machine_variables: hundred }))).status).toBe(201);
      await em.reset();
      await expect400(instant({ machine_variables: [...hundred, { id: 'mvr_gen_1' }] }), 'machine_variables: 101 entries is more than the maximum of 100');
    });
    it('entries are {id} objects of known variables', async () => {
      await expect400(instant({ machine_variables: ['mvr_press1_speed'] }), /^machine_variables\[0\]: "mvr_press1_speed" is not an object/);
      await expect400(instant({ machine_variables: [{ id: 'mvr_press1_speed' }, {}] }), 'machine_variables[1].id: required field is missing');
      await expect400(instant({ machine_variables: [{ id: 'mvr_press1_speed', name: 'x' }] }), 'machine_variables[0].name: unknown field');
      await expect400(instant({ machine_variables: [{ id: 'mvr_nope' }] }), 'machine_variables[0].id: unknown machine variable "mvr_nope"');
      await expect400(instant({ machine_variables: [{ id: 'mvr_other1_speed' }] }), 'machine_variables[0].id: unknown machine variable "mvr_other1_speed"');
    });
    it('every variable must be available at the site', async () => {
      await expect400(instant({ machine_variables: [{ id: 'mvr_press1_speed' }, { id: 'mvr_lathe1_speed' }] }), /^machine_variables\[1\]\.id: machine variable "mvr_lathe1_speed" is not available at site "ste_demo1"/);
      expect((await post(instant({ machine_variables: [{ id: 'mvr_lathe1_speed' }], site: { id: 'ste_demo2' } }))).status).toBe(201);
    });
  });

  describe('site', () => {
    it('is required and an object', async () => {
      await expect400(without(instant(), 'site'), /^site: required field is missing/);
      await expect400(instant({ site: 'ste_demo1' }), /^site: "ste_demo1" is not an object/);
    });
    it('exactly one of id / external_id', async () => {
      await expect400(instant({ site: { id: 'ste_demo1', external_id: 'plant-demo' } }), 'site: give either id or external_id, not both');
      await expect400(instant({ site: {} }), 'site: give one of id or external_id');
      await expect400(instant({ site: { name: 'x' } }), 'site.name: unknown field');
    });
    it('must exist in the organisation', async () => {
      await expect400(instant({ site: { id: 'ste_nope' } }), /^site\.id: unknown site "ste_nope"/);
      await expect400(instant({ site: { id: 'ste_other' }, machine_variables: [] }), /^site\.id: unknown site "ste_other"/);
      await expect400(instant({ site: { external_id: 'other-plant' }, machine_variables: [] }), /^site\.external_id: no site with external_id "other-plant"/);
    });
  });

  describe('external_id', () => {
    it('is optional but not nullable', async () => {
      await expect400(instant({ external_id: null }), /^external_id: must not be null/);
    });
    it('is 1 to 100 characters of [A-Za-z0-9-_]', async () => {
      await expect400(instant({ external_id: '' }), 'external_id: must be 1 to 100 characters, got 0');
      await expect400(instant({ external_id: 'a'.repeat(101) }), 'external_id: must be 1 to 100 characters, got 101');
      await expect400(instant({ external_id: 'has space' }), /^external_id: "has space" does not match/);
      await expect400(instant({ external_id: 'dot.ted' }), /^external_id: "dot.ted" does not match/);
      await expect400(instant({ external_id: 12 }), 'external_id: 12 is not a string');
      expect((await post(instant({ external_id: 'a'.repeat(100) }))).status).toBe(201);
      expect((await post(instant({ external_id: 'A-z_0-9' }))).status).toBe(201);
    });
    it('409 {code: "conflict"} when it already exists in the organisation; nothing stored', async () => {
      expect((await post(instant({ external_id: 'dup-1' }))).status).toBe(201);
      const again = await post(range({ external_id: 'dup-1' }));
      expect(again.status).toBe(409);
      expect(again.body.code).toBe('conflict');
      expect(again.body.message).toContain('dup-1');
      expect(em.annotations()).toHaveLength(1);
      // A site's external id is taken too (§2.1: unique across all objects of the organisation).
      expect((await post(instant({ external_id: 'plant-demo' }))).status).toBe(409);
    });
  });

  it('refuses unknown fields and non-object bodies', async () => {
    await expect400(instant({ severity: 'high' }), 'severity: unknown field');
    await expect400([instant()], /^request body: a list is not a JSON object/);
  });
});
