import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { call, startHarness, stored, waitFor, type Harness } from './helpers.js';
import { INVALID_CASES } from './cases.js';

let emu: EmulatorHandle;
beforeAll(async () => {
  emu = await startEmulator({ port: 0 });
});
afterAll(async () => {
  await emu.close();
});

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function harness(options: Parameters<typeof startHarness>[0] = {}): Promise<Harness> {
  const h = await startHarness({ emu, ...options });
  cleanup.push(() => h.close());
  return h;
}

/** A write without a body carries this header instead of a JSON Content-Type (src/http/guard.ts). */
const BODILESS = { 'x-requested-by': 'api-test' };

describe('local annotation API', () => {
  it('creates an instant annotation, queues it with a gateway-prefixed external_id, and delivers it', async () => {
    const { url } = await harness();
    const r = await call(url, 'POST', '/api/annotations', { type: 'instant', occurred_at: '2026-03-01T09:15:00.250+01:00', text: '  Shift handover  ', machine: 'press1' });
    expect(r.status).toBe(201);
    const a = r.body.annotation;
    expect(a.external_id).toMatch(/^test-gw-[0-9a-f]{32}$/);
    expect(a.text).toBe('Shift handover');
    expect(a.occurred_at).toBe('2026-03-01T08:15:00.250Z');
    expect(a.machine_variables).toEqual(['mvr_press1_state', 'mvr_press1_speed']);
    const got = await waitFor(() => stored(emu, a.external_id)[0], { what: 'annotation at the emulator' });
    expect(got).toMatchObject({
      type: 'instant',
      occurred_at: '2026-03-01T08:15:00.250Z',
      text: 'Shift handover',
      site: { id: 'ste_demo1', external_id: 'plant-demo' },
      machine_variables: [{ id: 'mvr_press1_state' }, { id: 'mvr_press1_speed' }],
    });
    const after = await waitFor(async () => {
      const g = await call(url, 'GET', `/api/annotations/${a.external_id}`);
      return g.body.annotation.state === 'delivered' && g.body.annotation;
    });
    expect(after.service_id).toBe(got.id);
    expect(after.attempts).toBe(1);
  });

  it('creates a range annotation with explicit variables and site', async () => {
    const { url } = await harness();
    const r = await call(url, 'POST', '/api/annotations', {
      type: 'range',
      started_at: '2026-03-01T08:00:00Z',
      ended_at: 1_772_355_600_000,
      text: 'Planned maintenance',
      machine_variables: [{ id: 'mvr_mixer1_speed' }],
      site: { id: 'ste_demo1' },
    });
    expect(r.status).toBe(201);
    const got = await waitFor(() => stored(emu, r.body.annotation.external_id)[0]);
    expect(got).toMatchObject({ type: 'range', started_at: '2026-03-01T08:00:00.000Z', ended_at: '2026-03-01T09:00:00.000Z', machine_variables: [{ id: 'mvr_mixer1_speed' }] });
  });

  describe('refuses every §2.3 rule with a field-named JSON error, before queueing', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness({ emu });
    });
    afterAll(async () => {
      await h.close();
    });
    for (const c of INVALID_CASES) {
      it(`${c.name} → ${c.field}`, async () => {
        const r = await call(h.url, 'POST', '/api/annotations', c.body);
        expect(r.status).toBe(400);
        expect(r.body.error.code).toBe('invalid_annotation');
        const fields = r.body.error.problems.map((p: { field: string }) => p.field);
        expect(fields).toContain(c.field);
        expect(r.body.error.field).toBe(r.body.error.problems[0].field);
        expect(r.body.error.message.startsWith(`${r.body.error.field}: `)).toBe(true);
      });
    }
    it('queued nothing for any of them', async () => {
      const list = await call(h.url, 'GET', '/api/annotations');
      expect(list.body.annotations).toEqual([]);
      expect(h.gw.handle.status().annotations).toMatchObject({ queued: 0, invalid_total: INVALID_CASES.length });
    });
  });

  it('answers JSON errors for a body that is not JSON, the wrong content type, and an empty body', async () => {
    const { url } = await harness();
    const notJson = await call(url, 'POST', '/api/annotations', '{"type": "instant",', {});
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.message).toMatch(/not valid JSON/);
    const wrongType = await call(url, 'POST', '/api/annotations', 'type=instant', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(wrongType.status).toBe(415);
    const empty = await call(url, 'POST', '/api/annotations', '', {});
    expect(empty.status).toBe(400);
  });

  it('treats a repeated caller-chosen external_id as the same annotation, and a different one under the same id as a conflict', async () => {
    const { url } = await harness();
    const body = { type: 'instant', occurred_at: '2026-03-01T08:00:00Z', text: 'Idempotent', machine_variables: [], external_id: `caller-${Date.now()}` };
    const first = await call(url, 'POST', '/api/annotations', body);
    const again = await call(url, 'POST', '/api/annotations', body);
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body.created).toBe(false);
    const other = await call(url, 'POST', '/api/annotations', { ...body, text: 'Something else' });
    expect(other.status).toBe(409);
    expect(other.body.error.field).toBe('external_id');
    await waitFor(() => stored(emu, body.external_id).length === 1);
    expect(stored(emu, body.external_id)).toHaveLength(1);
  });

  it('keeps an annotation the service refuses (400) as refused with the service\'s message, and goes on with the next', async () => {
    const { url } = await harness();
    // mvr_lathe1_speed belongs to the second site: the service refuses it (§2.3 "available at site").
    const bad = await call(url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'Wrong site', machine_variables: ['mvr_lathe1_speed'] });
    const good = await call(url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'Right site', machine_variables: ['mvr_press1_speed'] });
    expect(bad.status).toBe(201);
    const refused = await waitFor(async () => {
      const g = await call(url, 'GET', `/api/annotations/${bad.body.annotation.external_id}`);
      return g.body.annotation.state === 'refused' && g.body.annotation;
    });
    expect(refused.refusal).toMatch(/machine_variables\[0\]\.id: .*not available at site/);
    await waitFor(() => stored(emu, good.body.annotation.external_id).length === 1);
    const list = await call(url, 'GET', '/api/annotations?state=refused');
    expect(list.body.annotations.map((a: { external_id: string }) => a.external_id)).toEqual([bad.body.annotation.external_id]);
    expect(list.body.counts).toMatchObject({ refused: 1, delivered: 1, queued: 0 });
  });

  it('starts and stops a downtime: the stop posts the range with reason + text and the machine\'s variables', async () => {
    const { url } = await harness();
    const before = Date.now();
    const start = await call(url, 'POST', '/api/machines/press1/downtime/start', undefined, BODILESS);
    expect(start.status).toBe(201);
    const startedMs = start.body.downtime.started_ms;
    expect(startedMs).toBeGreaterThanOrEqual(before);
    const twice = await call(url, 'POST', '/api/machines/press1/downtime/start', {});
    expect(twice.status).toBe(409);
    expect(twice.body.error).toMatchObject({ code: 'downtime_open', field: 'machine' });
    const machines = await call(url, 'GET', '/api/machines');
    expect(machines.body.machines.find((m: { key: string }) => m.key === 'press1').downtime.started_ms).toBe(startedMs);

    const blank = await call(url, 'POST', '/api/machines/press1/downtime/stop', { text: '   ' });
    expect(blank.status).toBe(400);
    expect(blank.body.error.field).toBe('reason');

    const stop = await call(url, 'POST', '/api/machines/press1/downtime/stop', { reason: 'Tool change', text: 'die swap' });
    expect(stop.status).toBe(201);
    const a = stop.body.annotation;
    expect(a).toMatchObject({ type: 'range', text: 'Tool change: die swap', machine: 'press1', started_at: new Date(startedMs).toISOString() });
    const got = await waitFor(() => stored(emu, a.external_id)[0]);
    expect(got).toMatchObject({ type: 'range', text: 'Tool change: die swap', machine_variables: [{ id: 'mvr_press1_state' }, { id: 'mvr_press1_speed' }], started_at: new Date(startedMs).toISOString() });
    expect(Date.parse(got.ended_at!)).toBeGreaterThan(startedMs);

    const none = await call(url, 'POST', '/api/machines/press1/downtime/stop', { reason: 'x' });
    expect(none.status).toBe(409);
    expect(none.body.error.code).toBe('no_open_downtime');
  });

  it('takes the reason given at start, an explicit end time, and cancels without sending', async () => {
    const { url, gw } = await harness();
    const at = Date.now() - 60_000;
    await call(url, 'POST', '/api/machines/mixer1/downtime/start', { reason: 'Cleaning', at });
    const early = await call(url, 'POST', '/api/machines/mixer1/downtime/stop', { at: at - 1 });
    expect(early.status).toBe(400);
    expect(early.body.error.field).toBe('ended_at');
    const stop = await call(url, 'POST', '/api/machines/mixer1/downtime/stop', { at: at + 30_000 });
    expect(stop.body.annotation).toMatchObject({ text: 'Cleaning', started_at: new Date(at).toISOString(), ended_at: new Date(at + 30_000).toISOString() });

    await call(url, 'POST', '/api/machines/mixer1/downtime/start', undefined, BODILESS);
    const cancel = await call(url, 'POST', '/api/machines/mixer1/downtime/cancel', undefined, BODILESS);
    expect(cancel.status).toBe(200);
    expect((await call(url, 'GET', '/api/machines')).body.machines.every((m: { downtime: unknown }) => m.downtime === null)).toBe(true);
    await waitFor(() => stored(emu, stop.body.annotation.external_id).length === 1);
    expect(gw.handle.status().annotations).toMatchObject({ queued: 0, delivered: 1 });
  });

  it('names the field for unknown machines and bad downtime bodies', async () => {
    const { url } = await harness();
    const unknown = await call(url, 'POST', '/api/machines/lathe9/downtime/start', undefined, BODILESS);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: 'unknown_machine', field: 'machine' });
    const badAt = await call(url, 'POST', '/api/machines/press1/downtime/start', { at: '08:00' });
    expect(badAt.status).toBe(400);
    expect(badAt.body.error.field).toBe('at');
    const extra = await call(url, 'POST', '/api/machines/press1/downtime/start', { why: 'x' });
    expect(extra.body.error.field).toBe('why');
    const badList = await call(url, 'GET', '/api/annotations?state=lost');
    expect(badList.status).toBe(400);
    expect(badList.body.error.field).toBe('state');
    const badLimit = await call(url, 'GET', '/api/annotations?limit=0');
    expect(badLimit.body.error.field).toBe('limit');
  });

  it('serves the operator page with no external references and a CSP that forbids them', async () => {
    const { url } = await harness({ annotations: { hmi: { title: 'Line <3>' } } });
    const r = await call(url, 'GET', '/');
    expect(r.status).toBe(200);
    const html = r.body as string;
    expect(html).toContain('<title>Line &lt;3&gt;</title>');
    expect(html).not.toMatch(/(src|href)=["']?(https?:)?\/\//i);
    expect(html).not.toMatch(/@import|url\(/i);
    const panel = await call(url, 'GET', '/api/panel');
    expect(panel.body.machines.map((m: { key: string }) => m.key)).toEqual(['press1', 'mixer1']);
    expect(panel.body.machines[1].reasons).toEqual(['Cleaning', 'No material']);
    expect(panel.body.machines[0].reasons).toEqual(['Material shortage', 'Tool change', 'Breakdown']);
  });
});

describe('local API guards', () => {
  it('needs the bearer token for writes when listening beyond localhost; reads stay open when so configured', async () => {
    const { url } = await harness({ sections: { http: { enabled: true, port: 0, host: '0.0.0.0', api_token: 'panel-token-123456', require_token_for_reads: false } } });
    const body = { type: 'instant', occurred_at: Date.now(), text: 'With token', machine_variables: [] };
    const none = await call(url, 'POST', '/api/annotations', body);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('unauthorized');
    const wrong = await call(url, 'POST', '/api/machines/press1/downtime/start', {}, { authorization: 'Bearer nope' });
    expect(wrong.status).toBe(401);
    const ok = await call(url, 'POST', '/api/annotations', body, { authorization: 'Bearer panel-token-123456' });
    expect(ok.status).toBe(201);
    expect((await call(url, 'GET', '/api/panel')).status).toBe(200);
    expect((await call(url, 'GET', '/')).status).toBe(200);
  });

  it('refuses writes beyond localhost when no token is configured', async () => {
    const { url } = await harness({ sections: { http: { enabled: true, port: 0, host: '0.0.0.0' } } });
    const r = await call(url, 'POST', '/api/machines/press1/downtime/start', {});
    expect(r.status).toBe(403);
    expect(r.body.error.code).toBe('writes_disabled');
  });

  it('refuses a body over http.max_body_bytes with 413', async () => {
    const { url } = await harness({ sections: { http: { enabled: true, port: 0, max_body_bytes: 2_000 } } });
    const r = await call(url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'x'.repeat(3_000), machine_variables: [] });
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe('too_large');
    const list = await call(url, 'GET', '/api/annotations');
    expect(list.body.annotations).toHaveLength(0);
  });

  it('rate-limits requests per client address with 429', async () => {
    // 60/min: a burst of at most 10, then one per second.
    const { url } = await harness({ sections: { http: { enabled: true, port: 0, rate_limit_per_minute: 60 } } });
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) statuses.push((await call(url, 'GET', '/api/panel')).status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(9);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(3);
    const limited = await call(url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now(), text: 'x', machine_variables: [] });
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limited');
  });
});
