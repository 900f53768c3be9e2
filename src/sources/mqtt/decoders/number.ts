import type { NumberSubscriptionConfig } from '../config.js';
import { scaled, type Decoded, type InboundMessage, type PayloadDecoder } from '../decoding.js';
import { shorten, coerceText } from '../values.js';

/**
 * Plain payloads: the whole payload is one value written as text (`42.5`, `-3`, `1e3`, `true`).
 * The variable is fixed for the subscription or picked from a topic level through a table.
 */
export class NumberDecoder implements PayloadDecoder {
  private readonly table: Map<string, string> | null;

  constructor(private readonly cfg: NumberSubscriptionConfig) {
    this.table = cfg.variable_from_topic ? new Map(Object.entries(cfg.variable_from_topic.variables)) : null;
  }

  decode(msg: InboundMessage): Decoded {
    let variable = this.cfg.variable;
    if (!variable && this.table && this.cfg.variable_from_topic) {
      const level = this.cfg.variable_from_topic.level;
      const key = msg.topic.split('/')[level];
      variable = key === undefined ? undefined : this.table.get(key);
      if (!variable) {
        return { samples: [], refusals: [{ reason: 'unknown_name', detail: `topic level ${level} ${key === undefined ? 'is missing' : JSON.stringify(shorten(key))} is not in variable_from_topic.variables` }] };
      }
    }
    if (!variable) return { samples: [], refusals: [{ reason: 'unknown_name', detail: 'no variable configured' }] };
    if (msg.payload.length === 0) return { samples: [], refusals: [{ reason: 'malformed', detail: 'empty payload' }] };
    const v = coerceText(msg.payload.toString());
    if (!v.ok) return { samples: [], refusals: [{ reason: v.reason, detail: v.detail, variable }] };
    const value = scaled(v.value, this.cfg.scale, this.cfg.offset);
    if (!Number.isFinite(value)) return { samples: [], refusals: [{ reason: 'not_finite', detail: `${v.value} scaled is not finite`, variable }] };
    return { samples: [{ variable, value, ts: undefined }], refusals: [] };
  }
}
