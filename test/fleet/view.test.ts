import { describe, expect, it } from 'vitest';
import { FleetView, renderFleetTable } from '../../src/fleet/view.js';

const doc = (gateway: string, over: Record<string, unknown> = {}) =>
  JSON.stringify({ v: 1, gateway, state: 'online', at: '2026-11-23T10:00:00.000Z', version: '0.1.0', interval_s: 10, uplink: 'ok', sources: { up: 2, down: 1, down_names: ['press'] }, backlog: 1234, oldest_unsent_age_s: 75, eta_s: 30, capacity_left_bytes: 2e9, last_error: 'press: timeout', budget: { group: 'nat', share_per_minute: 350, used_last_minute: 340, members: 4 }, ...over });

describe('FleetView (the table model of `edge-gateway fleet` and the console)', () => {
  it('turns an online gateway stale after three silent intervals, and keeps the last figures when its will arrives', () => {
    const v = new FleetView('p');
    expect(v.ingest('p/a/status', doc('a'), 0)).toBe(true);
    expect(v.rows(29_000)[0].state).toBe('online');
    expect(v.rows(31_000)[0].state).toBe('stale');
    v.ingest('p/a/status', JSON.stringify({ v: 1, gateway: 'a', state: 'offline', at: '2026-11-23T09:00:00.000Z', reason: 'last will' }), 40_000);
    const [row] = v.rows(40_000);
    expect(row).toMatchObject({ gateway: 'a', state: 'offline', reason: 'last will', backlog: 1234, sources_up: 2, sources_down: 1, share_per_minute: 350, last_error: 'press: timeout' });
    expect(renderFleetTable(v.rows(40_000))).toMatch(/^a\s+offline\s+ok\s+2 up, 1 down\s+1,234\s+75s\s+30s\s+2\.0 GB\s+350/m);
  });

  it('shows the capacity left in time when the gateway reports it (buffer v2)', () => {
    const v = new FleetView('p');
    v.ingest('p/c/status', doc('c', { capacity_left_s: 29 * 86_400 }), 0);
    expect(v.rows(0)[0].capacity_left_s).toBe(29 * 86_400);
    expect(renderFleetTable(v.rows(0))).toMatch(/2\.0 GB \(29\.0d\)/);
  });

  it('reads the last figures from <prefix>/<gw>/last when the viewer starts after the will', () => {
    const v = new FleetView('p');
    v.ingest('p/b/status', JSON.stringify({ v: 1, gateway: 'b', state: 'offline', at: 'x', reason: 'gone' }), 0);
    v.ingest('p/b/last', doc('b', { backlog: 9 }), 0);
    expect(v.rows(0)[0]).toMatchObject({ state: 'offline', backlog: 9 });
    // How long it has been gone, by its last status's own time stamp.
    const later = Date.parse('2026-11-23T10:05:00.000Z');
    expect(v.rows(later)[0].last_status_age_s).toBe(300);
    expect(renderFleetTable(v.rows(later))).toMatch(/5m ago\s+gone$/m);
  });

  it('ignores what it cannot read and sorts trouble first', () => {
    const v = new FleetView('p');
    for (const [t, p] of [
      ['p/x/status', 'not json'],
      ['p/x/status', '[1,2]'],
      ['p/x/status', '{"state":"weird"}'],
      ['p/x/budget', doc('x')],
      ['other/x/status', doc('x')],
      ['p/x/y/status', doc('x')],
    ]) expect(v.ingest(t, p, 0)).toBe(false);
    v.ingest('p/zz/status', doc('zz'), 0);
    v.ingest('p/aa/status', doc('aa', { state: 'stopped' }), 0);
    v.ingest('p/mm/status', JSON.stringify({ v: 1, gateway: 'mm', state: 'offline', at: 'x' }), 0);
    expect(v.rows(0).map((r) => `${r.gateway}:${r.state}`)).toEqual(['mm:offline', 'aa:stopped', 'zz:online']);
    // A cleared retained status removes the gateway.
    expect(v.ingest('p/mm/status', '', 0)).toBe(true);
    expect(v.rows(0)).toHaveLength(2);
  });
});
