import { describe, expect, it } from 'vitest';
import { ConnectionTable, type Admission } from '../../src/core/connection-table.js';
import { capToDescriptors, descriptorReserve, listenerCeiling, parseOpenFileLimit, readOpenFileLimit } from '../../src/core/descriptors.js';
import { remoteKey } from '../../src/core/remote-address.js';

/** The rules of the per-address connection table (the listeners' tests drive it over real sockets). */

const limits = { max: 10, maxPerAddress: 4, maxPending: 6, maxPendingPerAddress: 3 };
const shedOf = (a: Admission<string>) => (a.admitted ? a.shed.map((s) => `${s.conn}:${s.limit}`) : [`refused:${a.limit}`]);

describe('ConnectionTable', () => {
  it('closes the address\'s own oldest pending connection at maxPendingPerAddress, never another address\'s', () => {
    const t = new ConnectionTable<string>(limits);
    expect(shedOf(t.admit('plc', '10.0.0.1'))).toEqual([]);
    for (let i = 0; i < 3; i++) expect(shedOf(t.admit(`a${i}`, '10.0.0.9'))).toEqual([]);
    expect(shedOf(t.admit('a3', '10.0.0.9'))).toEqual(['a0:address_pending']);
    expect(shedOf(t.admit('a4', '10.0.0.9'))).toEqual(['a1:address_pending']);
    expect(t.has('plc')).toBe(true);
    expect(t.heldBy('10.0.0.9')).toBe(3);
  });

  it('at maxPerAddress closes the address\'s oldest pending one, and refuses it when all are settled', () => {
    const t = new ConnectionTable<string>(limits);
    for (let i = 0; i < 4; i++) {
      t.admit(`c${i}`, '10.0.0.2');
      t.settle(`c${i}`);
    }
    expect(shedOf(t.admit('c4', '10.0.0.2'))).toEqual(['refused:address']);
    t.unsettle('c1');
    expect(shedOf(t.admit('c5', '10.0.0.2'))).toEqual(['c1:address']);
    expect(t.size).toBe(4);
  });

  it('at max closes the oldest pending connection of the address holding the most; refuses only when none is pending', () => {
    const t = new ConnectionTable<string>({ max: 6, maxPerAddress: 6, maxPending: 6, maxPendingPerAddress: 6 });
    t.admit('x1', '10.0.0.3');
    t.admit('y1', '10.0.0.4');
    t.admit('y2', '10.0.0.4');
    t.admit('x2', '10.0.0.3');
    t.admit('x3', '10.0.0.3');
    t.admit('z1', '10.0.0.5');
    // 10.0.0.3 holds three: its oldest goes, though y1 and z1 are older than x2.
    expect(shedOf(t.admit('n1', '10.0.0.6'))).toEqual(['x1:total']);
    // Now 10.0.0.3 and 10.0.0.4 hold two each: the tie goes to the longest-waiting (y1).
    expect(shedOf(t.admit('n2', '10.0.0.6'))).toEqual(['y1:total']);
    for (const c of ['x2', 'x3', 'y2', 'z1', 'n1', 'n2']) t.settle(c);
    expect(shedOf(t.admit('n3', '10.0.0.7'))).toEqual(['refused:total']);
    expect(t.size).toBe(6);
  });

  it('at maxPending closes the oldest pending connection of the address with the most pending', () => {
    const t = new ConnectionTable<string>({ max: 100, maxPerAddress: 100, maxPending: 4, maxPendingPerAddress: 4 });
    t.admit('a', '10.0.0.1');
    t.admit('b1', '10.0.0.2');
    t.admit('b2', '10.0.0.2');
    t.admit('c', '10.0.0.3');
    expect(shedOf(t.admit('d', '10.0.0.4'))).toEqual(['b1:pending']);
    expect(t.pending).toBe(4);
    t.settle('a');
    expect(t.pending).toBe(3);
  });

  it('forgets closed and shed connections; counts stay right', () => {
    const t = new ConnectionTable<string>(limits);
    t.admit('a', '10.0.0.1');
    t.admit('b', '10.0.0.1');
    t.settle('b');
    expect(t.remove('a')).toBe(true);
    expect(t.remove('a')).toBe(false);
    expect([t.size, t.pending, t.addresses]).toEqual([1, 0, 1]);
    t.remove('b');
    expect([t.size, t.pending, t.addresses]).toEqual([0, 0, 0]);
  });
});

describe('remoteKey', () => {
  it('keys IPv4 (also IPv4-mapped) by address and IPv6 by its /64', () => {
    expect(remoteKey('10.1.2.3')).toBe('10.1.2.3');
    expect(remoteKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(remoteKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(remoteKey('2001:db8:1:2:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(remoteKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(remoteKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(remoteKey('::1')).toBe('0:0:0:0::/64');
    expect(remoteKey(undefined)).toBe('unknown');
  });
});

describe('descriptor reserve', () => {
  it('reads the soft open-file limit from /proc/self/limits', () => {
    const text = 'Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 4096                 files     \n';
    expect(parseOpenFileLimit(text)).toBe(1024);
    expect(parseOpenFileLimit(text.replace('1024 ', 'unlimited'))).toBeNull();
    expect(readOpenFileLimit(() => text)).toBe(1024);
    expect(readOpenFileLimit(() => { throw new Error('no /proc'); })).toBeNull();
  });

  it('keeps a reserve and splits the rest a quarter to HTTP, three quarters to the broker', () => {
    expect(descriptorReserve(1_024)).toBe(256);
    expect(descriptorReserve(65_536)).toBe(8_192);
    expect(descriptorReserve(256)).toBe(128);
    expect([listenerCeiling('http', 1_024), listenerCeiling('broker', 1_024)]).toEqual([192, 576]);
    expect(listenerCeiling('http', 1_024) + listenerCeiling('broker', 1_024) + descriptorReserve(1_024)).toBe(1_024);
    expect(listenerCeiling('broker', null)).toBe(Number.POSITIVE_INFINITY);
    expect(capToDescriptors('broker', 'mqtt.broker.max_clients', 1_000, 65_536)).toEqual({ cap: 1_000, lowered: null });
    const low = capToDescriptors('broker', 'mqtt.broker.max_clients', 1_000, 1_024);
    expect(low.cap).toBe(576);
    expect(low.lowered).toMatch(/^mqtt\.broker\.max_clients 1000 is lowered to 576: the open-file limit of the process is 1024/);
  });
});
