import { DataType } from 'node-opcua';
import { validateConfig } from '../../src/config/load.js';
import { testConfigInput } from '../helpers/gateway.js';
import { gatewaySections } from './alarm-rig.js';
import { afterEach, describe, expect, it } from 'vitest';
import { toIsoUtc } from '../../src/core/time.js';
import { delay, holdsFor, waitFor } from '../helpers/wait.js';
import { metricValue } from '../sources/opcua/helpers.js';
import { startTcpProxy } from '../sources/opcua/tcp-proxy.js';
import { connectHmi, startRig, type Rig } from './alarm-rig.js';

/**
 * Issue 26: machine conditions (OPC UA Alarms & Conditions) into reason-coded annotations, against
 * a real node-opcua server with real AlarmConditionType / OffNormalAlarmType instances, a real
 * gateway (SQLite outbox) and the emulator over HTTP.
 */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

async function rig(options: Parameters<typeof startRig>[0] = {}): Promise<Rig> {
  const r = await startRig(options);
  cleanup.push(() => r.close());
  return r;
}

type Upstream = { external_id: string; type: string; started_at?: string; ended_at?: string; occurred_at?: string; text: string; machine_variables: Array<{ id: string }> };
const upstream = (r: Rig) => r.emu.annotations() as unknown as Upstream[];
const upstreamAlarms = (r: Rig) => upstream(r).filter((a) => a.external_id.includes('-alarm'));

async function openAlarm(r: Rig, name: string): Promise<any> {
  return waitFor(async () => (await r.api('/api/annotations')).open_alarms.find((a: any) => a.alarm.condition_name === name), { timeoutMs: 20_000, what: `${name} open in the console JSON` });
}

describe('machine conditions into annotations (real OPC UA alarms)', () => {
  it('activate, acknowledge, confirm, deactivate: one range annotation with the server\'s times, the states in the console JSON, no duplicate after a ConditionRefresh', async () => {
    const r = await rig();
    await r.startGateway();
    const jam = r.sim.alarms!.jam;
    jam.activate();
    const activeSince = jam.transitionTime()!;
    const open = await openAlarm(r, 'Jam');
    expect(open.alarm).toMatchObject({ active: true, acked: false, confirmed: false, reason_code: 'JAM', category: 'unplanned', active_since: toIsoUtc(activeSince), record: 'open' });
    expect(open.origin_kind).toBe('alarm');

    // The operator acknowledges and confirms from an HMI (Part 9 §5.7.3 Acknowledge, §5.7.4 Confirm).
    const hmi = await connectHmi(r.sim.endpointUrl);
    cleanup.push(() => hmi.close());
    expect(await hmi.acknowledge(jam.conditionId, jam.eventId())).toBe('Good');
    await waitFor(async () => (await openAlarm(r, 'Jam')).alarm.acked === true, { timeoutMs: 20_000, what: 'acknowledged in the console JSON' });
    expect(await hmi.confirm(jam.conditionId, jam.eventId())).toBe('Good');
    await waitFor(async () => (await openAlarm(r, 'Jam')).alarm.confirmed === true, { timeoutMs: 20_000, what: 'confirmed in the console JSON' });
    // Acknowledged and confirmed, the range is still open: the machine is still jammed.
    expect(upstreamAlarms(r)).toHaveLength(0);

    await delay(50);
    jam.deactivate();
    const endedAt = jam.transitionTime()!;
    expect(endedAt).toBeGreaterThan(activeSince);
    const sent = await waitFor(() => upstreamAlarms(r).find((a) => a.type === 'range'), { timeoutMs: 20_000, what: 'the range annotation upstream' });
    expect(sent.started_at).toBe(toIsoUtc(activeSince));
    expect(sent.ended_at).toBe(toIsoUtc(endedAt));
    expect(sent.text).toMatch(/^JAM: Material jam at the infeed \(unplanned\)\. Alarm "Jam" on .*Press1, severity 700: Material jam at the infeed$/);
    expect(sent.machine_variables.map((v) => v.id)).toEqual(['mvr_press1_state', 'mvr_press1_speed']);

    const list = await r.api('/api/annotations');
    expect(list.open_alarms).toHaveLength(0);
    const entry = list.annotations.find((a: any) => a.external_id === sent.external_id);
    expect(entry).toMatchObject({ origin: 'alarm', origin_kind: 'alarm', machine: 'press1' });
    expect(entry.alarm).toMatchObject({ record: 'closed', active: false, acked: true, confirmed: true, end_inferred: null, ended_at: toIsoUtc(endedAt), condition_id: jam.conditionId, event_type_name: 'OffNormalAlarmType' });

    // A refresh (asked by another client: node-opcua resends to every subscription) changes nothing.
    const refreshes = r.events().refreshes.ok;
    expect(await hmi.refresh()).toBe('Good');
    await holdsFor(() => upstreamAlarms(r).length === 1, { forMs: 1_000, what: 'one alarm annotation upstream after the refresh' });
    expect(r.gw!.handle.annotations!.store.counts().queued + r.gw!.handle.annotations!.store.counts().delivered).toBe(1);
    expect(r.events().refreshes.ok).toBe(refreshes);
  }, 90_000);

  it('keeps overlapping causes of one machine apart, and records an unmapped severe alarm as an instant', async () => {
    const r = await rig({ bulkAlarms: 1 });
    await r.startGateway(undefined, { annotations: { alarms: { servers: [{ server: 'press1', machine: 'press1' }], rules: [{ match: { condition_name: 'Jam' }, reason_code: 'JAM' }, { match: { condition_name: 'Overtemperature' }, reason_code: 'OVERTEMP', category: 'planned' }], instant_min_severity: 500 } } });
    const { jam, overtemperature } = r.sim.alarms!;
    jam.activate();
    const jamFrom = jam.transitionTime()!;
    await delay(30);
    overtemperature.activate();
    const otFrom = overtemperature.transitionTime()!;
    r.sim.bulkAlarm(1).activate({ severity: 600, message: 'Guard door open' }); // no rule: an instant
    await openAlarm(r, 'Overtemperature');
    await delay(30);
    jam.deactivate();
    const jamTo = jam.transitionTime()!;
    await delay(30);
    overtemperature.deactivate();
    const otTo = overtemperature.transitionTime()!;
    await waitFor(() => upstreamAlarms(r).length >= 3, { timeoutMs: 20_000, what: 'two ranges and an instant upstream' });
    const ranges = upstreamAlarms(r).filter((a) => a.type === 'range');
    const jamRange = ranges.find((a) => a.text.startsWith('JAM'))!;
    const otRange = ranges.find((a) => a.text.startsWith('OVERTEMP'))!;
    expect([jamRange.started_at, jamRange.ended_at]).toEqual([toIsoUtc(jamFrom), toIsoUtc(jamTo)]);
    expect([otRange.started_at, otRange.ended_at]).toEqual([toIsoUtc(otFrom), toIsoUtc(otTo)]);
    expect(otRange.text).toContain('(planned)');
    const instant = upstreamAlarms(r).find((a) => a.type === 'instant')!;
    expect(instant.text).toMatch(/^Machine alarm "A1" on .*BulkAlarms, severity 600: Guard door open$/);
  }, 90_000);

  it('closes conditions correctly across a gateway restart: exact time when the server still retains it, inferred when it does not, and never twice', async () => {
    const r = await rig({ bulkAlarms: 1 });
    await r.startGateway();
    const { jam, overtemperature } = r.sim.alarms!;
    const a1 = r.sim.bulkAlarm(1);
    jam.activate();
    overtemperature.activate();
    a1.activate();
    const since = { jam: jam.transitionTime()!, ot: overtemperature.transitionTime()!, a1: a1.transitionTime()! };
    await waitFor(async () => (await r.api('/api/annotations')).open_alarms.length === 3, { timeoutMs: 20_000, what: 'three open conditions' });
    await r.gw!.close();
    const stoppedAt = Date.now();

    // While the gateway is stopped: Overtemperature clears, not yet acknowledged, so the server
    // retains it and the refresh reports its inactive transition (Part 9 §5.5.2 Retain). Jam clears
    // too, but node-opcua's OffNormalAlarm moves the unacknowledged state to a branch and stops
    // retaining the condition itself: only its absence from the refresh tells. A1 stays active.
    overtemperature.deactivate();
    const otEnd = overtemperature.transitionTime()!;
    jam.deactivate();
    const restartedAt = Date.now();
    await r.startGateway();

    const ranges = await waitFor(() => (upstreamAlarms(r).length >= 2 ? upstreamAlarms(r) : null), { timeoutMs: 20_000, what: 'the two closed ranges upstream' });
    const otRange = ranges.find((a) => a.text.startsWith('OVERTEMP'))!;
    expect([otRange.started_at, otRange.ended_at]).toEqual([toIsoUtc(since.ot), toIsoUtc(otEnd)]);
    expect(otRange.text).not.toContain('inferred');
    const jamRange = ranges.find((a) => a.text.startsWith('JAM'))!;
    expect(jamRange.started_at).toBe(toIsoUtc(since.jam));
    expect(Date.parse(jamRange.ended_at!)).toBeGreaterThanOrEqual(restartedAt - 1_000);
    expect(jamRange.text).toMatch(/End inferred: not active any more at the ConditionRefresh of \S+; last known active (\S+)$/);
    // The last time it was known active is when the stopping gateway's link ended.
    const lastKnown = Date.parse(/last known active (\S+)$/.exec(jamRange.text)![1]);
    expect(lastKnown).toBeGreaterThanOrEqual(since.jam);
    expect(lastKnown).toBeLessThanOrEqual(stoppedAt);
    const list = await r.api('/api/annotations');
    const jamEntry = list.annotations.find((a: any) => a.external_id === jamRange.external_id);
    expect(jamEntry.alarm.end_inferred).toMatch(/not active any more at the ConditionRefresh/);
    // A1 is still open, with its original start, and no annotation yet.
    expect(list.open_alarms.map((o: any) => [o.alarm.condition_name, o.alarm.active_since])).toEqual([['A1', toIsoUtc(since.a1)]]);

    // Another restart while A1 is active, then it clears: one annotation, from its first start.
    await r.gw!.close();
    await r.startGateway();
    a1.deactivate();
    const a1End = a1.transitionTime()!;
    const a1Range = await waitFor(() => upstreamAlarms(r).find((a) => a.text.startsWith('BULK')), { timeoutMs: 20_000, what: 'A1 range upstream' });
    expect([a1Range.started_at, a1Range.ended_at]).toEqual([toIsoUtc(since.a1), toIsoUtc(a1End)]);
    await holdsFor(() => upstreamAlarms(r).length === 3, { forMs: 500, what: 'three alarm annotations upstream' });
    const counts = r.gw!.handle.annotations!.store.counts();
    expect(counts.queued + counts.delivered + counts.refused).toBe(3);
  }, 120_000);

  it('recovers conditions that changed during a network cut (ConditionRefresh after the reconnect)', async () => {
    const r = await rig();
    const proxy = await startTcpProxy(r.sim.port);
    cleanup.push(() => proxy.close());
    await r.startGateway(proxy.url('/UA/Press1'), { server: { watchdog_multiplier: 15, session_timeout: 10_000 } });
    const { jam, overtemperature } = r.sim.alarms!;
    overtemperature.activate();
    const otFrom = overtemperature.transitionTime()!;
    await openAlarm(r, 'Overtemperature');
    const refreshesBefore = await metricValue(r.gw!.handle.metrics, 'gateway_opcua_condition_refreshes_total', { source: 'press1', outcome: 'ok' });

    // The cable is pulled; meanwhile the overtemperature clears (not yet acknowledged: retained)
    // and the press jams.
    proxy.cut();
    await delay(300);
    overtemperature.deactivate();
    const otTo = overtemperature.transitionTime()!;
    jam.activate();
    const jamFrom = jam.transitionTime()!;
    await delay(3_000);
    proxy.restore();

    const otRange = await waitFor(() => upstreamAlarms(r).find((a) => a.text.startsWith('OVERTEMP')), { timeoutMs: 60_000, what: 'the overtemperature range after the cut' });
    expect([otRange.started_at, otRange.ended_at]).toEqual([toIsoUtc(otFrom), toIsoUtc(otTo)]);
    expect(otRange.text).not.toContain('inferred');
    const open = await openAlarm(r, 'Jam');
    expect(open.alarm.active_since).toBe(toIsoUtc(jamFrom));
    // A ConditionRefresh followed the reconnect (a repaired session, or a rebuilt one after the watchdog).
    // Counted when the Call's answer arrives, which may come after the refresh's events (CI caught it between).
    await waitFor(async () => (await metricValue(r.gw!.handle.metrics, 'gateway_opcua_condition_refreshes_total', { source: 'press1', outcome: 'ok' })) > refreshesBefore, { timeoutMs: 30_000, what: 'the ConditionRefresh after the reconnect counted' });
    await holdsFor(() => upstreamAlarms(r).length === 1, { forMs: 500, what: 'one alarm annotation upstream after the reconnect' });
  }, 120_000);

  it('refuses malformed events with a reason, counts and logs them, and keeps taking good ones', async () => {
    const r = await rig();
    await r.startGateway();
    const ev = (fields: Record<string, { dataType: DataType; value: unknown }>) => r.sim.raiseRawEvent('AlarmConditionType', { severity: { dataType: DataType.UInt16, value: 900 }, message: { dataType: DataType.LocalizedText, value: { text: 'raw' } }, ...fields });
    ev({ severity: { dataType: DataType.UInt16, value: 2000 } }); // Part 5: 1..1000
    ev({ severity: { dataType: DataType.String, value: 'high' } });
    ev({ time: { dataType: DataType.String, value: 'yesterday' } });
    ev({ time: { dataType: DataType.DateTime, value: new Date('1990-01-01T00:00:00Z') } }); // older than annotations.max_age (5 years)
    ev({ time: { dataType: DataType.DateTime, value: new Date(Date.now() + 7 * 86_400_000) } }); // beyond max_ahead (1 day)
    const refused = (reason: string) => metricValue(r.gw!.handle.metrics, 'gateway_alarm_events_refused_total', { source: 'press1', reason });
    await waitFor(async () => (await refused('bad_severity')) === 1 && (await refused('wrong_type')) === 2 && (await refused('implausible_time')) === 2, { timeoutMs: 20_000, what: 'five refusals counted by reason' });
    expect(r.events().events_refused).toEqual({ bad_severity: 1, wrong_type: 2 });
    expect(r.events().last_problem.detail).toMatch(/Time is String, expected DateTime|Severity is String/);
    expect(upstreamAlarms(r)).toHaveLength(0);
    expect(r.gw!.handle.annotations!.store.counts().queued).toBe(0);

    // The source is still connected and a good alarm still works.
    expect(r.gw!.handle.status().sources[0].state).toBe('connected');
    r.sim.alarms!.jam.activate();
    r.sim.alarms!.jam.deactivate();
    await waitFor(() => upstreamAlarms(r).find((a) => a.text.startsWith('JAM')), { timeoutMs: 20_000, what: 'a good alarm after the bad events' });
  }, 90_000);

  it('links an operator downtime and the machine\'s alarm of the same machine (operator text first, machine times after), and flags one the running signal contradicts', async () => {
    const r = await rig();
    await r.startGateway(undefined, { annotations: { detectors: [{ machine: 'press1', variable: 'mvr_press1_state', condition: '!= 1', min_duration: '60s' }] } });
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${r.gw!.handle.httpUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
    // The press reports "running" (state 1) and the detector has seen it.
    await waitFor(() => r.gw!.handle.annotations!.detector.status()[0].last_sample !== null, { timeoutMs: 20_000, what: 'the state variable at the detector' });

    // 1. The operator records a downtime while the machine says it runs all along: kept, flagged.
    expect((await post('/api/machines/press1/downtime/start', { reason: 'Tool change' })).status).toBe(201);
    await delay(300);
    const contradicted = await post('/api/machines/press1/downtime/stop', {});
    expect(contradicted.status).toBe(201);
    expect(contradicted.body.annotation.text).toBe('Tool change');

    // 2. The press jams and stops; the operator records it with their reason.
    const jam = r.sim.alarms!.jam;
    jam.activate();
    const jamFrom = jam.transitionTime()!;
    r.sim.setValue('state', 0);
    await openAlarm(r, 'Jam');
    // The gateway has seen the press stopped (the value comes with the next publish; a downtime
    // shorter than that would rightly be contradicted by the "running" it last saw).
    await waitFor(() => r.gw!.handle.annotations!.detector.status()[0].state === 'pending', { timeoutMs: 20_000, what: 'the stop at the detector' });
    expect((await post('/api/machines/press1/downtime/start', { reason: 'Breakdown' })).status).toBe(201);
    await delay(200);
    jam.deactivate();
    const jamTo = jam.transitionTime()!;
    const jamRange = await waitFor(() => upstreamAlarms(r).find((a) => a.text.startsWith('JAM')), { timeoutMs: 20_000, what: 'the jam range' });
    r.sim.setValue('state', 1);
    const stopped = await post('/api/machines/press1/downtime/stop', { text: 'feeder blocked' });
    expect(stopped.status).toBe(201);
    const operatorText: string = stopped.body.annotation.text;
    expect(operatorText).toBe(`Breakdown: feeder blocked. Machine: alarm "Jam" (JAM) ${toIsoUtc(jamFrom)}–${toIsoUtc(jamTo)}`);
    // The alarm's range closed while the operator's downtime was still open: it names it.
    expect(jamRange.text).toMatch(/\. Operator recorded "Breakdown" since \S+$/);

    const list = await r.api('/api/annotations');
    const byId = (id: string) => list.annotations.find((a: any) => a.external_id === id);
    const op1 = byId(contradicted.body.annotation.external_id);
    expect(op1.origin_kind).toBe('operator');
    expect(op1.contradicted_by_machine_state.detail).toMatch(/^mvr_press1_state said the machine was running/);
    expect(op1.links).toEqual([]);
    const op2 = byId(stopped.body.annotation.external_id);
    expect(op2.contradicted_by_machine_state).toBeNull();
    expect(op2.links.map((l: any) => [l.external_id, l.origin_kind])).toEqual([[jamRange.external_id, 'alarm']]);
    const alarmEntry = byId(jamRange.external_id);
    expect(alarmEntry.links.map((l: any) => [l.external_id, l.origin_kind, l.state])).toEqual([[op2.external_id, 'operator', expect.stringMatching(/queued|delivered/)]]);
    expect(r.gw!.handle.status().annotations).toMatchObject({ reconciliation: { contradicted: 1 } });
  }, 90_000);

  it('keeps an active condition\'s range across a reload of annotations, which asks the source for a ConditionRefresh', async () => {
    const r = await rig();
    await r.startGateway();
    const jam = r.sim.alarms!.jam;
    jam.activate();
    const from = jam.transitionTime()!;
    await openAlarm(r, 'Jam');
    const refreshes = () => metricValue(r.gw!.handle.metrics, 'gateway_opcua_condition_refreshes_total', { source: 'press1', outcome: 'ok' });
    const before = await refreshes();

    // The rule's text changes: annotations are rebuilt in place, the OPC UA session is not.
    const sections = gatewaySections(r.sim.endpointUrl, r.sim) as { annotations: { alarms: { rules: Array<Record<string, unknown>> } } };
    sections.annotations.alarms.rules[0] = { ...sections.annotations.alarms.rules[0], text: 'Jam (new wording)' };
    const { config } = validateConfig(testConfigInput(r.emu, r.dir, sections));
    const result = await r.gw!.handle.reload(config);
    expect(result.annotations).toBe(true);
    expect(result.restartedSources).toEqual([]);
    await waitFor(async () => (await refreshes()) > before, { timeoutMs: 20_000, what: 'a ConditionRefresh after the reload' });

    jam.deactivate();
    const to = jam.transitionTime()!;
    const range = await waitFor(() => upstreamAlarms(r).find((a) => a.text.startsWith('JAM')), { timeoutMs: 20_000, what: 'the jam range after the reload' });
    // The range keeps what it was opened with (the rule at its start), once.
    expect([range.started_at, range.ended_at]).toEqual([toIsoUtc(from), toIsoUtc(to)]);
    expect(range.text).toContain('JAM: Material jam at the infeed');
    await holdsFor(() => upstreamAlarms(r).length === 1, { forMs: 500, what: 'one alarm annotation upstream after the reload' });
  }, 90_000);
});
