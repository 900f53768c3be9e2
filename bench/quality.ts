/**
 * Benchmark: what the quality of each variable (src/core/quality.ts) costs the per-value hot path
 * and the memory, at BENCH_VARIABLES variables (default 100,000).
 *
 *   opcua value   the OPC UA source's work per value before it is queued: decodeDataValue of a
 *                 node-opcua DataValue (real objects) and the sample it makes; "+ quality" adds the
 *                 table write the source does there (StatusCode severity, one byte, two doubles)
 *   mqtt value    the MQTT pipeline's per-sample work before quality: its arrival stamp kept by
 *                 variable name in a Map (message-pipeline.ts before); "+ quality" is what it does
 *                 now: the table's slot lookup by name, the write with its origin, and the arrival
 *                 stamp kept by slot in a typed array
 *   status read   one count of every variable by quality as /status, /metrics and the console read
 *                 it (age, link overlay), against one pass over the same Map of variables
 *   memory        heap of the table with every variable added and written once, per variable,
 *                 against the ids array the sources already hold
 *
 *   npx tsx bench/quality.ts
 *   BENCH_VARIABLES=10000 BENCH_ROUNDS=50 npx tsx bench/quality.ts
 */
import { DataType, DataValue, StatusCodes, Variant } from 'node-opcua';
import { Q_GOOD, QualityTable, qualityOfStatusCode } from '../src/core/quality.js';
import { decodeDataValue, type NodeBinding } from '../src/sources/opcua/decode.js';
import { envNumber, median, NOISY_MACHINE_NOTE, smokeBanner, table } from './lib.js';

const N = envNumber('BENCH_VARIABLES', 100_000, 2_000);
const ROUNDS = envNumber('BENCH_ROUNDS', 20, 3);
smokeBanner(`BENCH_VARIABLES ${N.toLocaleString('en-US')}, BENCH_ROUNDS ${ROUNDS}`);

const ids = Array.from({ length: N }, (_, i) => `mvr_bench_${i}`);
const bindings: NodeBinding[] = ids.map((variable, index) => ({ index, configuredId: `ns=1;i=${index}`, nodeId: `ns=1;i=${index}`, variable, scale: 1, offset: 0, timestamp: 'source', uncertain: 'forward', samplingInterval: 1000, queueSize: 10 }));
const now = Date.now();
const values = ids.map((_, i) => new DataValue({ value: new Variant({ dataType: DataType.Double, value: i * 0.5 }), statusCode: i % 100 === 0 ? StatusCodes.UncertainLastUsableValue : StatusCodes.Good, sourceTimestamp: new Date(now - 10), serverTimestamp: new Date(now - 5) }));

/** ns per value of `fn` over every variable, median of ROUNDS (after two warm-up rounds). */
function perValue(fn: () => void): number {
  const times: number[] = [];
  for (let r = 0; r < ROUNDS + 2; r++) {
    const t0 = process.hrtime.bigint();
    fn();
    const ns = Number(process.hrtime.bigint() - t0) / N;
    if (r >= 2) times.push(ns);
  }
  return median(times);
}

let sink = 0;
const opcuaBase = () => {
  const out: unknown[] = [];
  for (let i = 0; i < N; i++) {
    const d = decodeDataValue(bindings[i], values[i], now);
    if (d.ok) out.push(d.sample);
  }
  sink += out.length;
};
const opcuaTable = new QualityTable();
opcuaTable.reserve(N);
for (const id of ids) opcuaTable.add(id);
const opcuaWithQuality = () => {
  const out: unknown[] = [];
  for (let i = 0; i < N; i++) {
    const b = bindings[i];
    const dv = values[i];
    const d = decodeDataValue(b, dv, now);
    opcuaTable.set(b.index, d.ok ? qualityOfStatusCode(dv.statusCode?.value ?? 0) : 3, now);
    if (d.ok) out.push(d.sample);
  }
  sink += out.length;
};

const stamps = new Map<string, number>();
const stamp = (variable: string, at: number) => {
  const last = stamps.get(variable);
  const ts = last !== undefined && at <= last ? last + 1 : at;
  stamps.set(variable, ts);
  return ts;
};
let t = now;
const mqttBase = () => {
  t += 1_000;
  for (let i = 0; i < N; i++) sink += stamp(ids[i], t);
};
const mqttTable = new QualityTable();
for (const id of ids) mqttTable.slotFor(id);
const slotStamps = new Float64Array(N).fill(-Infinity);
const mqttWithQuality = () => {
  t += 1_000;
  for (let i = 0; i < N; i++) {
    const slot = mqttTable.slotFor(ids[i]);
    if (slot >= 0) mqttTable.setFrom(slot, Q_GOOD, t, 7);
    const last = slotStamps[slot];
    const ts = t <= last ? last + 1 : t;
    slotStamps[slot] = ts;
    sink += ts;
  }
};

const rows: Array<Record<string, string | number>> = [];
const pair = (what: string, base: () => void, gw: () => void, unit = 'ns/value') => {
  // Interleaved, so both see the same machine.
  const b1 = perValue(base);
  const g1 = perValue(gw);
  const b2 = perValue(base);
  const g2 = perValue(gw);
  const b = Math.min(b1, b2);
  const g = Math.min(g1, g2);
  rows.push({ what, unit, baseline: Number(b.toFixed(1)), 'with quality': Number(g.toFixed(1)), added: Number((g - b).toFixed(1)), ratio: Number((g / b).toFixed(3)) });
};

pair('opcua value', opcuaBase, opcuaWithQuality);
pair('mqtt value', mqttBase, mqttWithQuality);

// The status read: a whole count against one pass over a Map of as many variables.
const plain = new Map(ids.map((id, i) => [id, i]));
const passBase = () => {
  let n = 0;
  for (const v of plain.values()) n += v & 1;
  sink += n;
};
// A polled source's table (a period to age against: the worst case of a read).
const polled = new QualityTable();
polled.reserve(N);
const device = polled.addGroup('device', 1_000);
for (let i = 0; i < N; i++) polled.set(polled.add(ids[i], device), Q_GOOD, now);
const passQuality = () => {
  sink += polled.summary(now + 1_000).good;
};
pair('status read (whole table)', passBase, passQuality, 'ns/variable');

// Memory: a fresh table of N variables, every one written once.
function heap(): number {
  globalThis.gc?.();
  globalThis.gc?.();
  return process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
}
const h0 = heap();
const idsOnly: string[] = ids.slice();
const h1 = heap();
const fresh = new QualityTable();
fresh.reserve(N);
for (let i = 0; i < N; i++) fresh.set(fresh.add(ids[i]), Q_GOOD, now);
const h2 = heap();
rows.push({ what: 'memory', unit: 'bytes/variable', baseline: Number(((h1 - h0) / N).toFixed(1)), 'with quality': Number(((h2 - h0) / N).toFixed(1)), added: Number(((h2 - h1) / N).toFixed(1)), ratio: Number(((h2 - h0) / Math.max(1, h1 - h0)).toFixed(2)) });
fresh.slotOf(ids[0]); // the index by name: built when first looked up (MQTT at once, the console's first list)
const h3 = heap();
rows.push({ what: 'memory, with the name index', unit: 'bytes/variable', baseline: Number(((h1 - h0) / N).toFixed(1)), 'with quality': Number(((h3 - h0) / N).toFixed(1)), added: Number(((h3 - h1) / N).toFixed(1)), ratio: Number(((h3 - h0) / Math.max(1, h1 - h0)).toFixed(2)) });

console.log(`Quality per variable, ${N.toLocaleString('en-US')} variables, ${ROUNDS} rounds (best of two interleaved medians)${globalThis.gc ? '' : '; run with node --expose-gc for exact memory figures'}`);
console.log(table(rows));
console.log('baseline: opcua value = decode + sample; mqtt value = arrival stamp; status read = one pass over a Map; memory = the ids array alone.');
console.log(NOISY_MACHINE_NOTE);
if (sink === 42 && idsOnly.length === 0 && fresh.size === 0) console.log('');
