import { BinaryStream, DataChangeNotification, DataType, DiagnosticInfo, DataValue, MonitoredItemNotification, StatusCodes, Variant, VariantArrayType } from 'node-opcua';
import { describe, expect, it } from 'vitest';
import { dataChangesOf, installDataChangeDecoder } from '../../../src/sources/opcua/data-change-decode.js';
import { rng } from '../../helpers/random.js';

/**
 * The columnar decoder of DataChangeNotifications (data-change-decode.ts) against node-opcua's
 * own: the same bytes, encoded by node-opcua, read both ways must agree on every value, status and
 * timestamp; a notification it does not take is decoded by node-opcua as before; and whoever reads
 * `monitoredItems` of one it took gets exactly node-opcua's objects.
 */
installDataChangeDecoder();

function encode(items: MonitoredItemNotification[]): Buffer {
  const n = new DataChangeNotification({ monitoredItems: items });
  const stream = new BinaryStream(n.binaryStoreSize());
  n.encode(stream);
  return stream.buffer;
}

function decode(bytes: Buffer): DataChangeNotification {
  const n = new DataChangeNotification(null);
  const stream = new BinaryStream(bytes);
  n.decode(stream);
  expect(stream.length).toBe(bytes.length);
  return n;
}

const item = (clientHandle: number, value: Partial<ConstructorParameters<typeof DataValue>[0]> & object) => new MonitoredItemNotification({ clientHandle, value: new DataValue(value) });

describe('DataChangeNotification read as columns', () => {
  it('reads every numeric scalar type, the status and both timestamps as node-opcua does', () => {
    const t = new Date('2026-11-28T06:00:00.123Z');
    const values: Array<[DataType, number | boolean]> = [
      [DataType.Double, 12.345678901234],
      [DataType.Float, 1.5],
      [DataType.Float, 0.1],
      [DataType.Int32, -123_456],
      [DataType.UInt32, 4_000_000_000],
      [DataType.Int16, -300],
      [DataType.UInt16, 65_000],
      [DataType.SByte, -5],
      [DataType.Byte, 250],
      [DataType.Boolean, true],
      [DataType.Boolean, false],
      [DataType.Double, -0],
    ];
    const items = values.map(([dataType, value], i) => item(i + 1, { value: { dataType, value }, statusCode: i % 3 === 0 ? StatusCodes.GoodWithOverflowBit : StatusCodes.Good, sourceTimestamp: new Date(t.getTime() + i), serverTimestamp: new Date(t.getTime() + 1000 + i) }));
    items.push(item(100, { statusCode: StatusCodes.BadNodeIdUnknown }));
    items.push(item(101, { value: new Variant({ dataType: DataType.Null }), statusCode: StatusCodes.UncertainLastUsableValue, sourceTimestamp: t }));
    const bytes = encode(items);
    const n = decode(bytes);
    const c = dataChangesOf(n);
    expect(c).toBeDefined();
    expect(c!.count).toBe(items.length);
    for (let i = 0; i < items.length; i++) {
      const dv = items[i].value;
      expect(c!.handles[i]).toBe(items[i].clientHandle);
      expect(c!.status[i]).toBe(dv.statusCode.value);
      if (!dv.value || dv.value.dataType === DataType.Null) expect(c!.types[i]).toBe(0);
      else {
        expect(c!.types[i]).toBe(dv.value.dataType);
        const want = typeof dv.value.value === 'boolean' ? (dv.value.value ? 1 : 0) : dv.value.dataType === DataType.Float ? Math.fround(dv.value.value) : dv.value.value;
        expect(Object.is(c!.values[i], want)).toBe(true);
      }
      expect(c!.source[i]).toBe(dv.sourceTimestamp ? dv.sourceTimestamp.getTime() : NaN);
      expect(c!.server[i]).toBe(dv.serverTimestamp ? dv.serverTimestamp.getTime() : NaN);
    }
  });

  it('gives node-opcua its own objects, decoded from the same bytes, when something reads monitoredItems', () => {
    const t = new Date('2026-11-28T06:00:00.001Z');
    const items = [item(7, { value: { dataType: DataType.Double, value: 3.25 }, sourceTimestamp: t, sourcePicoseconds: 1_500, serverTimestamp: t, serverPicoseconds: 20 }), item(8, { value: { dataType: DataType.Int32, value: 9 }, statusCode: StatusCodes.UncertainInitialValue })];
    const bytes = encode(items);
    const fast = decode(bytes);
    expect(dataChangesOf(fast)).toBeDefined();
    const original = new DataChangeNotification({ monitoredItems: items });
    expect(JSON.parse(JSON.stringify(fast.monitoredItems))).toEqual(JSON.parse(JSON.stringify(original.monitoredItems)));
    expect(fast.monitoredItems![0].value.sourcePicoseconds).toBe(items[0].value.sourcePicoseconds);
    // A consumer may replace the list (the subscription reader hands node-opcua what is left).
    fast.monitoredItems = [];
    expect(fast.monitoredItems).toEqual([]);
  });

  it('leaves strings, arrays, 64-bit integers and diagnostic infos to node-opcua', () => {
    const cases = [
      item(1, { value: { dataType: DataType.String, value: 'x' } }),
      item(1, { value: new Variant({ dataType: DataType.Double, arrayType: VariantArrayType.Array, value: [1, 2] }) }),
      item(1, { value: new Variant({ dataType: DataType.Int64, arrayType: VariantArrayType.Scalar, value: [0, 5] }) }),
      item(1, { value: { dataType: DataType.DateTime, value: new Date() } }),
    ];
    for (const it of cases) {
      const n = decode(encode([item(2, { value: { dataType: DataType.Double, value: 1 } }), it]));
      expect(dataChangesOf(n)).toBeUndefined();
      expect(n.monitoredItems).toHaveLength(2);
      expect(n.monitoredItems![1].value.value.dataType).toBe(it.value.value.dataType);
    }
    const withDiagnostics = new DataChangeNotification({ monitoredItems: [item(1, { value: { dataType: DataType.Double, value: 1 } })], diagnosticInfos: [new DiagnosticInfo({ additionalInfo: 'x' })] });
    const stream = new BinaryStream(withDiagnostics.binaryStoreSize());
    withDiagnostics.encode(stream);
    const n = decode(stream.buffer);
    expect(dataChangesOf(n)).toBeUndefined();
    expect(n.diagnosticInfos?.[0].additionalInfo).toBe('x');
  });

  it('never reads past a truncated body: node-opcua decides what it is', () => {
    const bytes = encode([item(1, { value: { dataType: DataType.Double, value: 1 }, sourceTimestamp: new Date() }), item(2, { value: { dataType: DataType.Double, value: 2 } })]);
    for (let cut = 1; cut < bytes.length; cut += 3) {
      const n = new DataChangeNotification(null);
      let threw = false;
      try {
        n.decode(new BinaryStream(bytes.subarray(0, cut)));
      } catch {
        threw = true;
      }
      // Either node-opcua's decoder refused it, or it was not read as columns.
      if (!threw) expect(dataChangesOf(n)).toBeUndefined();
    }
  });

  it('agrees with node-opcua on random values and timestamps, 1601 to 9999 included', () => {
    const random = rng(37);
    const edges = [Date.UTC(1601, 0, 1), 0, -1, 1, Date.UTC(9999, 11, 31, 23, 59, 59, 999), Date.UTC(2026, 10, 28, 6, 0, 0, 999)];
    const items = Array.from({ length: 2_000 }, (_, i) => {
      const ms = i < edges.length ? edges[i] : Math.floor(random() * 2 ** 43) * (random() < 0.1 ? -1 : 1);
      return item(i + 1, { value: { dataType: DataType.Double, value: (random() - 0.5) * 10 ** Math.floor(random() * 30) }, sourceTimestamp: new Date(ms), serverTimestamp: new Date(ms + Math.floor(random() * 1000)) });
    });
    const bytes = encode(items);
    const c = dataChangesOf(decode(bytes))!;
    const slow = decode(bytes).monitoredItems!;
    for (let i = 0; i < items.length; i++) {
      expect(c.values[i]).toBe(slow[i].value.value.value);
      expect(c.source[i]).toBe(slow[i].value.sourceTimestamp!.getTime());
      expect(c.server[i]).toBe(slow[i].value.serverTimestamp!.getTime());
    }
  });
});
