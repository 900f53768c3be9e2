import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPCUAClient, AttributeIds, TimestampsToReturn, callConditionRefresh, constructEventFilter, ofType, type ClientSession, type ClientSubscription } from 'node-opcua';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startOpcuaSimulator, type OpcuaSimulator, type OpcuaSimulatorOptions } from '../../src/sim/opcua-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The pieces of the Alarms & Conditions tests (issue 26): a real node-opcua server with real
 * condition instances (src/sim/opcua-server.ts: Jam is an OffNormalAlarmType, Overtemperature an
 * AlarmConditionType, both with ConfirmedState), the tracking-service emulator over HTTP, and a
 * gateway whose Press 1 source subscribes to the server's events.
 */

export const ALARM_RULES = {
  servers: [{ server: 'press1', machine: 'press1' }],
  rules: [
    { match: { condition_name: 'Jam' }, reason_code: 'JAM', text: 'Material jam at the infeed', category: 'unplanned' },
    { match: { condition_name: 'Overtemperature', server: 'press1' }, reason_code: 'OVERTEMP', text: 'Hydraulic overtemperature', category: 'unplanned' },
    { match: { condition_name: 'A*' }, reason_code: 'BULK', category: 'blocked' },
  ],
  instant_min_severity: 700,
};

export function gatewaySections(endpoint: string, sim: OpcuaSimulator, extra: { events?: Record<string, unknown>; server?: Record<string, unknown>; annotations?: Record<string, unknown>; sections?: Record<string, unknown> } = {}): Record<string, unknown> {
  return {
    ...(extra.sections ?? {}),
    http: { enabled: true, port: 0 },
    opcua: {
      servers: [
        {
          name: 'press1',
          endpoint,
          publishing_interval: 200,
          reconnect: { initial_delay: 300, max_delay: 2_000 },
          nodes: [{ node_id: sim.nodeIds.state, variable: 'mvr_press1_state' }],
          events: { publishing_interval: 100, refresh_retry: 1_000, ...(extra.events ?? {}) },
          ...(extra.server ?? {}),
        },
      ],
    },
    annotations: {
      site: { external_id: 'plant-demo' },
      machines: [{ key: 'press1', name: 'Press 1', machine_variables: ['mvr_press1_state', 'mvr_press1_speed'] }],
      alarms: ALARM_RULES,
      ...(extra.annotations ?? {}),
    },
  };
}

export interface Rig {
  sim: OpcuaSimulator;
  emu: EmulatorHandle;
  dir: string;
  gw: TestGateway | null;
  startGateway(endpoint?: string, extra?: Parameters<typeof gatewaySections>[2]): Promise<TestGateway>;
  /** GET on the gateway's local API. */
  api<T = any>(path: string): Promise<T>;
  /** The source's events status (status().sources[0].detail.events). */
  events(): any;
  close(): Promise<void>;
}

export async function startRig(simOptions: OpcuaSimulatorOptions = {}): Promise<Rig> {
  const sim = await startOpcuaSimulator({ alarms: true, updateIntervalMs: 200, ...simOptions });
  sim.pauseUpdates();
  const emu = await startEmulator({ port: 0 });
  const dir = mkdtempSync(join(tmpdir(), 'gw-alarms-'));
  const rig: Rig = {
    sim,
    emu,
    dir,
    gw: null,
    async startGateway(endpoint = sim.endpointUrl, extra = {}) {
      rig.gw = await startTestGateway(emu, gatewaySections(endpoint, sim, extra), { dir });
      // Subscribed, and the first ConditionRefresh answered.
      await waitFor(() => rig.events()?.refreshes?.ok >= 1, { timeoutMs: 30_000, what: 'the event subscription and its first ConditionRefresh' });
      return rig.gw;
    },
    async api(path) {
      const res = await fetch(`${rig.gw!.handle.httpUrl}${path}`);
      if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
      return res.json();
    },
    events: () => (rig.gw?.handle.status().sources[0] as { detail?: { events?: unknown } } | undefined)?.detail?.events,
    async close() {
      await rig.gw?.close().catch(() => undefined);
      await emu.close();
      await sim.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return rig;
}

/** An operator's OPC UA client (an HMI): acknowledges and confirms conditions, and may ask for a refresh. */
export interface Hmi {
  session: ClientSession;
  acknowledge(conditionId: string, eventId: Buffer, comment?: string): Promise<string>;
  confirm(conditionId: string, eventId: Buffer, comment?: string): Promise<string>;
  /** ConditionRefresh on its own subscription (node-opcua's server resends to every subscription). */
  refresh(): Promise<string>;
  close(): Promise<void>;
}

export async function connectHmi(endpoint: string): Promise<Hmi> {
  const client = OPCUAClient.create({ endpointMustExist: false, connectionStrategy: { maxRetry: 1 } });
  await client.connect(endpoint);
  const session = await client.createSession();
  const sub: ClientSubscription = await session.createSubscription2({ requestedPublishingInterval: 200, requestedMaxKeepAliveCount: 10, requestedLifetimeCount: 100, publishingEnabled: true });
  await sub.monitor({ nodeId: 'i=2253', attributeId: AttributeIds.EventNotifier }, { queueSize: 100, filter: constructEventFilter(['EventId'], ofType('AlarmConditionType')), discardOldest: true, samplingInterval: 0 }, TimestampsToReturn.Neither);
  return {
    session,
    acknowledge: async (conditionId, eventId, comment = 'seen') => (await session.acknowledgeCondition(conditionId as never, eventId, comment)).name,
    confirm: async (conditionId, eventId, comment = 'fixed') => (await session.confirmCondition(conditionId, eventId, comment)).name,
    refresh: async () => (await callConditionRefresh(session, sub.subscriptionId)).name,
    async close() {
      await session.close().catch(() => undefined);
      await client.disconnect().catch(() => undefined);
    },
  };
}
