import { z } from 'zod';
import { checkMqttConnection, mqttConnectionFields } from '../config/mqtt-connection.js';
import { byteSize, durationMs } from '../config/units.js';
import { machineVariableId } from '../sources/common-schema.js';
import { alarmsSchema } from './alarm-config.js';
import { parseCondition, type Condition } from './condition.js';
import { EXTERNAL_ID_PATTERN, MAX_EXTERNAL_ID_CHARS, MAX_MACHINE_VARIABLES, MAX_TEXT_CHARS, SITE_ID_PATTERN } from './model.js';

/**
 * The `annotations:` section: operator annotations (interface §2.3, §4.1) from the HMI page, the
 * local API, an MQTT topic, the CLI and downtime detectors, queued in a durable outbox.
 * Absent section: the capability is off.
 */

const machineKey = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$/, { error: 'must be 1-40 letters, digits, "_" or "-" (starting with a letter or digit)' })
  .meta({ description: 'Short key of a configured machine, used in the local API, MQTT messages and the CLI', examples: ['press1'] });

const reasonText = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .meta({ description: 'A downtime reason as shown on a button and written at the start of the annotation text', examples: ['Tool change'] });

const reasonList = z.array(reasonText).max(30).meta({ description: 'Reason buttons' });

export const DEFAULT_REASONS = ['Material shortage', 'Tool change', 'Breakdown', 'Cleaning', 'Planned maintenance', 'No operator'];

const variableList = z
  .array(machineVariableId)
  .max(MAX_MACHINE_VARIABLES, { error: `at most ${MAX_MACHINE_VARIABLES} machine variables per annotation (§2.3)` });

const siteSchema = z
  .strictObject({
    id: z.string().regex(SITE_ID_PATTERN, { error: 'is not a site id (ste_...)' }).optional().meta({ description: 'Site id (ste_...)', examples: ['ste_01hplant'] }),
    external_id: z
      .string()
      .min(1)
      .max(MAX_EXTERNAL_ID_CHARS)
      .regex(EXTERNAL_ID_PATTERN, { error: 'must contain only letters, digits, "-" and "_" (§2.1)' })
      .optional()
      .meta({ description: 'The site\'s external id', examples: ['plant-a'] }),
  })
  .superRefine((s, ctx) => {
    // §2.2: a site reference is exactly one of {id} / {external_id}.
    if (s.id !== undefined && s.external_id !== undefined) ctx.addIssue({ code: 'custom', message: 'give either id or external_id, not both (§2.2)', input: undefined });
    if (s.id === undefined && s.external_id === undefined) ctx.addIssue({ code: 'custom', message: 'required setting is missing: give id (ste_...) or external_id', input: undefined });
  })
  .transform((s): { id: string } | { external_id: string } => (s.id !== undefined ? { id: s.id } : { external_id: s.external_id! }))
  .meta({ description: 'The site every annotation of this gateway belongs to (§2.3 `site`): {id: ste_...} or {external_id: ...}', examples: [{ external_id: 'plant-a' }] });

export const machineSchema = z
  .strictObject({
    key: machineKey,
    name: z.string().trim().min(1).max(80).optional().meta({ description: 'Name shown on the operator page (default: the key)', examples: ['Press 1'] }),
    machine_variables: variableList
      .default([])
      .meta({ description: 'Machine variables attached to this machine\'s downtime annotations (§2.3 machine_variables; all must be available at the site)', examples: [['mvr_press1_state', 'mvr_press1_speed']] }),
    reasons: reasonList.optional().meta({ description: 'Reason buttons for this machine (default: annotations.reasons)', examples: [['Die change', 'Jam']] }),
  })
  .meta({ description: 'A machine the operator page shows as a tile with downtime start/stop' });

const conditionSchema = z
  .string()
  .transform((text, ctx): Condition => {
    const c = parseCondition(text);
    if (!c) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(text)} is not a condition (write an operator and a number: "== 0", "!= 1", "< 5", ">= 2")`, input: text });
      return z.NEVER;
    }
    return c;
  })
  .meta({ description: 'When the variable means "down": ==, !=, <, <=, > or >= and a number', examples: ['== 0', '!= 1'] });

/** `{0: Stopped, 1: Running}`: YAML keys are text, so the numbers are checked and kept as numbers. */
const stateWords = z
  .record(z.string(), z.string().trim().min(1).max(40))
  .transform((raw, ctx): Array<[number, string]> => {
    const out: Array<[number, string]> = [];
    for (const [k, words] of Object.entries(raw)) {
      const n = k.trim() === '' ? NaN : Number(k);
      if (!Number.isFinite(n)) ctx.issues.push({ code: 'custom', path: [k], message: `${JSON.stringify(k)} is not a number (the keys are the values of the variable, e.g. 0, 1, 2)`, input: k });
      else out.push([n, words]);
    }
    if (out.length > 50) ctx.issues.push({ code: 'custom', message: `${out.length} states: at most 50`, input: raw });
    return out;
  })
  .meta({
    description:
      'What the variable\'s values mean, in the operator\'s words, shown on the operator page\'s tile instead of the condition (default: "Stopped" while the condition holds, "Running" otherwise)',
    examples: [{ 0: 'Stopped', 1: 'Running', 2: 'Setup', 3: 'Fault' }],
  });

export const detectorSchema = z
  .strictObject({
    machine: machineKey.meta({ description: 'Key of the configured machine (annotations.machines[].key) the downtime is about', examples: ['press1'] }),
    variable: machineVariableId.meta({ description: 'The machine-state variable watched (any source may deliver it)', examples: ['mvr_press1_state'] }),
    condition: conditionSchema,
    min_duration: durationMs({ min: 0, max: 30 * 86_400_000 })
      .default(60_000)
      .meta({ description: 'The condition must hold at least this long (by sample timestamps) for a downtime to be recorded; shorter stops are ignored', examples: ['60s', '5m'] }),
    text: z
      .string()
      .trim()
      .min(1)
      .max(MAX_TEXT_CHARS)
      .optional()
      .meta({ description: 'Annotation text (default: "Downtime detected: <variable> <condition> for at least <min_duration>")', examples: ['Press stopped (detected automatically)'] }),
    machine_variables: variableList.optional().meta({ description: 'Machine variables of the annotation (default: the machine\'s machine_variables)', examples: [['mvr_press1_state']] }),
    states: stateWords.optional(),
  })
  .meta({ description: 'A rule that turns a machine-state variable into range annotations' });

const mqttTopic = z
  .string()
  .min(1)
  .max(65_535)
  .superRefine((t, ctx) => {
    // MQTT §4.7.1: "#" only as the whole last level, "+" only as a whole level; no NUL (§1.5.4).
    const levels = t.split('/');
    const ok = !t.includes('\u0000') && levels.every((level, i) => (level.includes('#') ? level === '#' && i === levels.length - 1 : true) && (!level.includes('+') || level === '+'));
    if (!ok) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(t)} is not a valid topic filter: "#" only as the whole last level, "+" only as a whole level (MQTT §4.7)`, input: t });
  });

/** The broker settings of the trigger, shared with every MQTT connection (config/mqtt-connection.ts). */
const triggerConnection = mqttConnectionFields({
  url: { description: 'Broker address (mqtts:// uses the system CA store unless tls.ca is set)', examples: ['mqtt://broker.plant.local:1883'] },
  clientId: { description: 'MQTT client id; stable, so the broker keeps messages published while the gateway is away (default: <gateway.name>-annotations)', examples: ['line3-annotations'] },
  broker: 'the broker',
  passwordEnv: 'ANNOTATIONS_MQTT_PASSWORD',
  passphraseEnv: 'ANNOTATIONS_MQTT_KEY_PASSPHRASE',
  keepalive: { minMs: 0, defaultMs: 30_000, description: 'Keep-alive interval (MQTT §3.1.2.10); 0 turns it off' },
});

export const triggerSchema = z
  .strictObject({
    ...triggerConnection,
    topic: mqttTopic
      .default('edge-gateway/annotations')
      .meta({ description: 'Topic (or filter with + and #) a PLC or HMI publishes JSON to: {"action":"start"|"stop"|"cancel","machine":...,"reason":...,"text":...} or a full annotation', examples: ['plant/line3/annotations'] }),
    qos: z
      .number()
      .int()
      .min(0)
      .max(1)
      .default(1)
      .meta({ description: 'Subscription QoS: 1 (default) acknowledges a message only after it is stored in the outbox (redeliveries are recognised); 0 for publishers that cannot do QoS 1. QoS 2 is not offered: mqtt.js would acknowledge it before the outbox write' }),
    clean: z.boolean().default(false).meta({ description: 'Start a clean session on every connect; false keeps QoS 1 messages at the broker while the gateway is away' }),
    reconnect: durationMs({ min: 100, max: 600_000 }).default(5_000).meta({ description: 'Wait between reconnection attempts', examples: ['5s'] }),
    max_payload_bytes: byteSize({ min: 64, max: 1_000_000 }).default(65_536).meta({ description: 'Larger messages are refused (counted, logged, acknowledged)', examples: ['64KiB'] }),
  })
  .superRefine((c, ctx) => checkMqttConnection(c, ctx))
  .meta({ description: 'MQTT trigger: a topic where a PLC or HMI publishes downtime start/stop or full annotations as JSON' });

export const annotationsSectionSchema = z
  .strictObject({
    site: siteSchema,
    machines: z.array(machineSchema).max(200).default([]).meta({ description: 'Machines shown on the operator page, each with downtime start/stop' }),
    reasons: reasonList.default(DEFAULT_REASONS).meta({ description: 'Downtime reason buttons (per machine: machines[].reasons)', examples: [['Material shortage', 'Tool change', 'Breakdown']] }),
    detectors: z.array(detectorSchema).max(500).default([]).meta({ description: 'Automatic downtime detection from machine-state variables' }),
    mqtt: triggerSchema.optional(),
    alarms: alarmsSchema.optional(),
    hmi: z
      .strictObject({
        enabled: z.boolean().default(true).meta({ description: 'Serve the operator page at / of the local HTTP server' }),
        title: z.string().trim().min(1).max(80).default('Machine downtime').meta({ description: 'Title of the operator page', examples: ['Line 3'] }),
        recent: z.number().int().min(0).max(100).default(12).meta({ description: 'Recent entries listed on the page with their delivery state' }),
      })
      .prefault({})
      .meta({ description: 'Operator (HMI) page' }),
    retention: durationMs({ min: 3_600_000, max: 3_650 * 86_400_000 })
      .default(30 * 86_400_000)
      .meta({ description: 'Delivered and refused entries are kept this long for the list, then deleted; queued entries are never deleted', examples: ['30d'] }),
    max_age: durationMs({ min: 60_000, max: 100 * 365 * 86_400_000 })
      .default(5 * 365 * 86_400_000)
      .meta({ description: 'Annotation times (occurred_at, started_at, ended_at, the "at" of a downtime start/stop) older than this are refused as implausible: a PLC or panel whose clock was reset sends 1970 or 2000', examples: ['1825d'] }),
    max_ahead: durationMs({ min: 0, max: 365 * 86_400_000 })
      .default(86_400_000)
      .meta({ description: 'Annotation times further in the future than this are refused as implausible', examples: ['1d'] }),
  })
  .superRefine((s, ctx) => {
    const keys = new Map<string, number>();
    s.machines.forEach((m, i) => {
      const first = keys.get(m.key);
      if (first !== undefined) ctx.addIssue({ code: 'custom', path: ['machines', i, 'key'], message: `"${m.key}" is used twice (also machines[${first}])`, input: m.key });
      else keys.set(m.key, i);
    });
    const rules = new Map<string, number>();
    s.detectors.forEach((d, i) => {
      if (!keys.has(d.machine)) {
        const known = [...keys.keys()];
        ctx.addIssue({
          code: 'custom',
          path: ['detectors', i, 'machine'],
          message: `"${d.machine}" is not a configured machine (${known.length ? `annotations.machines keys: ${known.join(', ')}` : 'annotations.machines is empty'})`,
          input: d.machine,
        });
      }
      const fp = `${d.machine}|${d.variable}|${d.condition.text}`;
      const first = rules.get(fp);
      if (first !== undefined) ctx.addIssue({ code: 'custom', path: ['detectors', i], message: `same machine, variable and condition as detectors[${first}]`, input: undefined });
      else rules.set(fp, i);
    });
    // annotations.alarms: every machine named must be configured.
    const unknownMachine = (key: string) => `"${key}" is not a configured machine (${keys.size ? `annotations.machines keys: ${[...keys.keys()].join(', ')}` : 'annotations.machines is empty'})`;
    s.alarms?.servers.forEach((m, i) => {
      if (!keys.has(m.machine)) ctx.addIssue({ code: 'custom', path: ['alarms', 'servers', i, 'machine'], message: unknownMachine(m.machine), input: m.machine });
    });
    s.alarms?.rules.forEach((r, i) => {
      if (r.machine !== undefined && !keys.has(r.machine)) ctx.addIssue({ code: 'custom', path: ['alarms', 'rules', i, 'machine'], message: unknownMachine(r.machine), input: r.machine });
    });
  })
  .optional()
  .meta({ description: 'Operator annotations (§2.3): HMI page, local API, MQTT trigger, downtime detection, durable outbox. Absent: off' });

export type AnnotationsSection = z.output<typeof annotationsSectionSchema>;
export type AnnotationsConfig = NonNullable<AnnotationsSection>;
export type MachineConfig = AnnotationsConfig['machines'][number];
export type DetectorConfig = AnnotationsConfig['detectors'][number];
export type TriggerConfig = NonNullable<AnnotationsConfig['mqtt']>;
