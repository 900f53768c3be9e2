import { DataType, getStatusCodeFromCode, VariantArrayType, type DataValue } from 'node-opcua';
import type { RefusalReason, Sample } from '../../core/sample.js';
import { toSampleValue } from '../../core/sample.js';
import { deviceTimeProblem, EARLIEST_TS, MAX_FUTURE_MS } from '../../core/time.js';
import type { DataChanges } from './data-change-decode.js';

/** What a configured node turns into once resolved against the server (one per valid node). */
export interface NodeBinding {
  /** Position in the config's `nodes` list. */
  index: number;
  /** Node id as configured (for logs and status). */
  configuredId: string;
  /** Resolved `ns=<index>;...` id sent to the server. */
  nodeId: string;
  variable: string;
  scale: number;
  offset: number;
  timestamp: 'source' | 'server' | 'gateway';
  uncertain: 'forward' | 'refuse';
  samplingInterval: number;
  queueSize: number;
  deadband?: { type: 'absolute' | 'percent'; value: number };
}

export type Decoded = { ok: true; sample: Sample } | { ok: false; reason: RefusalReason; detail: string };

/** Why a value was not forwarded (the rare path of `decodeColumn`). */
export class Refusal {
  readonly ok = false;
  constructor(
    readonly reason: RefusalReason,
    readonly detail: string,
  ) {}
}

/**
 * OPC UA Part 4 §7.39 (StatusCode): the two top bits give the severity, 00 Good, 01 Uncertain,
 * 10/11 Bad.
 */
export function severityOf(code: number): 'good' | 'uncertain' | 'bad' {
  const top = code >>> 30;
  return top === 0 ? 'good' : top === 1 ? 'uncertain' : 'bad';
}

/**
 * The Overflow bit (Part 4 §5.12.1.5, Part 4 §7.39 InfoBits): the server's queue of the monitored
 * item was full and it discarded at least one older value. Meaningful only with InfoType DataValue
 * (bits 10–11 = 01), as the server sets them together (node-opcua and open62541: 0x480).
 */
export function hasOverflowBit(code: number): boolean {
  return (code & 0xc80) === 0x480;
}

/** OPC UA DateTime minimum (1601-01-01) and "no timestamp" decode to dates before 1970. */
function usableTime(d: Date | null | undefined): number {
  if (!d) return NaN;
  const t = d.getTime();
  return Number.isFinite(t) && t > 0 ? t : NaN;
}

/**
 * Converts a DataValue into a sample, or says why not. Never throws: a server can send anything.
 *
 * - Bad status → refused `bad_status`; Uncertain → forwarded or refused `uncertain_status`.
 * - Booleans → 0/1; Int64/UInt64 (node-opcua gives [high, low]) → number; strings, arrays,
 *   structures → refused `not_numeric`; NaN/±Inf → refused `not_finite`.
 * - Timestamp: source → SourceTimestamp, server → ServerTimestamp, gateway → `gatewayNow`; a
 *   missing one falls back along source → server → gateway. A device timestamp before 2000 or more
 *   than 24 h ahead of the gateway clock → refused `bad_timestamp` (the rule MQTT applies too,
 *   core/time.ts `deviceTimeProblem`): a server clock a day off would otherwise put values where
 *   they shadow real ones until that time.
 */
export function decodeDataValue(binding: NodeBinding, dv: DataValue, gatewayNow: number): Decoded {
  try {
    const code = dv.statusCode?.value ?? 0;
    const status = statusRefusal(binding, code, () => dv.statusCode.name);
    if (status) return status;
    const variant = dv.value;
    if (!variant || variant.dataType === DataType.Null) return { ok: false, reason: 'not_numeric', detail: 'no value (Null)' };
    if (variant.arrayType !== undefined && variant.arrayType !== VariantArrayType.Scalar) return { ok: false, reason: 'not_numeric', detail: `array of ${DataType[variant.dataType]}` };
    let raw: unknown = variant.value;
    if ((variant.dataType === DataType.Int64 || variant.dataType === DataType.UInt64) && Array.isArray(raw) && raw.length === 2) {
      const [high, low] = raw as [number, number];
      raw = variant.dataType === DataType.Int64 ? (high | 0) * 4_294_967_296 + (low >>> 0) : (high >>> 0) * 4_294_967_296 + (low >>> 0);
    }
    const num = toSampleValue(raw);
    if (num === undefined) {
      if (typeof raw === 'number') return { ok: false, reason: 'not_finite', detail: String(raw) };
      return { ok: false, reason: 'not_numeric', detail: DataType[variant.dataType] ?? typeof raw };
    }
    const out = sampleOut();
    out.num = num;
    out.source = usableTime(dv.sourceTimestamp);
    out.server = usableTime(dv.serverTimestamp);
    const refused = sampleInto(out, binding, gatewayNow);
    return refused ?? { ok: true, sample: { variable: binding.variable, ts: out.ts, value: out.value } };
  } catch (err) {
    return { ok: false, reason: 'decode_error', detail: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * One value on its way through `decodeColumn`: the number and timestamps read from the columns,
 * then the sample's time and value. One object is reused for every value, and the hot path hands
 * it on rather than its numbers: a double passed to a function V8 did not inline is boxed, one heap
 * object per value again.
 */
export interface SampleOut {
  num: number;
  /** SourceTimestamp and ServerTimestamp, epoch ms; NaN when absent or unusable. */
  source: number;
  server: number;
  ts: number;
  value: number;
}

export function sampleOut(): SampleOut {
  return { num: 0.5, source: 0.5, server: 0.5, ts: 0.5, value: 0.5 };
}

/**
 * The same rules as `decodeDataValue` for value `i` of a notification read as columns
 * (data-change-decode.ts): writes the sample's time and value into `out` and returns null, or
 * says why not. The hot path of a subscription: no object per value.
 */
export function decodeColumn(out: SampleOut, binding: NodeBinding, c: DataChanges, i: number, gatewayNow: number): Refusal | null {
  const code = c.status[i];
  if (code !== 0) {
    const status = statusRefusal(binding, code, () => getStatusCodeFromCode(code).name);
    if (status) return status;
  }
  if (c.types[i] === 0) return new Refusal('not_numeric', 'no value (Null)');
  out.num = c.values[i];
  if (!Number.isFinite(out.num)) return new Refusal('not_finite', String(out.num));
  out.source = c.source[i] > 0 ? c.source[i] : NaN;
  out.server = c.server[i] > 0 ? c.server[i] : NaN;
  return sampleInto(out, binding, gatewayNow);
}

/**
 * Where a value's StatusCode decides whether it is forwarded: Bad never, Uncertain as the node's
 * `uncertain` setting says. The code itself stays with the value up to here.
 */
function statusRefusal(binding: NodeBinding, code: number, name: () => string): Refusal | null {
  const severity = severityOf(code);
  if (severity === 'bad') return new Refusal('bad_status', name());
  if (severity === 'uncertain' && binding.uncertain === 'refuse') return new Refusal('uncertain_status', name());
  return null;
}

/** Scale, offset and the timestamp rule (source/server/gateway, with its fallback and bounds): `out.num` to `out.ts`, `out.value`. */
function sampleInto(out: SampleOut, binding: NodeBinding, gatewayNow: number): Refusal | null {
  const value = out.num * binding.scale + binding.offset;
  if (!Number.isFinite(value)) return new Refusal('not_finite', `${out.num} scaled`);
  const source = out.source;
  const server = out.server;
  const deviceTime = binding.timestamp === 'source' ? (source === source ? source : server) : binding.timestamp === 'server' ? server : NaN;
  if (deviceTime === deviceTime) {
    // The bounds first (deviceTimeProblem words the refusal): a call per value would box its numbers.
    if (!(deviceTime >= EARLIEST_TS && deviceTime <= gatewayNow + MAX_FUTURE_MS)) {
      const problem = deviceTimeProblem(deviceTime, gatewayNow);
      if (problem) return new Refusal('bad_timestamp', `${deviceTime === source ? 'SourceTimestamp' : 'ServerTimestamp'} ${problem}`);
    }
    out.ts = deviceTime;
  } else out.ts = gatewayNow;
  out.value = value;
  return null;
}

/**
 * Built-in data types the gateway accepts (OPC UA Part 6 §5.1.2 ids): Boolean, the integer types,
 * Float and Double. Enumerations resolve to Int32 through the type hierarchy.
 */
const NUMERIC_BUILTINS = new Set<DataType>([
  DataType.Boolean,
  DataType.SByte,
  DataType.Byte,
  DataType.Int16,
  DataType.UInt16,
  DataType.Int32,
  DataType.UInt32,
  DataType.Int64,
  DataType.UInt64,
  DataType.Float,
  DataType.Double,
]);

export function isNumericBuiltin(t: DataType): boolean {
  return NUMERIC_BUILTINS.has(t);
}
