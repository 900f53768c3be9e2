import { afterEach, describe, expect, it } from 'vitest';
import { call, startHarness, type Harness } from './helpers.js';

/** Issue 12 §4: annotation triggers accepted a start in 1970 (a PLC or panel with a reset clock). */

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function harness(annotations: Record<string, unknown> = {}): Promise<Harness> {
  const h = await startHarness({ annotations });
  cleanup.push(() => h.close());
  return h;
}

describe('annotation times must be plausible', () => {
  it('refuses a range starting in 1970 and one far in the future, naming the field, and keeps nothing of them', async () => {
    const h = await harness();
    const old = await call(h.url, 'POST', '/api/annotations', { type: 'range', started_at: '1970-01-01T00:00:00.000Z', ended_at: new Date().toISOString(), text: 'clock reset', machine: 'press1' });
    expect(old.status).toBe(400);
    expect(old.body.error.message).toMatch(/started_at.*"1970-01-01T00:00:00.000Z" is implausibly old: more than annotations.max_age \(1825 days\)/);
    const future = await call(h.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: Date.now() + 3 * 86_400_000, text: 'from the future', machine: 'press1' });
    expect(future.status).toBe(400);
    expect(future.body.error.message).toMatch(/occurred_at.*implausibly far in the future/);
    const start = await call(h.url, 'POST', '/api/machines/press1/downtime/start', { at: '1970-01-01T00:00:05Z' });
    expect(start.status).toBe(400);
    expect(start.body.error.message).toMatch(/at.*implausibly old/);
    expect(h.gw.handle.annotations!.service.openDowntime('press1')).toBeFalsy();
    const list = await call(h.url, 'GET', '/api/annotations');
    expect(list.body.annotations).toHaveLength(0);
    // A recent time is fine.
    const ok = await call(h.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: new Date(Date.now() - 3_600_000).toISOString(), text: 'an hour ago', machine: 'press1' });
    expect(ok.status).toBe(201);
  });

  it('max_age and max_ahead are settings', async () => {
    const h = await harness({ max_age: '1h', max_ahead: '0s' });
    const r = await call(h.url, 'POST', '/api/annotations', { type: 'instant', occurred_at: new Date(Date.now() - 2 * 3_600_000).toISOString(), text: 'two hours ago', machine: 'press1' });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/more than annotations.max_age \(1 h\)/);
  });
});
