import { describe, expect, it } from 'vitest';
import { resolveAddress } from '../../../src/sources/modbus/address.js';
import { coalesce, planSection, type PlannedValue } from '../../../src/sources/modbus/plan.js';
import { parseSection } from './helpers.js';

const value = (index: number, address: number, count = 1, table: PlannedValue['table'] = 'holding'): PlannedValue => ({
  index,
  variable: `mvr_${index}`,
  table,
  address,
  count,
  type: count === 1 ? 'uint16' : count === 2 ? 'float32' : 'float64',
  order: 'ABCD',
  scale: 1,
  offset: 0,
});
const spans = (blocks: ReturnType<typeof coalesce>) => blocks.map((b) => [b.table, b.start, b.count, b.values.length]);

describe('request coalescing', () => {
  it('joins adjacent registers into one request', () => {
    const values = Array.from({ length: 100 }, (_, i) => value(i, i));
    expect(spans(coalesce(values, 10, 125))).toEqual([['holding', 0, 100, 100]]);
  });

  it('never asks for more than the limit (125 registers, §6.3)', () => {
    const values = Array.from({ length: 300 }, (_, i) => value(i, 1000 + i));
    expect(spans(coalesce(values, 10, 125))).toEqual([
      ['holding', 1000, 125, 125],
      ['holding', 1125, 125, 125],
      ['holding', 1250, 50, 50],
    ]);
    // A 2-register value never straddles the limit.
    const mixed = [...Array.from({ length: 124 }, (_, i) => value(i, i)), value(124, 124, 2)];
    expect(spans(coalesce(mixed, 10, 125))).toEqual([
      ['holding', 0, 124, 124],
      ['holding', 124, 2, 1],
    ]);
  });

  it('reads through gaps up to max_gap and no further', () => {
    expect(spans(coalesce([value(0, 0), value(1, 11)], 10, 125))).toEqual([['holding', 0, 12, 2]]);
    expect(spans(coalesce([value(0, 0), value(1, 12)], 10, 125))).toEqual([
      ['holding', 0, 1, 1],
      ['holding', 12, 1, 1],
    ]);
    expect(spans(coalesce([value(0, 0), value(1, 1)], 0, 125))).toEqual([['holding', 0, 2, 2]]);
    // -1: only values that share registers are joined.
    expect(spans(coalesce([value(0, 0), value(1, 1), value(2, 1)], -1, 125))).toEqual([
      ['holding', 0, 1, 1],
      ['holding', 1, 1, 2],
    ]);
  });

  it('keeps tables apart and uses the 2000-bit limit for coils (§6.1)', () => {
    const coils = Array.from({ length: 2500 }, (_, i) => value(i, i, 1, 'coil'));
    const blocks = coalesce([...coils, value(9000, 0), value(9001, 0, 1, 'input')], 100, 2000);
    expect(blocks.map((b) => [b.table, b.start, b.count])).toEqual([
      ['coil', 0, 2000],
      ['coil', 2000, 500],
      ['holding', 0, 1],
      ['input', 0, 1],
    ]);
  });

  it('turns a 100-value device into a handful of requests', () => {
    const registers = [
      ...Array.from({ length: 40 }, (_, i) => ({ variable: `mvr_f${i}`, table: 'holding', address: 100 + i * 2, type: 'float32' })),
      ...Array.from({ length: 30 }, (_, i) => ({ variable: `mvr_u${i}`, table: 'input', address: i * 3, type: 'uint16' })),
      ...Array.from({ length: 30 }, (_, i) => ({ variable: `mvr_c${i}`, table: 'coil', address: i * 5 })),
    ];
    const plan = planSection(parseSection({ devices: [{ name: 'd', host: 'h', registers }] }));
    expect(plan.problems).toEqual([]);
    expect(plan.devices[0].blocks.map((b) => [b.table, b.start, b.count, b.values.length])).toEqual([
      ['coil', 0, 146, 30],
      ['holding', 100, 80, 40],
      ['input', 0, 88, 30],
    ]);
  });
});

describe('address notation', () => {
  it('resolves plain, 1-based, hex and Modicon addresses', () => {
    expect(resolveAddress(100, 0)).toEqual({ ok: true, table: undefined, protocolAddress: 100, modicon: false });
    expect(resolveAddress(100, 1)).toEqual({ ok: true, table: undefined, protocolAddress: 99, modicon: false });
    expect(resolveAddress('0x0064', 0)).toMatchObject({ ok: true, protocolAddress: 100 });
    expect(resolveAddress('40001', 0)).toEqual({ ok: true, table: 'holding', protocolAddress: 0, modicon: true });
    expect(resolveAddress('49999', 0)).toMatchObject({ ok: true, table: 'holding', protocolAddress: 9998 });
    expect(resolveAddress('465536', 0)).toMatchObject({ ok: true, table: 'holding', protocolAddress: 65535 });
    expect(resolveAddress('300101', 1)).toMatchObject({ ok: true, table: 'input', protocolAddress: 100 });
    expect(resolveAddress('10001', 0)).toMatchObject({ ok: true, table: 'discrete_input', protocolAddress: 0 });
    expect(resolveAddress('00001', 0)).toMatchObject({ ok: true, table: 'coil', protocolAddress: 0 });
    expect(resolveAddress('40000', 0)).toMatchObject({ ok: false });
    expect(resolveAddress('465537', 0)).toMatchObject({ ok: false });
    expect(resolveAddress(1.5, 0)).toMatchObject({ ok: false });
  });
});
