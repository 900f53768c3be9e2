import { readFileSync } from 'node:fs';
import { DataType, LocalizedText, NodeId, Variant } from 'node-opcua';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/core/errors.js';
import { decodeEventFields, SELECTED_FIELDS } from '../../../src/sources/opcua/condition-decode.js';

/**
 * Issue 26: the decoding of event notifications (the select clauses of the gateway's EventFilter)
 * and the configuration of events and alarm rules. The end-to-end behaviour against a real server
 * is in test/annotations/alarms.test.ts.
 */

const now = Date.parse('2026-03-01T08:15:00Z');
type Fields = Partial<Record<(typeof SELECTED_FIELDS)[number], Variant>>;

function fields(over: Fields = {}): Variant[] {
  const good: Fields = {
    EventId: new Variant({ dataType: DataType.ByteString, value: Buffer.from('0a0b0c', 'hex') }),
    EventType: new Variant({ dataType: DataType.NodeId, value: NodeId.resolveNodeId('ns=0;i=10637') }),
    SourceNode: new Variant({ dataType: DataType.NodeId, value: NodeId.resolveNodeId('ns=2;s=Press1') }),
    SourceName: new Variant({ dataType: DataType.String, value: 'Press1' }),
    Time: new Variant({ dataType: DataType.DateTime, value: new Date(now) }),
    Message: new Variant({ dataType: DataType.LocalizedText, value: new LocalizedText({ text: 'Material jam' }) }),
    Severity: new Variant({ dataType: DataType.UInt16, value: 700 }),
    ConditionId: new Variant({ dataType: DataType.NodeId, value: NodeId.resolveNodeId('ns=2;s=Press1.Jam') }),
    ConditionName: new Variant({ dataType: DataType.String, value: 'Jam' }),
    BranchId: new Variant({ dataType: DataType.NodeId, value: NodeId.nullNodeId }),
    Retain: new Variant({ dataType: DataType.Boolean, value: true }),
    'ActiveState.Id': new Variant({ dataType: DataType.Boolean, value: true }),
    'ActiveState.TransitionTime': new Variant({ dataType: DataType.DateTime, value: new Date(now - 5) }),
    'AckedState.Id': new Variant({ dataType: DataType.Boolean, value: false }),
    'ConfirmedState.Id': new Variant({ dataType: DataType.Boolean, value: false }),
  };
  const all = { ...good, ...over };
  return SELECTED_FIELDS.map((f) => all[f] ?? new Variant({ dataType: DataType.Null }));
}
const nul = new Variant({ dataType: DataType.Null });

describe('condition event decoding', () => {
  it('decodes a complete alarm event', () => {
    const d = decodeEventFields(fields(), now + 10);
    expect(d).toEqual({
      ok: true,
      notice: {
        kind: 'event',
        event: {
          eventId: '0a0b0c',
          eventType: 'ns=0;i=10637',
          eventTypeName: 'OffNormalAlarmType',
          sourceNode: 'ns=2;s=Press1',
          sourceName: 'Press1',
          time: now,
          timeSource: 'Time',
          message: 'Material jam',
          severity: 700,
          conditionId: 'ns=2;s=Press1.Jam',
          conditionName: 'Jam',
          branch: false,
          retain: true,
          active: true,
          activeTransitionTime: now - 5,
          acked: false,
          confirmed: false,
        },
      },
    });
  });

  it('refuses malformed events naming the field and the reason', () => {
    const refusal = (over: Fields) => {
      const d = decodeEventFields(fields(over), now);
      return d.ok ? null : [d.reason, d.detail];
    };
    // A refused event still names its condition (a refresh that sent it has mentioned it), when it can.
    const refused = decodeEventFields(fields({ Severity: new Variant({ dataType: DataType.UInt16, value: 1500 }) }), now);
    expect(refused).toMatchObject({ ok: false, reason: 'bad_severity', conditionId: 'ns=2;s=Press1.Jam' });
    expect(decodeEventFields(fields({ EventId: nul, ConditionId: new Variant({ dataType: DataType.String, value: 'Jam' }) }), now)).toMatchObject({ ok: false, conditionId: null });
    expect(refusal({ EventId: nul })).toEqual(['missing_field', 'EventId is missing']);
    expect(refusal({ EventId: new Variant({ dataType: DataType.ByteString, value: Buffer.alloc(0) }) })).toEqual(['missing_field', 'EventId is empty']);
    expect(refusal({ EventId: new Variant({ dataType: DataType.String, value: 'x' }) })).toEqual(['wrong_type', 'EventId is String, expected ByteString']);
    expect(refusal({ EventType: nul })).toEqual(['missing_field', 'EventType is missing']);
    expect(refusal({ Time: new Variant({ dataType: DataType.String, value: 'yesterday' }) })).toEqual(['wrong_type', 'Time is String, expected DateTime']);
    expect(refusal({ Severity: nul })).toEqual(['missing_field', 'Severity is missing']);
    expect(refusal({ Severity: new Variant({ dataType: DataType.UInt16, value: 0 }) })).toEqual(['bad_severity', 'Severity 0 is outside 1..1000']);
    expect(refusal({ Severity: new Variant({ dataType: DataType.Double, value: 500 }) })).toEqual(['wrong_type', 'Severity is Double, expected UInt16']);
    expect(refusal({ 'ActiveState.Id': new Variant({ dataType: DataType.String, value: 'Active' }) })).toEqual(['wrong_type', 'ActiveState.Id is String, expected Boolean']);
    expect(refusal({ ConditionId: new Variant({ dataType: DataType.String, value: 'Jam' }) })).toEqual(['wrong_type', 'ConditionId is String, expected NodeId']);
  });

  it('falls back from a null or missing Time to ActiveState/TransitionTime, ReceiveTime, then the gateway\'s receive time, and says which', () => {
    const minDate = new Variant({ dataType: DataType.DateTime, value: new Date(Date.UTC(1601, 0, 1)) });
    const received = new Variant({ dataType: DataType.DateTime, value: new Date(now - 40) });
    const timeOf = (over: Fields) => {
      const d = decodeEventFields(fields(over), now + 10);
      return d.ok && 'notice' in d && d.notice.kind === 'event' ? [d.notice.event.time, d.notice.event.timeSource, d.notice.event.activeTransitionTime] : d;
    };
    expect(timeOf({ ReceiveTime: received })).toEqual([now, 'Time', now - 5]);
    expect(timeOf({ Time: minDate, ReceiveTime: received })).toEqual([now - 5, 'ActiveState.TransitionTime', now - 5]);
    expect(timeOf({ Time: nul, ReceiveTime: received })).toEqual([now - 5, 'ActiveState.TransitionTime', now - 5]);
    // open62541 as its tutorial uses it: Time 1601, no TransitionTime, a real ReceiveTime.
    expect(timeOf({ Time: minDate, 'ActiveState.TransitionTime': nul, ReceiveTime: received })).toEqual([now - 40, 'ReceiveTime', null]);
    expect(timeOf({ Time: minDate, 'ActiveState.TransitionTime': minDate, ReceiveTime: minDate })).toEqual([now + 10, 'gateway', null]);
    expect(timeOf({ Time: nul, 'ActiveState.TransitionTime': nul })).toEqual([now + 10, 'gateway', null]);
  });

  it('recognises an EventQueueOverflowEvent, whatever the server put in the fields', () => {
    const overflowType = new Variant({ dataType: DataType.NodeId, value: NodeId.resolveNodeId('ns=0;i=3035') });
    // As the select clauses ask (EventType in its place) ...
    expect(decodeEventFields(fields({ EventType: overflowType, ConditionId: nul, Severity: nul }), now)).toEqual({ ok: true, overflow: true });
    // ... and as open62541 sends it: one field, the type's NodeId.
    expect(decodeEventFields([overflowType], now)).toEqual({ ok: true, overflow: true });
  });

  it('reads the refresh markers, the refresh request, branches and plain events', () => {
    const type = (id: string) => ({ EventType: new Variant({ dataType: DataType.NodeId, value: NodeId.resolveNodeId(id) }) });
    expect(decodeEventFields(fields(type('ns=0;i=2787')), now)).toEqual({ ok: true, notice: { kind: 'refresh_start', at: now } });
    expect(decodeEventFields(fields({ ...type('ns=0;i=2788'), Time: nul }), now + 1)).toEqual({ ok: true, notice: { kind: 'refresh_end', at: now + 1 } });
    expect(decodeEventFields(fields(type('ns=0;i=2789')), now)).toEqual({ ok: true, refreshRequired: true });
    const branch = decodeEventFields(fields({ BranchId: new Variant({ dataType: DataType.NodeId, value: NodeId.resolveNodeId('ns=2;i=77') }) }), now);
    expect(branch.ok && 'notice' in branch && branch.notice.kind === 'event' && branch.notice.event.branch).toBe(true);
    // A plain event (a SystemEventType): no condition fields at all.
    const plain = decodeEventFields(fields({ ...type('ns=0;i=2130'), ConditionId: nul, ConditionName: nul, BranchId: nul, Retain: nul, 'ActiveState.Id': nul, 'ActiveState.TransitionTime': nul, 'AckedState.Id': nul, 'ConfirmedState.Id': nul }), now);
    expect(plain).toMatchObject({ ok: true, notice: { event: { eventTypeName: 'SystemEventType', conditionId: null, active: null, branch: false, activeTransitionTime: null } } });
  });
});

describe('events and alarm rules in the configuration', () => {
  process.env.ALARM_CFG_TEST_SECRET = 'svc-secret';
  const base = {
    service: { base_url: 'http://127.0.0.1:9/tracking/v1', auth_url: 'http://127.0.0.1:9', organisation_id: 'org_demo', auth: { mode: 'client_credentials', client_id: 'gw', client_secret: { env: 'ALARM_CFG_TEST_SECRET' } } },
  };
  const server = (over: Record<string, unknown> = {}) => ({ name: 'press1', endpoint: 'opc.tcp://10.0.0.5:4840', events: {}, ...over });
  const annotations = (alarms: Record<string, unknown> = {}) => ({ site: { external_id: 'plant-a' }, machines: [{ key: 'press1' }], alarms });
  const problems = (raw: Record<string, unknown>): string[] => {
    try {
      validateConfig({ ...base, ...raw });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).problems;
    }
    return [];
  };

  it('takes a server with events only, with the documented defaults', () => {
    const { config } = validateConfig({ ...base, opcua: { servers: [server()] }, annotations: annotations({ servers: [{ server: 'press1', machine: 'press1' }] }) });
    expect(config.opcua.servers[0].nodes).toEqual([]);
    expect(config.opcua.servers[0].events).toEqual({ notifier: 'i=2253', types: ['AlarmConditionType'], min_severity: 1, publishing_interval: 500, queue_size: 10_000, refresh_retry: 10_000 });
    expect(config.annotations!.alarms).toEqual({ servers: [{ server: 'press1', machine: 'press1' }], rules: [], instant_min_severity: 700 });
  });

  it('the example file config/examples/alarms.yaml is valid', () => {
    process.env.OPCUA_PRESS1_PASSWORD ??= 'example-password';
    const doc = parse(readFileSync(new URL('../../../config/examples/alarms.yaml', import.meta.url), 'utf8')) as Record<string, unknown>;
    const { config } = validateConfig({ ...base, ...doc });
    expect(config.opcua.servers.map((s) => [s.name, s.events?.types])).toEqual([
      ['press1', ['AlarmConditionType']],
      ['oven-plc', ['OffNormalAlarmType', 'ExclusiveLimitAlarmType']],
    ]);
    expect(config.annotations!.alarms!.rules.map((r) => [r.reason_code, r.category])).toEqual([
      ['JAM', 'unplanned'],
      ['OVERTEMP', 'unplanned'],
      ['STARVED', 'starved'],
      ['OVEN-TEMP', 'unplanned'],
    ]);
  });

  it('names the setting and the value of every mistake', () => {
    expect(problems({ opcua: { servers: [server({ events: undefined })] } }).join('\n')).toMatch(/opcua\.servers\[0\]\.nodes: lists no node: give at least one node, or configure events/);
    expect(problems({ opcua: { servers: [server()] } }).join('\n')).toMatch(/opcua\.servers\[0\]\.events: needs annotations\.alarms/);
    expect(problems({ opcua: { servers: [server({ events: { types: ['AlarmType'] } })] }, annotations: annotations() }).join('\n')).toMatch(/opcua\.servers\[0\]\.events\.types\[0\]: "AlarmType" is neither a standard event type \(BaseEventType, .*\) nor a node id/);
    expect(problems({ opcua: { servers: [server({ events: { min_severity: 1001 } })] }, annotations: annotations() }).join('\n')).toMatch(/opcua\.servers\[0\]\.events\.min_severity/);
    const p = problems({
      opcua: { servers: [server()] },
      annotations: annotations({
        servers: [{ server: 'press2', machine: 'press9' }],
        rules: [{ match: {}, reason_code: 'JAM' }, { match: { condition_name: 'Jam' }, reason_code: 'has space', category: 'broken' }, { match: { server: 'nope' }, reason_code: 'X', machine: 'lathe' }],
      }),
    }).join('\n');
    expect(p).toMatch(/annotations\.alarms\.rules\[0\]\.match: give at least one of server, source, condition_name, event_type, min_severity/);
    expect(p).toMatch(/annotations\.alarms\.rules\[1\]\.reason_code: .*"has space"|annotations\.alarms\.rules\[1\]\.reason_code: must be 1-40/);
    expect(p).toMatch(/annotations\.alarms\.rules\[1\]\.category: "broken" is not one of planned, unplanned, starved, blocked/);
  });

  it('checks the servers and machines the rules name against the rest of the file', () => {
    const p = problems({
      opcua: { servers: [server()] },
      annotations: annotations({ servers: [{ server: 'press2', machine: 'press1' }], rules: [{ match: { server: 'nope' }, reason_code: 'X', machine: 'lathe' }] }),
    }).join('\n');
    expect(p).toMatch(/annotations\.alarms\.rules\[0\]\.machine: "lathe" is not a configured machine/);
    expect(problems({ opcua: { servers: [server()] }, annotations: annotations({ servers: [{ server: 'press1', machine: 'press9' }] }) }).join('\n')).toMatch(/annotations\.alarms\.servers\[0\]\.machine: "press9" is not a configured machine \(annotations\.machines keys: press1\)/);
    const q = problems({ opcua: { servers: [server()] }, annotations: annotations({ servers: [{ server: 'press2', machine: 'press1' }], rules: [{ match: { server: 'nope' }, reason_code: 'X' }] }) }).join('\n');
    expect(q).toMatch(/annotations\.alarms\.servers\[0\]\.server: "press2" is not an OPC UA server with events .*those are press1/);
    expect(q).toMatch(/annotations\.alarms\.rules\[0\]\.match\.server: "nope" is not an OPC UA server with events/);
  });
});
