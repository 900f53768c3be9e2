import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { EmulatorHandle } from '../../src/emulator/index.js';
import { call, client, getToken, item, withEmulator } from './helpers.js';

const V = 'mvr_press1_temperature';
const T0 = '2026-01-01T00:00:00.000Z';

describe('POST /machine-data/batch (CONTRACT.md)', () => {
  let em: EmulatorHandle;
  let c: ReturnType<typeof client>;
  beforeAll(async () => {
    em = await withEmulator();
    c = client(em, await getToken(em));
  });
  beforeEach(() => em.reset());
  afterAll(() => em.close());

  const expect400 = async (items: unknown[], message: string | RegExp) => {
    const r = await c.batch(items);
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('bad_request');
    if (typeof message === 'string') expect(r.body.message).toBe(message);
    else expect(r.body.message).toMatch(message);
    expect(em.stats().values_stored).toBe(0);
    return r;
  };

  it('stores every item of a valid batch and answers 200 {items_received}', async () => {
    const items = Array.from({ length: 200 }, (_, i) => item(`mvr_gen_${(i % 20) + 1}`, new Date(Date.parse(T0) + i * 1000).toISOString(), i + 0.5));
    const r = await c.batch(items);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ items_received: 200 });
    expect(em.stats()).toMatchObject({ values_stored: 200, values_overwritten: 0, batches_accepted: 1 });
    expect(em.values('mvr_gen_1')).toHaveLength(10);
    expect(em.values('mvr_gen_1')[0]).toEqual({ timestamp: T0, value: 0.5, writes: 1 });
  });

  it('0 items and 201 items are refused', async () => {
    await expect400([], 'items: needs at least 1 item');
    const many = Array.from({ length: 201 }, (_, i) => item(V, new Date(Date.parse(T0) + i).toISOString(), 1));
    await expect400(many, 'items: 201 items is more than the maximum of 200');
  });

  it('refuses a body that is not {items: [...]}', async () => {
    for (const [body, msg] of [
      [[], /request body: must be a JSON object/],
      [{}, /^items: required field is missing/],
      [{ items: {} }, /^items: must be a list/],
      [{ items: [item(V, T0, 1)], extra: 1 }, /^extra: unknown field/],
    ] as const) {
      const r = await c.post('/machine-data/batch', body);
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(msg);
    }
  });

  it('malformed JSON is a 400 naming the problem', async () => {
    const r = await c.postRaw('/machine-data/batch', '{"items": [');
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('bad_request');
    expect(r.body.message).toMatch(/^request body is not valid JSON: /);
    const empty = await c.postRaw('/machine-data/batch', '');
    expect(empty.status).toBe(400);
    expect(empty.body.message).toMatch(/empty/);
  });

  describe('timestamp: ISO 8601, explicit offset, exactly milliseconds', () => {
    it.each([
      ['no offset', '2026-01-01T00:00:00.000'],
      ['no millis', '2026-01-01T00:00:00Z'],
      ['2 fraction digits', '2026-01-01T00:00:00.00Z'],
      ['4 fraction digits', '2026-01-01T00:00:00.0000Z'],
      ['offset without colon', '2026-01-01T00:00:00.000+0100'],
      ['date only', '2026-01-01'],
      ['space separator', '2026-01-01 00:00:00.000Z'],
      ['epoch number as text', '1767225600000'],
    ])('refuses %s', async (_name, ts) => {
      await expect400([item(V, T0, 1), item(V, ts, 1)], `items[1].timestamp: ${JSON.stringify(ts)} is not an ISO 8601 date-time with an explicit offset (Z or ±hh:mm) and exactly 3 fraction digits`);
    });

    it.each([
      ['month 13', '2026-13-01T00:00:00.000Z'],
      ['February 30', '2026-02-30T00:00:00.000Z'],
      ['hour 24', '2026-01-01T24:00:00.000Z'],
      ['offset +15:00', '2026-01-01T00:00:00.000+15:00'],
    ])('refuses an invalid date (%s)', async (_name, ts) => {
      await expect400([item(V, ts, 1)], `items[0].timestamp: ${JSON.stringify(ts)} is not a valid date-time`);
    });

    it('refuses a missing or non-string timestamp', async () => {
      await expect400([{ machine_variable_id: V, value: 1 }], 'items[0].timestamp: required field is missing');
      await expect400([item(V, 1767225600000 as unknown as string, 1)], 'items[0].timestamp: 1767225600000 is not a string');
    });

    it('accepts Z and ±hh:mm offsets', async () => {
      const r = await c.batch([item(V, '2026-01-01T00:00:00.000Z', 1), item(V, '2026-01-01T05:30:00.001+05:30', 2), item(V, '2025-12-31T19:00:00.002-05:00', 3)]);
      expect(r.status).toBe(200);
      expect(em.values(V).map((v) => v.timestamp)).toEqual(['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.001Z', '2026-01-01T00:00:00.002Z']);
    });
  });

  describe('machine variable id', () => {
    it('refuses an unknown variable, naming index and field', async () => {
      const items = Array.from({ length: 20 }, (_, i) => item(V, new Date(Date.parse(T0) + i).toISOString(), i));
      items[17] = item('mvr_x', T0, 1);
      await expect400(items, 'items[17].machine_variable_id: unknown machine variable "mvr_x"');
    });

    it("refuses a variable of another organisation", async () => {
      await expect400([item('mvr_other1_speed', T0, 1)], /^items\[0\]\.machine_variable_id: unknown machine variable "mvr_other1_speed"/);
    });

    it('accepts machine_data_point_config_id instead, but not both and not neither', async () => {
      const r = await c.batch([{ timestamp: T0, machine_data_point_config_id: V, value: 7 }]);
      expect(r.status).toBe(200);
      expect(em.value(V, T0)).toEqual({ value: 7, writes: 1 });
      await em.reset();
      await expect400([{ timestamp: T0, machine_variable_id: V, machine_data_point_config_id: V, value: 1 }], /^items\[0\]\.machine_data_point_config_id: give either/);
      await expect400([{ timestamp: T0, value: 1 }], /^items\[0\]\.machine_variable_id: required field is missing/);
      await expect400([{ timestamp: T0, machine_data_point_config_id: 'mdp_unknown', value: 1 }], 'items[0].machine_data_point_config_id: unknown machine variable "mdp_unknown"');
    });

    it('refuses unknown item fields', async () => {
      await expect400([{ ...item(V, T0, 1), unit: 'bar' }], 'items[0].unit: unknown field');
    });
  });

  describe('value: a finite JSON number', () => {
    it.each([
      ['a string', '12.5', 'items[0].value: "12.5" is not a number'],
      ['"NaN"', 'NaN', 'items[0].value: "NaN" is not a number'],
      ['"Infinity"', 'Infinity', 'items[0].value: "Infinity" is not a number'],
      ['null', null, 'items[0].value: null is not a number'],
      ['a boolean', true, 'items[0].value: true is not a number'],
      ['an object', { v: 1 }, 'items[0].value: an object is not a number'],
    ])('refuses %s', async (_name, value, message) => {
      await expect400([item(V, T0, value)], message);
    });

    it('refuses a missing value and a number literal that overflows to Infinity', async () => {
      await expect400([{ timestamp: T0, machine_variable_id: V }], 'items[0].value: required field is missing');
      const r = await c.postRaw('/machine-data/batch', `{"items":[{"timestamp":"${T0}","machine_variable_id":"${V}","value":1e400}]}`);
      expect(r.status).toBe(400);
      expect(r.body.message).toBe('items[0].value: Infinity is not a finite number');
    });

    it('accepts negative, zero, fractional and exponent numbers', async () => {
      const values = [-1.5, 0, 1e-9, 6.02e23];
      const r = await c.batch(values.map((v, i) => item(V, new Date(Date.parse(T0) + i).toISOString(), v)));
      expect(r.status).toBe(200);
      expect(em.values(V).map((x) => x.value)).toEqual(values);
    });
  });

  it('a 400 stores nothing, even the valid items before the bad one', async () => {
    const items = Array.from({ length: 199 }, (_, i) => item(V, new Date(Date.parse(T0) + i).toISOString(), i));
    items.push(item(V, T0, 'bad'));
    await expect400(items, 'items[199].value: "bad" is not a number');
    expect(em.values(V)).toEqual([]);
    expect(em.stats().batches_accepted).toBe(0);
  });

  it('a later write of the same (variable, timestamp) replaces the value and counts an overwrite', async () => {
    expect((await c.batch([item(V, T0, 1), item('mvr_press1_speed', T0, 5)])).status).toBe(200);
    expect((await c.batch([item(V, T0, 2)])).status).toBe(200);
    expect(em.values(V)).toEqual([{ timestamp: T0, value: 2, writes: 2 }]);
    expect(em.stats()).toMatchObject({ values_stored: 2, values_overwritten: 1, batches_accepted: 2 });
    // The same pair twice in one batch: the later item wins.
    expect((await c.batch([item(V, T0, 3), item(V, T0, 4)])).status).toBe(200);
    expect(em.value(V, T0)).toEqual({ value: 4, writes: 4 });
  });

  it('the same instant written with a different offset is the same key', async () => {
    expect((await c.batch([item(V, '2026-01-01T00:00:00.000Z', 1)])).status).toBe(200);
    expect((await c.batch([item(V, '2026-01-01T01:00:00.000+01:00', 2)])).status).toBe(200);
    expect((await c.batch([item(V, '2025-12-31T20:30:00.000-03:30', 3)])).status).toBe(200);
    expect(em.values(V)).toEqual([{ timestamp: '2026-01-01T00:00:00.000Z', value: 3, writes: 3 }]);
    expect(em.stats()).toMatchObject({ values_stored: 1, values_overwritten: 2 });
  });

  it('out-of-order and late data are accepted and read back sorted', async () => {
    expect((await c.batch([item(V, '2026-01-01T00:00:02.000Z', 2), item(V, '2025-06-01T00:00:00.000Z', 0), item(V, '2026-01-01T00:00:01.000Z', 1)])).status).toBe(200);
    expect(em.values(V).map((v) => v.value)).toEqual([0, 1, 2]);
  });

  it('413 for a JSON body over 1,000,000 bytes (declared length); nothing stored', async () => {
    const pad = 'x'.repeat(1_000_001);
    const r = await c.postRaw('/machine-data/batch', JSON.stringify({ items: [item(V, T0, 1)], pad }));
    expect(r.status).toBe(413);
    expect(r.body.code).toBe('payload_too_large');
    expect(em.values(V)).toEqual([]);
    // The connection is still usable afterwards.
    expect((await c.batch([item(V, T0, 1)])).status).toBe(200);
  });

  it('counts streamed bytes of a chunked body (no Content-Length): 1,000,000 ok, 1,000,001 is 413', async () => {
    const { request } = await import('undici');
    const { Readable } = await import('node:stream');
    const token = await getToken(em);
    const base = JSON.stringify({ items: [item(V, T0, 1)] });
    const send = async (size: number) => {
      const body = Buffer.from(base + ' '.repeat(size - base.length));
      const r = await request(`${em.baseUrl}/machine-data/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'service-organisation-id': 'org_demo', 'content-type': 'application/json' },
        // Several chunks, no Content-Length: the server must count.
        body: Readable.from((function* () {
          for (let i = 0; i < body.length; i += 65_536) yield body.subarray(i, i + 65_536);
        })()),
      });
      await r.body.dump();
      return r.statusCode;
    };
    expect(await send(1_000_001)).toBe(413);
    expect(em.values(V)).toEqual([]);
    expect(await send(1_000_000)).toBe(200);
    expect(em.values(V)).toHaveLength(1);
    expect(await send(5_000_000)).toBe(413);
  });

  it('a body of exactly 1,000,000 bytes is within the limit', async () => {
    const base = JSON.stringify({ items: [item(V, T0, 1)] });
    const body = base + ' '.repeat(1_000_000 - base.length);
    expect(Buffer.byteLength(body)).toBe(1_000_000);
    const r = await c.postRaw('/machine-data/batch', body);
    expect(r.status).toBe(200);
  });

  it('counts requests by route and status in the stats', async () => {
    await c.batch([item(V, T0, 1)]);
    await c.batch([]);
    await call(`${em.baseUrl}/machine-data/batch`, { method: 'POST', json: { items: [] } });
    expect(em.stats().requests['POST /machine-data/batch']).toEqual({ '200': 1, '400': 1, '401': 1 });
  });
});
