import type { JsonSubscriptionConfig } from '../config.js';
import { scaled, type Decoded, type InboundMessage, type PayloadDecoder, type RawSample, type Refusal } from '../decoding.js';
import { MISSING, parseJsonPath, readJsonPath, type ParsedPath } from '../json-path.js';
import { coerceValue, parseTimestamp, shorten, type TimestampFormat } from '../values.js';

interface CompiledTimestamp {
  path: ParsedPath;
  format: TimestampFormat;
}

interface CompiledValue {
  path: ParsedPath;
  variable: string;
  scale: number;
  offset: number;
  timestamp: CompiledTimestamp | null;
}

/** Parses a payload as JSON, or says why it is not JSON. Shared by the JSON and metrics forms. */
export function parseJsonPayload(payload: Buffer): { ok: true; doc: unknown } | { ok: false; refusal: Refusal } {
  if (payload.length === 0) return { ok: false, refusal: { reason: 'malformed', detail: 'empty payload' } };
  // toString() without arguments is UTF-8 and skips Node's encoding lookup (measurable per message).
  let text = payload.toString();
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1); // a BOM some Windows-based HMIs prepend
  try {
    return { ok: true, doc: JSON.parse(text) };
  } catch (err) {
    return { ok: false, refusal: { reason: 'malformed', detail: `not JSON (${shorten((err as Error).message, 80)})` } };
  }
}

export function compilePath(text: string): ParsedPath {
  const r = parseJsonPath(text);
  // The schema validated every path; reaching this means the schema and the parser disagree.
  if (!r.ok) throw new Error(`invalid JSON path ${JSON.stringify(text)}: ${r.problem}`);
  return r.path;
}

/**
 * JSON payloads: each configured path yields one variable's value; the timestamp comes from a path
 * of the message (or of the value), else from the arrival time.
 */
export class JsonDecoder implements PayloadDecoder {
  private readonly values: CompiledValue[];
  private readonly timestamp: CompiledTimestamp | null;

  constructor(cfg: JsonSubscriptionConfig) {
    const ts = (t: JsonSubscriptionConfig['timestamp']): CompiledTimestamp | null => (t ? { path: compilePath(t.path), format: t.format } : null);
    this.timestamp = ts(cfg.timestamp);
    this.values = cfg.values.map((v) => ({ path: compilePath(v.path), variable: v.variable, scale: v.scale, offset: v.offset, timestamp: ts(v.timestamp) }));
  }

  decode(msg: InboundMessage): Decoded {
    const parsed = parseJsonPayload(msg.payload);
    if (!parsed.ok) return { samples: [], refusals: [parsed.refusal] };
    const doc = parsed.doc;
    const samples: RawSample[] = [];
    const refusals: Refusal[] = [];

    let messageTs: number | undefined;
    if (this.timestamp) {
      const t = readTimestamp(doc, this.timestamp, msg.receivedAt);
      if (!t.ok) {
        // Without its timestamp no value of the message can be placed in time.
        return { samples: [], refusals: this.values.map(() => t.refusal) };
      }
      messageTs = t.ts;
    }

    for (const v of this.values) {
      const raw = readJsonPath(doc, v.path);
      if (raw === MISSING) {
        refusals.push({ reason: 'missing_value', detail: `no value at path ${v.path.text}`, variable: v.variable });
        continue;
      }
      const c = coerceValue(raw);
      if (!c.ok) {
        refusals.push({ reason: c.reason, detail: `${v.path.text}: ${c.detail}`, variable: v.variable });
        continue;
      }
      const value = scaled(c.value, v.scale, v.offset);
      if (!Number.isFinite(value)) {
        refusals.push({ reason: 'not_finite', detail: `${v.path.text}: ${c.value} scaled is not finite`, variable: v.variable });
        continue;
      }
      let ts = messageTs;
      if (v.timestamp) {
        const t = readTimestamp(doc, v.timestamp, msg.receivedAt);
        if (!t.ok) {
          refusals.push(t.refusal);
          continue;
        }
        ts = t.ts;
      }
      samples.push({ variable: v.variable, value, ts });
    }
    return { samples, refusals };
  }
}

function readTimestamp(doc: unknown, spec: CompiledTimestamp, now: number): { ok: true; ts: number } | { ok: false; refusal: Refusal } {
  const raw = readJsonPath(doc, spec.path);
  if (raw === MISSING) return { ok: false, refusal: { reason: 'bad_timestamp', detail: `no timestamp at path ${spec.path.text}` } };
  const t = parseTimestamp(raw, spec.format, now);
  if (!t.ok) return { ok: false, refusal: { reason: 'bad_timestamp', detail: `${spec.path.text}: ${t.detail}` } };
  return { ok: true, ts: t.ts };
}
