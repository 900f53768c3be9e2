import { z } from 'zod';
import { machineVariableId, sourceName } from '../sources/common-schema.js';
import { parseNodeId } from '../sources/opcua/node-id.js';
import { STANDARD_EVENT_TYPES } from '../sources/opcua/events-config.js';
import { MAX_MACHINE_VARIABLES } from './model.js';

/**
 * `annotations.alarms`: how machine conditions (OPC UA Alarms & Conditions from
 * `opcua.servers[].events`) become annotations (interface §2.3). A condition a rule maps becomes a
 * range annotation from the moment it became active to the moment it became inactive, with the
 * rule's reason code, text and category; an unmapped one at least `instant_min_severity` severe
 * becomes an instant annotation; the rest is ignored (counted).
 */

/** ISA-95-style downtime categories (IEC 62264-1 §B.3 production performance: planned/unplanned, starved, blocked). */
export const ALARM_CATEGORIES = ['planned', 'unplanned', 'starved', 'blocked'] as const;
export type AlarmCategory = (typeof ALARM_CATEGORIES)[number];

const machineKey = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/, { error: 'must be 1-40 letters, digits, "_" or "-" (starting with a letter or digit)' });

const pattern = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .meta({ description: 'Exact text, or a pattern where * stands for any characters', examples: ['Jam', 'Press1*'] });

const eventType = z.string().transform((raw, ctx) => {
  const t = raw.trim();
  if (STANDARD_EVENT_TYPES[t] !== undefined) return t;
  const p = parseNodeId(t);
  if ('problem' in p) {
    ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} is neither a standard event type name (OffNormalAlarmType, ...) nor a node id`, input: raw });
    return z.NEVER;
  }
  return t;
});

export const alarmRuleSchema = z
  .strictObject({
    match: z
      .strictObject({
        server: sourceName.optional().meta({ description: 'Name of the OPC UA server (opcua.servers[].name) the event came from' }),
        source: pattern.optional().meta({ description: 'SourceName of the event (the object it is about, e.g. Press1); * matches any characters', examples: ['Press1'] }),
        condition_name: pattern.optional().meta({ description: 'ConditionName of the alarm; * matches any characters', examples: ['Jam', 'Overtemp*'] }),
        event_type: eventType.optional().meta({ description: 'EventType, exactly (subtypes are not included): a standard name or a node id', examples: ['OffNormalAlarmType', 'ns=3;i=5001'] }),
        min_severity: z.number().int().min(1).max(1000).optional().meta({ description: 'Only events at least this severe (1-1000)', examples: [500] }),
      })
      .refine((m) => Object.values(m).some((v) => v !== undefined), { error: 'give at least one of server, source, condition_name, event_type, min_severity' })
      .meta({ description: 'Which conditions the rule is for: every given field must match' }),
    reason_code: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,39}$/, { error: 'must be 1-40 letters, digits, "_", ".", ":" or "-"' })
      .meta({ description: 'Downtime reason code, first in the annotation text', examples: ['JAM', 'E-OVERTEMP'] }),
    text: z.string().trim().min(1).max(500).optional().meta({ description: 'Reason text (default: the condition name)', examples: ['Material jam at the infeed'] }),
    category: z.enum(ALARM_CATEGORIES).default('unplanned').meta({ description: 'Downtime category: planned, unplanned, starved (no material from upstream) or blocked (downstream cannot take more)' }),
    machine: machineKey.optional().meta({ description: 'The configured machine (annotations.machines[].key) the downtime is about. Default: the machine servers[] gives the event\'s server', examples: ['press1'] }),
    machine_variables: z.array(machineVariableId).max(MAX_MACHINE_VARIABLES).optional().meta({ description: 'Variables of the annotation (default: the machine\'s machine_variables)' }),
  })
  .meta({ description: 'Maps matching conditions to a downtime reason; the first matching rule wins' });

export const alarmsSchema = z
  .strictObject({
    servers: z
      .array(
        z
          .strictObject({
            server: sourceName.meta({ description: 'An OPC UA server with events (opcua.servers[].name)', examples: ['press1'] }),
            machine: machineKey.meta({ description: 'The machine its alarms are about (annotations.machines[].key)', examples: ['press1'] }),
          })
          .meta({ description: 'The machine whose variables an OPC UA server\'s alarm annotations carry' }),
      )
      .max(200)
      .default([])
      .meta({ description: 'Which machine each server\'s alarms are about (for unmapped alarms and rules without machine)' }),
    rules: z.array(alarmRuleSchema).max(500).default([]).meta({ description: 'Conditions that mean downtime, with their reason; checked in order' }),
    instant_min_severity: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .nullable()
      .default(700)
      .meta({ description: 'An alarm no rule maps, at least this severe, becomes an instant annotation when it becomes active (1-1000; null: unmapped alarms are ignored)', examples: [700, null] }),
  })
  .meta({ description: 'Machine conditions (OPC UA Alarms & Conditions, opcua.servers[].events) into reason-coded annotations' });

export type AlarmsConfig = z.output<typeof alarmsSchema>;
export type AlarmRule = AlarmsConfig['rules'][number];
