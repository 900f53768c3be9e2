import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { toIsoUtc } from '../../src/core/time.js';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { captureLines } from '../helpers/log.js';
import { compileOpen62541Server, open62541Available, startCommandServer, type CommandServer } from '../helpers/open62541.js';
import { holdsFor, waitFor } from '../helpers/wait.js';
import { metricValue } from '../sources/opcua/helpers.js';
import { startTcpProxy } from '../sources/opcua/tcp-proxy.js';

/**
 * Alarms & Conditions against a second server implementation: open62541 1.4 (C), whose conditions
 * are changed the way its own tutorial does (test/fixtures/open62541/alarm_server.c). Its
 * condition setters stamp events with Time 1601-01-01 (OPC UA's null time), it sends no
 * ActiveState/TransitionTime, and it grants an event queue of 100 where the gateway asks 10,000:
 * what node-opcua on both sides never shows.
 */
const available = open62541Available('the open62541 Alarms & Conditions tests');
const SERVER_SOURCE = fileURLToPath(new URL('../fixtures/open62541/alarm_server.c', import.meta.url));

let server: CommandServer;
let emu: EmulatorHandle;
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  if (!available) return;
  server = await startCommandServer(compileOpen62541Server(SERVER_SOURCE));
  emu = await startEmulator({ port: 0 });
});
afterAll(async () => {
  await emu?.close();
  await server?.close();
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

function sections(endpoint: string): Record<string, unknown> {
  return {
    http: { enabled: true, port: 0 },
    opcua: {
      servers: [{ name: 'press1', endpoint, reconnect: { initial_delay: 300, max_delay: 2_000 }, events: { publishing_interval: 100, refresh_retry: 1_000 } }],
    },
    annotations: {
      site: { external_id: 'plant-demo' },
      machines: [{ key: 'press1', name: 'Press 1', machine_variables: ['mvr_press1_state'] }],
      alarms: {
        servers: [{ server: 'press1', machine: 'press1' }],
        rules: [
          { match: { condition_name: 'Jam' }, reason_code: 'JAM', text: 'Material jam at the infeed' },
          { match: { condition_name: 'Overtemperature' }, reason_code: 'OVERTEMP', text: 'Hydraulic overtemperature' },
        ],
        instant_min_severity: null,
      },
    },
  };
}

/** A gateway on `dir` (kept across its restarts), subscribed and past its first ConditionRefresh. */
async function startGateway(dir: string, endpoint = server.endpointUrl, logger?: ReturnType<typeof captureLines>['logger']): Promise<TestGateway> {
  const gw = await startTestGateway(emu, sections(endpoint), { dir, logger });
  cleanup.push(() => gw.close());
  await waitFor(() => events(gw)?.refreshes?.ok >= 1, { timeoutMs: 30_000, what: 'the event subscription and its first ConditionRefresh' });
  return gw;
}

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-o62-alarms-'));
  cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const alarmStatus = (gw: TestGateway): any => (gw.handle.status().annotations as any).alarms;
const alarmTotals = (gw: TestGateway): any => alarmStatus(gw).totals;
const events = (gw: TestGateway): any => (gw.handle.status().sources[0] as { detail?: { events?: unknown } } | undefined)?.detail?.events;

async function api(gw: TestGateway, path: string): Promise<any> {
  const res = await fetch(`${gw.handle.httpUrl}${path}`);
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

const openAlarm = (gw: TestGateway, name: string, check: (a: any) => boolean = () => true, what = 'open') =>
  waitFor(async () => (await api(gw, '/api/annotations')).open_alarms.find((a: any) => a.alarm.condition_name === name && check(a.alarm)), { timeoutMs: 20_000, intervalMs: 200, what: `${name} ${what} in the console JSON` });

type Upstream = { external_id: string; type: string; started_at?: string; ended_at?: string; text: string };
/** The alarm ranges of one test's gateway at the emulator (the emulator is shared; texts tell them apart). */
const ranges = (reason: string) => (emu.annotations() as unknown as Upstream[]).filter((a) => a.type === 'range' && a.text.startsWith(`${reason}:`));

function within(iso: string, from: number, to: number): void {
  const t = Date.parse(iso);
  expect(t).toBeGreaterThanOrEqual(from);
  expect(t).toBeLessThanOrEqual(to);
}

describe.skipIf(!available)('alarms from open62541 1.4 (a second OPC UA server implementation)', () => {
  it('after acknowledge and confirm (Time 1601), a gateway restart while the alarm is active keeps its range open at the refresh, also when the refresh resends a refused event; the real deactivation closes it', async () => {
    const dir = tempDir();
    let gw = await startGateway(dir);
    const t0 = Date.now();
    const activatedAt = await server.send('activate Jam stamped');
    const open = await openAlarm(gw, 'Jam');
    within(open.alarm.active_since, t0, activatedAt);

    // The operator acknowledges and confirms; open62541 stamps the confirm event with Time 1601.
    await server.send('acknowledge Jam');
    await server.send('confirm Jam');
    await openAlarm(gw, 'Jam', (a) => a.acked === true && a.confirmed === true, 'acknowledged and confirmed');
    // And the severity goes out of Part 5's range: that event is refused, yet it names the condition.
    await server.send('severity Jam 1500');
    await waitFor(() => events(gw).events_refused.bad_severity === 1, { timeoutMs: 20_000, what: 'the out-of-range severity refused' });
    expect(events(gw).events_refused).toEqual({ bad_severity: 1 });

    // The gateway restarts while the press is still jammed. The refresh resends the condition with
    // its last event (Severity 1500): refused, but mentioned, so the range stays open.
    await gw.close();
    gw = await startGateway(dir);
    // The refresh bracket (start, the condition, end) went through the annotator.
    await waitFor(() => events(gw).events_received >= 3 && alarmTotals(gw).events >= 2 && alarmStatus(gw).refreshes_in_progress.length === 0, { timeoutMs: 20_000, what: 'the refresh bracket handled' });
    expect(events(gw).events_refused.bad_severity).toBeGreaterThanOrEqual(1);
    await holdsFor(async () => ranges('JAM').length === 0 && (await api(gw, '/api/annotations')).open_alarms.length === 1, { forMs: 1_000, intervalMs: 200, what: 'the Jam range still open after the refresh' });
    expect((await openAlarm(gw, 'Jam')).alarm.active_since).toBe(open.alarm.active_since);

    // Back in range, then the jam clears: the range closes at the real deactivation, once.
    await server.send('severity Jam 700');
    const t1 = Date.now();
    const deactivatedAt = await server.send('deactivate Jam stamped');
    const [range] = await waitFor(() => (ranges('JAM').length > 0 ? ranges('JAM') : null), { timeoutMs: 20_000, what: 'the Jam range upstream' });
    expect(range.started_at).toBe(open.alarm.active_since);
    within(range.ended_at!, t1, deactivatedAt);
    expect(range.text).toBe('JAM: Material jam at the infeed (unplanned). Alarm "Jam" on Press1, severity 700: Material jam at the infeed');
    await holdsFor(() => ranges('JAM').length === 1, { forMs: 500, what: 'one Jam range upstream' });
  }, 90_000);

  it('records the downtime of a server that stamps every event with the null time, naming the time it used (ReceiveTime)', async () => {
    const gw = await startGateway(tempDir());
    const t0 = Date.now();
    const activatedAt = await server.send('activate Overtemperature');
    const open = await openAlarm(gw, 'Overtemperature');
    within(open.alarm.active_since, t0, activatedAt);
    expect(open.alarm.time_sources).toEqual({ start: 'ReceiveTime' });

    const t1 = Date.now();
    const deactivatedAt = await server.send('deactivate Overtemperature');
    const [range] = await waitFor(() => (ranges('OVERTEMP').length > 0 ? ranges('OVERTEMP') : null), { timeoutMs: 20_000, what: 'the Overtemperature range upstream' });
    expect(range.started_at).toBe(open.alarm.active_since);
    within(range.ended_at!, t1, deactivatedAt);
    expect(range.text).toBe('OVERTEMP: Hydraulic overtemperature (unplanned). Alarm "Overtemperature" on Press1, severity 700: Hydraulic oil too hot. Start and end from ReceiveTime (the server sent no event Time)');
    const entry = (await api(gw, '/api/annotations')).annotations.find((a: any) => a.external_id === range.external_id);
    expect(entry.alarm).toMatchObject({ record: 'closed', end_inferred: null, time_sources: { start: 'ReceiveTime', end: 'ReceiveTime' }, ended_at: range.ended_at });
    expect(events(gw).events_refused).toEqual({});
    expect(events(gw).time_fallbacks.ReceiveTime).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('logs the queue size the server granted once, counts the overflow of a burst, and recovers with a ConditionRefresh', async () => {
    const proxy = await startTcpProxy(server.port);
    cleanup.push(() => proxy.close());
    const { logger, lines } = captureLines();
    const gw = await startGateway(tempDir(), proxy.url(''), logger);
    const revisedLines = () => lines.filter((l) => String(l.msg).includes('.queue_size: the server keeps at most'));
    expect(events(gw).queue_size).toEqual({ requested: 10_000, revised: 100 });
    await waitFor(() => revisedLines().length === 1, { timeoutMs: 10_000, what: 'the revised queue size logged' });
    expect(revisedLines()[0]).toMatchObject({ level: 'warn', source: 'press1', requested: 10_000, revised: 100 });
    const refreshes = events(gw).refreshes.ok;

    // 80 activations and deactivations in one turn of the server: 160 events for a queue of 100.
    await server.send('storm Jam 80');
    await waitFor(async () => (await metricValue(gw.handle.metrics, 'gateway_opcua_event_queue_overflows_total', { source: 'press1' })) >= 1, { timeoutMs: 20_000, what: 'the overflow counted' });
    expect(events(gw).queue_overflows).toBeGreaterThanOrEqual(1);
    await waitFor(() => events(gw).refreshes.ok > refreshes && /queue overflow/.test(events(gw).last_refresh?.why), { timeoutMs: 20_000, what: 'a ConditionRefresh after the overflow' });
    // The last events survived (the oldest are discarded): Jam ended inactive, nothing stays open.
    await waitFor(async () => (await api(gw, '/api/annotations')).open_alarms.length === 0, { timeoutMs: 20_000, intervalMs: 200, what: 'no open alarm after the storm' });
    const stormRanges = ranges('JAM').filter((r) => r.text.includes('ReceiveTime'));
    expect(stormRanges.length).toBeGreaterThan(0);
    expect(stormRanges.length).toBeLessThan(80);

    // The link breaks and comes back: a new event item, the same revision, not logged again.
    const cutAt = Date.now();
    proxy.cut();
    await waitFor(() => gw.handle.status().sources[0].state !== 'connected', { timeoutMs: 30_000, what: 'the source disconnected' });
    proxy.restore();
    await waitFor(() => events(gw)?.last_refresh?.at > cutAt && events(gw).last_refresh.status === 'Good', { timeoutMs: 30_000, what: 'reconnected and refreshed' });
    expect(events(gw).queue_size).toEqual({ requested: 10_000, revised: 100 });
    expect(revisedLines()).toHaveLength(1);
  }, 90_000);
});
