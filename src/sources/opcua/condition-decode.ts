import { DataType, NodeId, type Variant } from 'node-opcua';
import type { ConditionEvent, ConditionNotice, EventTimeSource } from '../../core/condition-event.js';
import { EVENT_QUEUE_OVERFLOW_EVENT_TYPE, eventTypeName, REFRESH_END_EVENT_TYPE, REFRESH_REQUIRED_EVENT_TYPE, REFRESH_START_EVENT_TYPE } from './events-config.js';

/**
 * Event fields the gateway selects (EventFilter select clauses, Part 4 §7.22.3), in this order.
 * Browse paths are relative to BaseEventType, which Part 4 §7.7.4 lets the server evaluate for
 * any event type; ConditionId is the condition node's NodeId attribute (Part 9 §5.5.2, Table 10),
 * which node-opcua's constructEventFilter builds from the name "ConditionId".
 */
export const SELECTED_FIELDS = [
  'EventId',
  'EventType',
  'SourceNode',
  'SourceName',
  'Time',
  'Message',
  'Severity',
  'ConditionId',
  'ConditionName',
  'BranchId',
  'Retain',
  'ActiveState.Id',
  'ActiveState.TransitionTime',
  'AckedState.Id',
  'ConfirmedState.Id',
  // Last, so the fields before keep their places: added as the stand-in for a null Time.
  'ReceiveTime',
] as const;

type Field = (typeof SELECTED_FIELDS)[number];
const INDEX = Object.fromEntries(SELECTED_FIELDS.map((f, i) => [f, i])) as Record<Field, number>;

/** Why an event was refused (label of gateway_alarm_events_refused_total). */
export type EventRefusal = 'missing_field' | 'wrong_type' | 'bad_severity';

export type Decoded =
  | { ok: true; notice: ConditionNotice }
  /** RefreshRequiredEvent (Part 9 §5.11.4): the server asks its clients for a ConditionRefresh. */
  | { ok: true; refreshRequired: true }
  /** EventQueueOverflowEvent (Part 4 §5.12.1.5): the server discarded events of this item. */
  | { ok: true; overflow: true }
  /** Refused; `conditionId` when the event still says which condition it was about. */
  | { ok: false; reason: EventRefusal; detail: string; conditionId: string | null };

/**
 * DateTime values at or before 1601-01-01 are OPC UA's "no time" (Part 6 §5.2.2.5: MinDateTime);
 * node-opcua decodes them as dates in 1601.
 */
const MIN_DATE_MS = Date.UTC(1601, 0, 2);

const INTEGER_TYPES = new Set([DataType.Byte, DataType.SByte, DataType.Int16, DataType.UInt16, DataType.Int32, DataType.UInt32, DataType.Int64, DataType.UInt64]);

class Refused extends Error {
  constructor(
    readonly reason: EventRefusal,
    readonly detail: string,
  ) {
    super(detail);
  }
}

function isNull(v: Variant | undefined): boolean {
  return !v || v.dataType === DataType.Null || v.value === null || v.value === undefined;
}

function typeName(v: Variant): string {
  return DataType[v.dataType] ?? String(v.dataType);
}

function wrongType(field: Field, v: Variant, expected: string): Refused {
  return new Refused('wrong_type', `${field} is ${typeName(v)}, expected ${expected}`);
}

function nodeIdText(field: Field, v: Variant | undefined, required: boolean): string | null {
  if (isNull(v)) {
    if (required) throw new Refused('missing_field', `${field} is missing`);
    return null;
  }
  if (v!.dataType !== DataType.NodeId && v!.dataType !== DataType.ExpandedNodeId) throw wrongType(field, v!, 'NodeId');
  const id = v!.value as NodeId;
  if (required && id.isEmpty?.()) throw new Refused('missing_field', `${field} is the null NodeId`);
  return id.toString();
}

function text(field: Field, v: Variant | undefined): string | null {
  if (isNull(v)) return null;
  if (v!.dataType === DataType.String) return v!.value as string;
  if (v!.dataType === DataType.LocalizedText) return ((v!.value as { text?: string | null }).text ?? '') || '';
  if (v!.dataType === DataType.QualifiedName) return (v!.value as { name?: string | null }).name ?? '';
  throw wrongType(field, v!, 'String or LocalizedText');
}

function bool(field: Field, v: Variant | undefined): boolean | null {
  if (isNull(v)) return null;
  if (v!.dataType !== DataType.Boolean) throw wrongType(field, v!, 'Boolean');
  return v!.value as boolean;
}

/**
 * A DateTime field as epoch ms; null when the server sent none or OPC UA's null time (MinDateTime,
 * which node-opcua decodes as a date in 1601). Another data type is malformed.
 */
function time(field: Field, v: Variant | undefined): number | null {
  if (isNull(v)) return null;
  if (v!.dataType !== DataType.DateTime) throw wrongType(field, v!, 'DateTime');
  const ms = (v!.value as Date).getTime?.();
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= MIN_DATE_MS ? ms : null;
}

type TimeField = 'Time' | 'ActiveState.TransitionTime' | 'ReceiveTime';
const EVENT_TIME_ORDER: readonly TimeField[] = ['Time', 'ActiveState.TransitionTime', 'ReceiveTime'];
/** The refresh markers are not conditions: no ActiveState. */
const MARKER_TIME_ORDER: readonly TimeField[] = ['Time', 'ReceiveTime'];

/**
 * The event's time. A null or missing Time is not a reason to lose the event (open62541's own
 * condition setters stamp 1601-01-01): it falls back, in order, to ActiveState/TransitionTime
 * (when the condition changed state), ReceiveTime (Part 5 §6.4.2: when the server received it from
 * the device) and the gateway's receive time, and says which one it took.
 */
function eventTime(f: (name: Field) => Variant | undefined, receivedAt: number, order: readonly TimeField[] = EVENT_TIME_ORDER): { time: number; timeSource: EventTimeSource } {
  for (const field of order) {
    const ms = time(field, f(field));
    if (ms !== null) return { time: ms, timeSource: field };
  }
  return { time: receivedAt, timeSource: 'gateway' };
}

const isOverflowType = (v: Variant | undefined): boolean =>
  !!v && (v.dataType === DataType.NodeId || v.dataType === DataType.ExpandedNodeId) && String(v.value) === EVENT_QUEUE_OVERFLOW_EVENT_TYPE;

/**
 * Part 4 §5.12.1.5: when the queue overflows the server inserts an EventQueueOverflowEvent. Its
 * EventType says so where the select clauses put it; open62541 sends a notification of one field,
 * the type's NodeId, whatever was selected.
 */
function isQueueOverflow(fields: readonly Variant[]): boolean {
  return isOverflowType(fields[INDEX.EventType]) || (fields.length < SELECTED_FIELDS.length && fields.some(isOverflowType));
}

/** The ConditionId of an event that is otherwise refused, when it has a readable one. */
function conditionIdOf(fields: readonly Variant[]): string | null {
  try {
    return nodeIdText('ConditionId', fields[INDEX.ConditionId], false);
  } catch {
    return null;
  }
}

/**
 * Decodes one event notification (the values of SELECTED_FIELDS) into a typed notice, or refuses
 * it naming the field. Structure only: whether a time is plausible is the consumer's call (it
 * knows annotations.max_age / max_ahead).
 */
export function decodeEventFields(fields: readonly Variant[], receivedAt: number): Decoded {
  const f = (name: Field) => fields[INDEX[name]];
  try {
    if (isQueueOverflow(fields)) return { ok: true, overflow: true };
    const eventType = nodeIdText('EventType', f('EventType'), true)!;
    if (eventType === REFRESH_START_EVENT_TYPE) return { ok: true, notice: { kind: 'refresh_start', at: eventTime(f, receivedAt, MARKER_TIME_ORDER).time } };
    if (eventType === REFRESH_END_EVENT_TYPE) return { ok: true, notice: { kind: 'refresh_end', at: eventTime(f, receivedAt, MARKER_TIME_ORDER).time } };
    if (eventType === REFRESH_REQUIRED_EVENT_TYPE) return { ok: true, refreshRequired: true };
    return { ok: true, notice: { kind: 'event', event: conditionEvent(f, eventType, receivedAt) } };
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    return { ok: false, reason: err instanceof Refused ? err.reason : 'wrong_type', detail, conditionId: conditionIdOf(fields) };
  }
}

/** The fields of a condition's (or a plain) event; throws Refused naming the field that is wrong. */
function conditionEvent(f: (name: Field) => Variant | undefined, eventType: string, receivedAt: number): ConditionEvent {
  const idVar = f('EventId');
  if (isNull(idVar)) throw new Refused('missing_field', 'EventId is missing');
  if (idVar!.dataType !== DataType.ByteString) throw wrongType('EventId', idVar!, 'ByteString');
  const id = idVar!.value as Buffer;
  if (id.length === 0) throw new Refused('missing_field', 'EventId is empty');

  const sevVar = f('Severity');
  if (isNull(sevVar)) throw new Refused('missing_field', 'Severity is missing');
  if (!INTEGER_TYPES.has(sevVar!.dataType)) throw wrongType('Severity', sevVar!, 'UInt16');
  const severity = Number(sevVar!.value);
  if (!Number.isInteger(severity) || severity < 1 || severity > 1000) throw new Refused('bad_severity', `Severity ${String(sevVar!.value)} is outside 1..1000`);

  const conditionId = nodeIdText('ConditionId', f('ConditionId'), false);
  const branchId = nodeIdText('BranchId', f('BranchId'), false);
  const sourceNode = nodeIdText('SourceNode', f('SourceNode'), false);
  return {
    eventId: id.toString('hex'),
    eventType,
    eventTypeName: eventTypeName(eventType),
    sourceNode,
    sourceName: text('SourceName', f('SourceName')) ?? sourceNode ?? '',
    ...eventTime(f, receivedAt),
    message: text('Message', f('Message')) ?? '',
    severity,
    conditionId,
    conditionName: text('ConditionName', f('ConditionName')),
    branch: branchId !== null && branchId !== 'ns=0;i=0',
    retain: bool('Retain', f('Retain')),
    active: bool('ActiveState.Id', f('ActiveState.Id')),
    activeTransitionTime: time('ActiveState.TransitionTime', f('ActiveState.TransitionTime')),
    acked: bool('AckedState.Id', f('AckedState.Id')),
    confirmed: bool('ConfirmedState.Id', f('ConfirmedState.Id')),
  };
}
