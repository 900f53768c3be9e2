import { DataType, VariantArrayType, type DataValue } from 'node-opcua';
import type { RefusalReason, Sample } from '../../core/sample.js';
import { toSampleValue } from '../../core/sample.js';
import { deviceTimeProblem } from '../../core/time.js';

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

/**
 * OPC UA Part 4 §7.39 (StatusCode): the two top bits give the severity, 00 Good, 01 Uncertain,
 * 10/11 Bad.
 */
export function severityOf(code: number): 'good' | 'uncertain' | 'bad' {
  const top = code >>> 30;
  return top === 0 ? 'good' : top === 1 ? 'uncertain' : 'bad';
}

/** OPC UA DateTime minimum (1601-01-01) and "no timestamp" decode to dates before 1970. */
function usableTime(d: Date | null | undefined): number | undefined {
  if (!d) return undefined;
  const t = d.getTime();
  return Number.isFinite(t) && t > 0 ? t : undefined;
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
    const severity = severityOf(code);
    if (severity === 'bad') return { ok: false, reason: 'bad_status', detail: dv.statusCode.name };
    if (severity === 'uncertain' && binding.uncertain === 'refuse') return { ok: false, reason: 'uncertain_status', detail: dv.statusCode.name };
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
    const value = num * binding.scale + binding.offset;
    if (!Number.isFinite(value)) return { ok: false, reason: 'not_finite', detail: `${num} scaled` };
    const source = usableTime(dv.sourceTimestamp);
    const server = usableTime(dv.serverTimestamp);
    const deviceTime = binding.timestamp === 'source' ? source ?? server : binding.timestamp === 'server' ? server : undefined;
    if (deviceTime !== undefined) {
      const problem = deviceTimeProblem(deviceTime, gatewayNow);
      if (problem) return { ok: false, reason: 'bad_timestamp', detail: `${deviceTime === source ? 'SourceTimestamp' : 'ServerTimestamp'} ${problem}` };
    }
    const ts = deviceTime ?? gatewayNow;
    return { ok: true, sample: { variable: binding.variable, ts, value } };
  } catch (err) {
    return { ok: false, reason: 'decode_error', detail: err instanceof Error ? err.message : String(err) };
  }
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
