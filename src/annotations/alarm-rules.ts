import type { ConditionEvent } from '../core/condition-event.js';
import { toIsoUtc } from '../core/time.js';
import { eventTypeId } from '../sources/opcua/events-config.js';
import type { AlarmCategory, AlarmRule, AlarmsConfig } from './alarm-config.js';
import { MAX_TEXT_CHARS } from './model.js';

/** A rule as matched: its place in the list and what it says about the downtime. */
export interface MatchedRule {
  index: number;
  reasonCode: string;
  text: string | null;
  category: AlarmCategory;
  machine: string | null;
  machineVariables: string[] | null;
}

function glob(pattern: string): RegExp {
  const escaped = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  return new RegExp(`^${escaped}$`, 's');
}

interface CompiledRule {
  index: number;
  rule: AlarmRule;
  server?: string;
  source?: RegExp;
  conditionName?: RegExp;
  eventType?: string;
  minSeverity?: number;
}

/** The rules of annotations.alarms, compiled once; the first matching rule wins. */
export class AlarmRules {
  private readonly rules: CompiledRule[];
  private readonly machineByServer: Map<string, string>;

  constructor(private readonly cfg: AlarmsConfig) {
    this.rules = cfg.rules.map((rule, index) => ({
      index,
      rule,
      server: rule.match.server,
      source: rule.match.source === undefined ? undefined : glob(rule.match.source),
      conditionName: rule.match.condition_name === undefined ? undefined : glob(rule.match.condition_name),
      eventType: rule.match.event_type === undefined ? undefined : eventTypeId(rule.match.event_type),
      minSeverity: rule.match.min_severity,
    }));
    this.machineByServer = new Map(cfg.servers.map((s) => [s.server, s.machine]));
  }

  get instantMinSeverity(): number | null {
    return this.cfg.instant_min_severity;
  }

  match(server: string, e: ConditionEvent): MatchedRule | null {
    const type = eventTypeId(e.eventType);
    for (const c of this.rules) {
      if (c.server !== undefined && c.server !== server) continue;
      if (c.source && !c.source.test(e.sourceName)) continue;
      if (c.conditionName && (e.conditionName === null || !c.conditionName.test(e.conditionName))) continue;
      if (c.eventType !== undefined && c.eventType !== type) continue;
      if (c.minSeverity !== undefined && e.severity < c.minSeverity) continue;
      return {
        index: c.index,
        reasonCode: c.rule.reason_code,
        text: c.rule.text ?? null,
        category: c.rule.category,
        machine: c.rule.machine ?? this.machineByServer.get(server) ?? null,
        machineVariables: c.rule.machine_variables ?? null,
      };
    }
    return null;
  }

  /** The machine an unmapped event of `server` is about (annotations.alarms.servers), or null. */
  machineOf(server: string): string | null {
    return this.machineByServer.get(server) ?? null;
  }
}

/** What the text of a condition's annotation is made of. */
export interface ConditionTextParts {
  reasonCode: string | null;
  ruleText: string | null;
  category: AlarmCategory | null;
  conditionName: string | null;
  eventTypeName: string | null;
  sourceName: string;
  severity: number;
  message: string;
}

/**
 * The annotation text (§2.3: at most 5000 characters): the reason first, then what the machine
 * said, then notes (an inferred end, an operator's overlapping downtime), e.g.
 * `JAM: Material jam at the infeed (unplanned). Alarm "Jam" on Press1, severity 700: Jam at station 2`.
 */
export function conditionText(p: ConditionTextParts, notes: readonly string[] = []): string {
  const what = p.conditionName ?? p.eventTypeName ?? 'event';
  const head = p.reasonCode !== null ? `${p.reasonCode}: ${p.ruleText ?? what}${p.category ? ` (${p.category})` : ''}. ` : '';
  const machine = `${p.reasonCode !== null ? 'Alarm' : 'Machine alarm'} "${what}" on ${p.sourceName || 'the server'}, severity ${p.severity}${p.message.trim() ? `: ${p.message.trim()}` : ''}`;
  const text = [head + machine, ...notes].join('. ').trim();
  return text.length > MAX_TEXT_CHARS ? `${text.slice(0, MAX_TEXT_CHARS - 1)}…` : text;
}

/** `08:14:03Z`-style times in notes: full ISO 8601 UTC, so a reader in another zone is not misled. */
export const noteTime = (ms: number): string => toIsoUtc(ms);
