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

  it('ignores other topics, shows an unreadable status as an invalid row, and sorts trouble first', () => {
    const v = new FleetView('p');
    for (const [t, p] of [
      ['p/x/budget', doc('x')],
      ['other/x/status', doc('x')],
      ['p/x/y/status', doc('x')],
    ]) expect(v.ingest(t, p, 0)).toBe(false);
    expect(v.rows(0)).toEqual([]);
    // Not a status document: a row that says what is wrong (issue 21 §5), never a throw later.
    for (const [p, problem] of [
      ['not json', 'not JSON'],
      ['[1,2]', '(top level): a list of 2 is not a mapping'],
      ['{"state":"weird"}', 'state: "weird" is not one of online, offline, stopped'],
      [doc('x', { uplink: 5 }), 'uplink: 5 is not a string'],
      [doc('x', { sources: { up: 1, down: 1, down_names: 'x' } }), 'sources.down_names: "x" is not a list'],
      [`{"v":1,"state":"online","at":"x","pad":"${'y'.repeat(70_000)}"}`, 'more than the 65,536 a fleet document may have'],
    ]) {
      expect(v.ingest('p/x/status', p, 0)).toBe(true);
      const [row] = v.rows(0);
      expect(row).toMatchObject({ gateway: 'x', state: 'invalid', sources_down_names: [] });
      expect(row.problem).toContain(problem);
      expect(renderFleetTable(v.rows(0))).toMatch(/^x\s+invalid\s.*unreadable status document/m);
    }
    // A good one replaces it.
    v.ingest('p/x/status', doc('x'), 0);
    expect(v.rows(0)[0]).toMatchObject({ state: 'online', problem: null });
    v.ingest('p/zz/status', doc('zz'), 0);
    v.ingest('p/aa/status', doc('aa', { state: 'stopped' }), 0);
    v.ingest('p/mm/status', JSON.stringify({ v: 1, gateway: 'mm', state: 'offline', at: 'x' }), 0);
    v.ingest('p/bad/status', '{}', 0);
    expect(v.rows(0).map((r) => `${r.gateway}:${r.state}`)).toEqual(['mm:offline', 'bad:invalid', 'aa:stopped', 'x:online', 'zz:online']);
    // A cleared retained status removes the gateway.
    expect(v.ingest('p/mm/status', '', 0)).toBe(true);
    expect(v.rows(0)).toHaveLength(4);
  });

  it('keeps the figures of the last good status when a bad one follows, and shows a duplicate name', () => {
    const v = new FleetView('p');
    v.ingest('p/a/last', doc('a', { backlog: 77 }), 0);
    v.ingest('p/a/status', doc('a', { uplink: 5 }), 0);
    expect(v.rows(0)[0]).toMatchObject({ state: 'invalid', backlog: 77 });
    v.ingest('p/b/status', doc('b', { instance: 'ab12cd34', duplicate_name: 'another process publishes the status of "b"' }), 0);
    expect(v.rows(0).find((r) => r.gateway === 'b')!.problem).toBe('two gateways publish as b: another process publishes the status of "b"');
  });
});

describe('FleetView memory bound (a publisher making up gateway names)', () => {
  it('drops unknown fields and holds at most its byte budget of documents, counting what it did not keep', () => {
    const v = new FleetView('p', 1_000_000);
    const padded = (g: string) => doc(g, { pad: 'y'.repeat(60_000) });
    const bytes = Buffer.byteLength(padded('g0000'));
    let kept = 0;
    for (let i = 0; i < 200; i++) if (v.ingest(`p/g${String(i).padStart(4, '0')}/status`, padded(`g${String(i).padStart(4, '0')}`), 0)) kept++;
    // Each online status is held as status and as last figures: two documents' worth per name.
    expect(kept).toBe(Math.floor(1_000_000 / (2 * bytes)));
    expect(v.notKeptDocuments.documents).toBe(200 - kept);
    expect(v.rows(0)).toHaveLength(kept);
    expect(v.rows(0)[0]).not.toHaveProperty('pad');
    expect(renderFleetTable(v.rows(0), v.notKeptDocuments)).toMatch(new RegExp(`${200 - kept} status documents not kept: the table holds at most 1 MB`));
    // A cleared retained status gives its space back to the next gateway.
    expect(v.ingest('p/g0000/status', '', 0)).toBe(true);
    expect(v.ingest('p/new/status', padded('new'), 0)).toBe(true);
    // Unknown fields are not kept in the parsed document either.
    const small = new FleetView('p');
    small.ingest('p/a/status', doc('a', { pad: 'z'.repeat(1000) }), 0);
    expect(JSON.stringify(small.rows(0))).not.toContain('zzzz');
  });
});
