import { z } from 'zod';
import { durationMs } from '../../config/units.js';
import { parseNodeId } from './node-id.js';

/**
 * `opcua.servers[].events`: an event subscription on the server (OPC UA Part 4 §7.22.3 EventFilter,
 * Part 9 Alarms & Conditions). Without it the source reads values only.
 *
 * Kept apart from config.ts, which it is added to as one optional field. Loaded with the config, so
 * it must not import node-opcua (seconds to load): standard event types are named from this table.
 */

/** Standard event and condition types of namespace 0 (Part 5 §6.4, Part 9 §5, §8): name → numeric id. */
export const STANDARD_EVENT_TYPES: Readonly<Record<string, number>> = {
  BaseEventType: 2041,
  SystemEventType: 2130,
  DeviceFailureEventType: 2131,
  ConditionType: 2782,
  DialogConditionType: 2830,
  AcknowledgeableConditionType: 2881,
  AlarmConditionType: 2915,
  LimitAlarmType: 2955,
  ExclusiveLimitAlarmType: 9341,
  ExclusiveLevelAlarmType: 9482,
  ExclusiveRateOfChangeAlarmType: 9623,
  ExclusiveDeviationAlarmType: 9764,
  NonExclusiveLimitAlarmType: 9906,
  NonExclusiveLevelAlarmType: 10060,
  NonExclusiveRateOfChangeAlarmType: 10214,
  NonExclusiveDeviationAlarmType: 10368,
  DiscreteAlarmType: 10523,
  OffNormalAlarmType: 10637,
  TripAlarmType: 10751,
  SystemOffNormalAlarmType: 11753,
  CertificateExpirationAlarmType: 13225,
  DiscrepancyAlarmType: 17080,
  InstrumentDiagnosticAlarmType: 18347,
  SystemDiagnosticAlarmType: 18496,
};

/** Part 9 §5.11: the three special events that bracket and request a ConditionRefresh. */
export const REFRESH_START_EVENT_TYPE = 'ns=0;i=2787';
export const REFRESH_END_EVENT_TYPE = 'ns=0;i=2788';
export const REFRESH_REQUIRED_EVENT_TYPE = 'ns=0;i=2789';
/** Part 4 §5.12.1.5: the server discarded events because the monitored item's queue was full. */
export const EVENT_QUEUE_OVERFLOW_EVENT_TYPE = 'ns=0;i=3035';

const NAME_BY_ID = new Map(Object.entries(STANDARD_EVENT_TYPES).map(([name, id]) => [`ns=0;i=${id}`, name]));

/** `OffNormalAlarmType` or a node id text → canonical node id text (`ns=0;i=10637`, `ns=2;s=MyAlarm`). */
export function eventTypeId(nameOrId: string): string {
  const known = STANDARD_EVENT_TYPES[nameOrId];
  if (known !== undefined) return `ns=0;i=${known}`;
  const p = parseNodeId(nameOrId);
  if ('problem' in p) return nameOrId;
  if ('uri' in p.namespace) return nameOrId.trim();
  return `ns=${p.namespace.index};${p.type}=${p.identifier}`;
}

/** The standard name of an event type node id text, or null. */
export function eventTypeName(nodeIdText: string): string | null {
  return NAME_BY_ID.get(eventTypeId(nodeIdText)) ?? null;
}

const nodeIdOrTypeName = z.string().transform((raw, ctx) => {
  const t = raw.trim();
  if (STANDARD_EVENT_TYPES[t] !== undefined) return t;
  const p = parseNodeId(t);
  if ('problem' in p) {
    ctx.issues.push({
      code: 'custom',
      message: `${JSON.stringify(raw)} is neither a standard event type (${Object.keys(STANDARD_EVENT_TYPES).join(', ')}) nor a node id (ns=<index>;i=<number>, nsu=<uri>;s=<name>)`,
      input: raw,
    });
    return z.NEVER;
  }
  return t;
});

const notifierId = z.string().transform((raw, ctx) => {
  const p = parseNodeId(raw);
  if ('problem' in p) {
    ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} ${p.problem}`, input: raw });
    return z.NEVER;
  }
  return raw.trim();
});

export const opcuaEventsSchema = z
  .strictObject({
    notifier: notifierId
      .default('i=2253')
      .meta({ description: 'The object whose events are subscribed (EventNotifier attribute): the Server object i=2253 (default, every event of the server) or an area or machine object', examples: ['i=2253', 'nsu=urn:acme:press;s=Press1'] }),
    types: z
      .array(nodeIdOrTypeName.meta({ description: 'A standard type name or a node id' }))
      .min(1)
      .max(50)
      .default(['AlarmConditionType'])
      .meta({
        description:
          'Event types received, subtypes included (where clause OfType, Part 4 §7.7.3): standard names such as AlarmConditionType, OffNormalAlarmType, ExclusiveLimitAlarmType, SystemEventType, or node ids of vendor types',
        examples: [['AlarmConditionType'], ['OffNormalAlarmType', 'ExclusiveLevelAlarmType', 'ns=3;i=5001']],
      }),
    min_severity: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(1)
      .meta({ description: 'Events less severe than this are filtered out on the server (where clause Severity >= value; 1 lowest, 1000 highest, Part 5 §6.4.2)', examples: [200] }),
    publishing_interval: durationMs({ min: 50, max: 60_000 }).default(500).meta({ description: 'Publishing interval of the event subscription', examples: ['500ms'] }),
    queue_size: z
      .number()
      .int()
      .min(10)
      .max(100_000)
      .default(10_000)
      .meta({
        description:
          'Events the server keeps for the gateway between publishes and during a short network cut (monitored item queue, Part 4 §5.12.1.5); older ones are discarded first, and the ConditionRefresh after the reconnect restores the state of every retained condition. A server may grant fewer (open62541: 100, node-opcua: 5000): the granted size is logged once and shown in the status; an overflow is counted (gateway_opcua_event_queue_overflows_total) and followed by a ConditionRefresh',
      }),
    refresh_retry: durationMs({ min: 1_000, max: 600_000 })
      .default(10_000)
      .meta({ description: 'Wait before a ConditionRefresh the server refused or that could not be stored is tried again', examples: ['10s'] }),
  })
  .meta({
    description:
      'Alarms & Conditions (OPC UA Part 9): subscribe to the server\'s events and hand alarm state changes to annotations.alarms, with a ConditionRefresh after every (re)connect. Selected fields: EventId, EventType, SourceNode, SourceName, Time, Message, Severity, ConditionId, ConditionName, BranchId, Retain, ActiveState, AckedState, ConfirmedState',
  });

export type OpcuaEventsConfig = z.output<typeof opcuaEventsSchema>;
