import type { MetricsSubscriptionConfig } from '../config.js';
import { MACHINE_VARIABLE_ID, payloadVariableAllowed, type Decoded, type InboundMessage, type PayloadDecoder, type RawSample, type Refusal } from '../decoding.js';
import { coerceValue, parseTimestamp, shorten, type TimestampFormat } from '../values.js';
import { parseJsonPayload } from './json.js';

/**
 * The vendor metrics-array form:
 *
 *   {"timestamp": 1732263300000,
 *    "metrics": [{"name": "Packer1.Rate", "timestamp": 1732263300000, "value": 118, "datatype": "Int32"}, ...]}
 *
 * `name` maps to a machine variable directly when it is a variable id (`mvr_...`), else through
 * the `names` table. A metric's own timestamp wins over the message's, which wins over the arrival
 * time. `datatype` is informational: the value itself decides (numbers, booleans, numeric strings).
 */
export class MetricsDecoder implements PayloadDecoder {
  private readonly names: Map<string, string>;
  private readonly format: TimestampFormat;
  private readonly countUnknown: boolean;
  private readonly allowed: (variable: string) => boolean;

  constructor(cfg: MetricsSubscriptionConfig) {
    this.allowed = payloadVariableAllowed(cfg.payload_variables);
    this.names = new Map(Object.entries(cfg.names));
    this.format = cfg.timestamp_format;
    this.countUnknown = cfg.unknown_names === 'count';
  }

  decode(msg: InboundMessage): Decoded {
    const parsed = parseJsonPayload(msg.payload);
    if (!parsed.ok) return { samples: [], refusals: [parsed.refusal] };
    const doc = parsed.doc as { metrics?: unknown; timestamp?: unknown } | null;
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc) || !Array.isArray(doc.metrics)) {
      return { samples: [], refusals: [{ reason: 'malformed', detail: 'expected an object with a "metrics" list' }] };
    }
    const samples: RawSample[] = [];
    const refusals: Refusal[] = [];

    let messageTs: number | undefined;
    if (doc.timestamp !== undefined && doc.timestamp !== null) {
      const t = parseTimestamp(doc.timestamp, this.format, msg.receivedAt);
      if (!t.ok) return { samples: [], refusals: [{ reason: 'bad_timestamp', detail: `timestamp: ${t.detail}` }] };
      messageTs = t.ts;
    }

    for (let i = 0; i < doc.metrics.length; i++) {
      const m = doc.metrics[i] as { name?: unknown; value?: unknown; timestamp?: unknown } | null;
      if (m === null || typeof m !== 'object' || typeof m.name !== 'string' || m.name.length === 0) {
        refusals.push({ reason: 'malformed', detail: `metrics[${i}] has no "name"` });
        continue;
      }
      const direct = MACHINE_VARIABLE_ID.test(m.name);
      const variable = direct ? m.name : this.names.get(m.name);
      if (direct && !this.names.has(m.name) && !this.allowed(m.name)) {
        refusals.push({ reason: 'variable_not_allowed', detail: `metric ${JSON.stringify(shorten(m.name))} names a variable that is not in payload_variables` });
        continue;
      }
      if (!variable) {
        if (this.countUnknown) refusals.push({ reason: 'unknown_name', detail: `metric ${JSON.stringify(shorten(m.name))} is not in names` });
        continue;
      }
      if (!('value' in m)) {
        refusals.push({ reason: 'missing_value', detail: `metric ${JSON.stringify(shorten(m.name))} has no "value"`, variable });
        continue;
      }
      const c = coerceValue(m.value);
      if (!c.ok) {
        refusals.push({ reason: c.reason, detail: `metric ${JSON.stringify(shorten(m.name))}: ${c.detail}`, variable });
        continue;
      }
      let ts = messageTs;
      if (m.timestamp !== undefined && m.timestamp !== null) {
        const t = parseTimestamp(m.timestamp, this.format, msg.receivedAt);
        if (!t.ok) {
          refusals.push({ reason: 'bad_timestamp', detail: `metric ${JSON.stringify(shorten(m.name))}: ${t.detail}`, variable });
          continue;
        }
        ts = t.ts;
      }
      samples.push({ variable, value: c.value, ts });
    }
    return { samples, refusals };
  }
}
