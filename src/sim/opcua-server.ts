/**
 * Simulated plant over OPC UA: a real node-opcua server with one press ("Press1") whose process
 * values change, a machine-state variable with a configurable stop/fault schedule, a part counter,
 * plus a few nodes that exist only to exercise the gateway's refusals (a String, a Boolean, an
 * array). Used by the demo, the OPC UA tests and the benchmark (`bulkVariables`).
 *
 * Never imported by the gateway's runtime path.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DataType,
  DataValue,
  MessageSecurityMode,
  OPCUACertificateManager,
  OPCUAServer,
  SecurityPolicy,
  StatusCode,
  StatusCodes,
  ConditionInfo,
  Variant,
  VariantArrayType,
  standardUnits,
  type EUInformation,
  type Namespace,
  type UAAlarmConditionEx,
  type UAObject,
  type UAVariable,
} from 'node-opcua';
import { installMisbehaviour, misbehavingTransportSettings, type Misbehaviour, type MisbehaviourOptions } from './opcua-misbehaving.js';

export type SimSecurityMode = 'None' | 'Sign' | 'SignAndEncrypt';
export type SimSecurityPolicy = 'None' | 'Basic256Sha256' | 'Aes128_Sha256_RsaOaep' | 'Aes256_Sha256_RsaPss';

/** One step of the machine-state schedule: state 0 stopped, 1 running, 2 fault, for `durationMs`. */
export interface MachineStateStep {
  state: 0 | 1 | 2;
  durationMs: number;
}

export interface OpcuaSimulatorOptions {
  /** TCP port; 0 (default) picks a free one. A restart test passes the port of the previous run. */
  port?: number;
  /** Security modes offered (default: all three). `None` is needed for browsing without certificates. */
  securityModes?: SimSecurityMode[];
  /** Security policies offered with Sign/SignAndEncrypt (default: the three the gateway supports). */
  securityPolicies?: Exclude<SimSecurityPolicy, 'None'>[];
  /** Username/password pairs accepted; anonymous stays allowed unless `allowAnonymous` is false. */
  users?: Array<{ username: string; password: string }>;
  allowAnonymous?: boolean;
  /**
   * Folder for the server's certificate and its trust lists (`server/`, `user/`). Reusing it keeps
   * the same server certificate across restarts (and skips the slow key generation). Default: a
   * fresh temp folder.
   */
  pkiDir?: string;
  /**
   * Server.ServerCapabilities.OperationLimits (Part 5 §6.3.11), enforced by node-opcua (a call
   * beyond them is answered BadTooManyOperations). Default 10,000 each; small numbers stand in for
   * an embedded PLC server.
   */
  operationLimits?: { maxMonitoredItemsPerCall?: number; maxNodesPerRead?: number; maxNodesPerBrowse?: number; maxNodesPerHistoryReadData?: number };
  /** Most sessions at once (default 100); a small number stands in for a PLC with few session slots. */
  maxSessions?: number;
  /** Accept unknown client (and user) certificates (default true: a lab server). */
  trustUnknownClients?: boolean;
  /** How often the process values change, ms (default 1000). */
  updateIntervalMs?: number;
  /**
   * Machine-state schedule, repeated forever. Default: running 4 min, stopped 90 s, running 3 min,
   * fault 70 s: both stops last more than 60 s so the demo's downtime detector sees them.
   */
  stateSchedule?: MachineStateStep[];
  /** Called when the schedule changes the machine state (the demo prints the plant's stops). */
  onStateChange?: (state: number, previous: number) => void;
  /** Extra Double variables `Bulk.V<i>` (i from 1) whose value changes at every read (sampling); for the benchmark. */
  bulkVariables?: number;
  /**
   * Keep the history of the Press1 process variables (Temperature, Pressure, Speed, MachineState,
   * PartCount) so clients can HistoryRead them (OPC UA Part 11; AccessLevel gets HistoryRead).
   * Default true: a gateway that was away fills its gap from here. false: a server without history.
   */
  historize?: boolean;
  /** Values kept per historized variable (default 100,000, about a day at one change a second). */
  historyValues?: number;
  /**
   * Extra historized Double variables `Hist.V<i>` for the backfill benchmark, with history already
   * holding one value every `stepMs` from `fromMs` to `toMs` (epoch ms), and a live value every
   * `updateIntervalMs` afterwards.
   */
  historizedBulk?: { count: number; fromMs: number; toMs: number; stepMs: number };
  /**
   * Alarms & Conditions on Press1 (Part 9): Jam, an OffNormalAlarmType whose input is the
   * Boolean Press1.JamDetected (normal: false), and Overtemperature, an AlarmConditionType with
   * ConfirmedState. Default false (the demo's plant turns them on).
   */
  alarms?: boolean;
  /** Extra AlarmConditionType instances `BulkAlarms.A<i>` (i from 1) for the load test and benchmark. */
  bulkAlarms?: number;
  /** Log server start/stop lines to stderr (default false). */
  verbose?: boolean;
  /** Nodes that break the rules (a looping or huge history, an endless browse), see opcua-misbehaving.ts. */
  misbehave?: MisbehaviourOptions;
}

/** One alarm of the simulator, driven from the server side (a PLC raising and clearing it). */
export interface SimAlarm {
  readonly name: string;
  /** ConditionId (the condition node's id) as text. */
  readonly conditionId: string;
  /** Raises it (ActiveState true, AckedState false, Retain true) with a fresh EventId. */
  activate(o?: { severity?: number; message?: string }): void;
  /**
   * Clears it. Retain stays true while the activation waits for acknowledgement or confirmation
   * (Part 9 §5.5.2), unless `retain` says otherwise.
   */
  deactivate(o?: { message?: string; retain?: boolean }): void;
  isActive(): boolean;
  /** ActiveState/TransitionTime (epoch ms): when it last became active or inactive, by the server's clock. */
  transitionTime(): number | null;
  /** The EventId of its latest state (what Acknowledge and Confirm refer to). */
  eventId(): Buffer;
}

export interface BulkStats {
  /** Bulk variable values produced (one per sampling of a monitored item, plus plain reads). */
  reads: number;
  subscriptions: Array<{
    session: string;
    id: number;
    items: number;
    notificationsSent: number;
    queueOverflows: number;
    /** Harvested from the monitored items, waiting for a Publish request. */
    pendingNotifications: number;
    /** Still in the monitored items' own queues (not yet harvested). */
    queuedInItems: number;
    queuedPublishRequests: number;
    state: string;
  }>;
}

export interface MonitoredItemStats {
  createCalls: number;
  /** Items asked for in those calls (refused calls included). */
  itemsRequested: number;
  /** Most items one call asked for. */
  maxItemsPerCall: number;
  /** Items asked for by each call, oldest first (the last 10,000 calls). */
  callSizes: number[];
  /** Calls beyond MaxMonitoredItemsPerCall (node-opcua answers them BadTooManyOperations and creates nothing). */
  callsOverLimit: number;
  /** Session name → monitored items in its subscriptions now. */
  itemsBySession: Record<string, number>;
}

/** Names of the simulator's variables, for `nodeIds` and `setValue`. */
export type SimVariableName =
  | 'temperature'
  | 'pressure'
  | 'speed'
  | 'state'
  | 'count'
  | 'label'
  | 'running'
  | 'vector'
  | 'setpoint';

export interface OpcuaSimulator {
  endpointUrl: string;
  port: number;
  namespaceUri: string;
  /** Node id strings (`ns=1;s=Press1.Temperature`) of the named variables. */
  nodeIds: Record<SimVariableName, string>;
  /** Node id string of bulk variable i (1-based). */
  bulkNodeId(i: number): string;
  /** Node id string of historized bulk variable i (1-based), see `historizedBulk`. */
  histNodeId(i: number): string;
  /** Same ids in `nsu=<uri>;s=...` form (independent of the namespace index). */
  nsuNodeIds: Record<SimVariableName, string>;
  /** Path of the server's certificate (DER or PEM), to put in a client's trust folder. */
  certificateFile: string;
  /**
   * Sets a value now. `sourceTimestamp` defaults to now; `status` lets a test send Bad or Uncertain
   * quality (`'Bad'`, `'Uncertain'`, or a node-opcua StatusCode).
   */
  setValue(name: SimVariableName, value: number | boolean | string, opts?: { sourceTimestamp?: Date; status?: 'Good' | 'Bad' | 'Uncertain' | StatusCode }): void;
  /** Stops the automatic changes (tests that need exact values). */
  pauseUpdates(): void;
  resumeUpdates(): void;
  /** Current machine state (0 stopped, 1 running, 2 fault). */
  machineState(): number;
  /** Sessions currently open on the server. */
  sessionCount(): number;
  /**
   * What the server did for its subscriptions, for the benchmark's loss accounting: samplings of
   * the bulk variables (each one a new value), and per open subscription the data change
   * notifications sent, the values its monitored-item queues discarded (Overflow, Part 4
   * §5.12.1.5), notifications harvested but not yet sent, and Publish requests waiting.
   */
  bulkStats(): BulkStats;
  /**
   * CreateMonitoredItems calls the server received (all sessions, since it started) and the
   * monitored items each session holds now: how a client split its requests to the server's
   * MaxMonitoredItemsPerCall, and whether it monitors everything again after a restart. Cheap
   * (no walk over the items), for polling during a benchmark.
   */
  monitoredItemStats(): MonitoredItemStats;
  /** Nodes read by the Read service since the server started, by attribute id (AttributeIds: 13 Value, 14 DataType, 15 ValueRank …). */
  attributeReads(): Map<number, number>;
  /** Continuation points (Browse, HistoryRead) the server keeps for its sessions now: a client that releases its own leaves none. */
  continuationPoints(): number;
  /** The rule-breaking nodes and what they were asked (only with the `misbehave` option). */
  misbehaviour: Misbehaviour | null;
  /** Press1's alarms (absent with `alarms: false`). */
  alarms: { jam: SimAlarm; overtemperature: SimAlarm } | null;
  /** Bulk alarm i (1-based), see `bulkAlarms`. */
  bulkAlarm(i: number): SimAlarm;
  /**
   * Raises an event of `eventType` (a standard name) from Press1 with the given fields as they
   * are (lower-camel field names, node-opcua variants): malformed events for the tests.
   */
  raiseRawEvent(eventType: string, fields: Record<string, { dataType: DataType; value: unknown }>): void;
  close(): Promise<void>;
}

const NAMESPACE_URI = 'urn:edge-gateway:sim:press1';

export const DEFAULT_STATE_SCHEDULE: MachineStateStep[] = [
  { state: 1, durationMs: 240_000 },
  { state: 0, durationMs: 90_000 },
  { state: 1, durationMs: 180_000 },
  { state: 2, durationMs: 70_000 },
];

/** Demo mapping: simulator variable → machine variable of the demo fixture (src/emulator/demo-fixture.ts). */
export const OPCUA_DEMO_MAPPING: Array<{ name: SimVariableName; variable: string }> = [
  { name: 'temperature', variable: 'mvr_press1_temperature' },
  { name: 'pressure', variable: 'mvr_press1_pressure' },
  { name: 'speed', variable: 'mvr_press1_speed' },
  { name: 'state', variable: 'mvr_press1_state' },
  { name: 'count', variable: 'mvr_press1_count' },
];

/**
 * The `opcua:` config section (raw, as in the YAML) that maps a running simulator to the demo
 * fixture's machine variables. Node ids use the nsu= form, so they do not depend on the index the
 * server gives the namespace.
 */
export function opcuaDemoSection(sim: Pick<OpcuaSimulator, 'endpointUrl' | 'nsuNodeIds'>, name = 'press1'): Record<string, unknown> {
  return {
    servers: [
      {
        name,
        endpoint: sim.endpointUrl,
        publishing_interval: '1s',
        nodes: OPCUA_DEMO_MAPPING.map((m) => ({ node_id: sim.nsuNodeIds[m.name], variable: m.variable, ...(m.name === 'state' ? { sampling_interval: '200ms' } : {}) })),
      },
    ],
  };
}

const BROWSE_NAMES: Record<SimVariableName, string> = {
  temperature: 'Temperature',
  pressure: 'Pressure',
  speed: 'Speed',
  state: 'MachineState',
  count: 'PartCount',
  label: 'RecipeName',
  running: 'Running',
  vector: 'AxisPositions',
  setpoint: 'TemperatureSetpoint',
};

/** A free TCP port on 127.0.0.1 (node-opcua needs the port number before it listens). */
export async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startOpcuaSimulator(opts: OpcuaSimulatorOptions = {}): Promise<OpcuaSimulator> {
  const port = opts.port && opts.port > 0 ? opts.port : await findFreePort();
  const pkiDir = opts.pkiDir ?? mkdtempSync(join(tmpdir(), 'opcua-sim-pki-'));
  mkdirSync(pkiDir, { recursive: true });
  const trustUnknown = opts.trustUnknownClients ?? true;
  const serverCertificateManager = new OPCUACertificateManager({ rootFolder: join(pkiDir, 'server'), automaticallyAcceptUnknownCertificate: trustUnknown });
  const userCertificateManager = new OPCUACertificateManager({ rootFolder: join(pkiDir, 'user'), automaticallyAcceptUnknownCertificate: trustUnknown });
  await serverCertificateManager.initialize();
  await userCertificateManager.initialize();

  const modes = (opts.securityModes ?? ['None', 'Sign', 'SignAndEncrypt']).map((m) => MessageSecurityMode[m]);
  const policies = opts.securityPolicies ?? ['Basic256Sha256', 'Aes128_Sha256_RsaOaep', 'Aes256_Sha256_RsaPss'];
  const securityPolicies = [
    ...(modes.includes(MessageSecurityMode.None) ? [SecurityPolicy.None] : []),
    ...policies.map((p) => SecurityPolicy[p]),
  ];
  const users = opts.users ?? [];

  const server = new OPCUAServer({
    port,
    hostname: '127.0.0.1',
    alternateHostname: ['127.0.0.1'],
    resourcePath: '/UA/Press1',
    serverCertificateManager,
    userCertificateManager,
    securityModes: modes,
    securityPolicies,
    allowAnonymous: opts.allowAnonymous ?? true,
    userManager: {
      isValidUser: (username: string, password: string) => users.some((u) => u.username === username && u.password === password),
    },
    buildInfo: { productName: 'edge-gateway OPC UA simulator', manufacturerName: 'edge-gateway', softwareVersion: '1.0' },
    serverInfo: { applicationUri: 'urn:edge-gateway:sim:opcua-server', productUri: 'urn:edge-gateway:sim', applicationName: { text: 'Press1 simulator' } },
    transportSettings: misbehavingTransportSettings(opts.misbehave),
    serverCapabilities: { maxSessions: opts.maxSessions ?? 100, operationLimits: { maxMonitoredItemsPerCall: 10_000, maxNodesPerRead: 10_000, maxNodesPerBrowse: 10_000, ...opts.operationLimits } },
  });
  await server.initialize();
  const createCalls = countCreateMonitoredItems(server);
  const attributeReads = countAttributeReads(server);

  const addressSpace = server.engine.addressSpace!;
  const ns: Namespace = addressSpace.registerNamespace(NAMESPACE_URI);
  const nsIndex = ns.index;
  const withAlarms = opts.alarms === true || (opts.bulkAlarms ?? 0) > 0;
  if (withAlarms) addressSpace.installAlarmsAndConditionsService();
  const serverObject = addressSpace.rootFolder.objects.server;
  // An event source of the Server object, so its alarms reach a subscription on i=2253 (Part 9 §5.5.2).
  const press = ns.addObject({ organizedBy: addressSpace.rootFolder.objects, browseName: 'Press1', nodeId: 's=Press1', ...(withAlarms ? { eventSourceOf: serverObject, eventNotifier: 1 } : {}) });

  const vars = {} as Record<SimVariableName, UAVariable>;
  const id = (name: SimVariableName) => `s=Press1.${BROWSE_NAMES[name]}`;
  // AnalogItemType (Part 8): EURange and EngineeringUnits are properties of the variable, as a PLC
  // publishes them; the browse shows them as the variable's unit and range.
  const analog = (name: SimVariableName, low: number, high: number, unit: EUInformation, initial: number) =>
    ns.addAnalogDataItem({
      componentOf: press,
      browseName: BROWSE_NAMES[name],
      nodeId: id(name),
      dataType: 'Double',
      engineeringUnitsRange: { low, high },
      engineeringUnits: unit,
      description: unit.displayName.text ?? '',
      value: new Variant({ dataType: DataType.Double, value: initial }),
    } as Parameters<Namespace['addAnalogDataItem']>[0]);
  vars.temperature = analog('temperature', 0, 200, standardUnits.degree_celsius, 62);
  vars.pressure = analog('pressure', 0, 400, standardUnits.bar, 180);
  vars.speed = analog('speed', 0, 3000, standardUnits.revolutions_per_minute, 1200);
  vars.setpoint = analog('setpoint', 0, 200, standardUnits.degree_celsius, 65);
  const plain = (name: SimVariableName, dataType: string, value: Variant) =>
    ns.addVariable({ componentOf: press, browseName: BROWSE_NAMES[name], nodeId: id(name), dataType, value });
  vars.state = plain('state', 'Int32', new Variant({ dataType: DataType.Int32, value: 1 }));
  vars.count = plain('count', 'UInt32', new Variant({ dataType: DataType.UInt32, value: 0 }));
  vars.label = plain('label', 'String', new Variant({ dataType: DataType.String, value: 'Bracket-7' }));
  vars.running = plain('running', 'Boolean', new Variant({ dataType: DataType.Boolean, value: true }));
  vars.vector = ns.addVariable({
    componentOf: press,
    browseName: BROWSE_NAMES.vector,
    nodeId: id('vector'),
    dataType: 'Double',
    valueRank: 1,
    arrayDimensions: [3],
    value: new Variant({ dataType: DataType.Double, arrayType: VariantArrayType.Array, value: [0, 0, 0] }),
  });

  const bulkCount = opts.bulkVariables ?? 0;
  let bulkReads = 0;
  if (bulkCount > 0) {
    const folder = ns.addFolder(addressSpace.rootFolder.objects, { browseName: 'Bulk', nodeId: 's=Bulk' });
    // Bound to a getter that returns a new value at every read, so each sampling of a monitored
    // item is a change: N items sampled every second give exactly N notifications per second,
    // whatever the phase between the server's timers (a benchmark must not measure aliasing).
    const reads = new Float64Array(bulkCount);
    for (let i = 1; i <= bulkCount; i++) {
      const k = i - 1;
      ns.addVariable({
        componentOf: folder,
        browseName: `V${i}`,
        nodeId: `s=Bulk.V${i}`,
        dataType: 'Double',
        minimumSamplingInterval: 100,
        value: {
          get: () => {
            bulkReads += 1;
            return new Variant({ dataType: DataType.Double, value: i + (reads[k] += 1) / 1000 });
          },
        },
      });
    }
  }

  // Part 11: the process variables keep their history in memory; every value set from here on is
  // recorded with its source timestamp.
  const historized: SimVariableName[] = ['temperature', 'pressure', 'speed', 'state', 'count'];
  if (opts.historize ?? true) {
    for (const name of historized) addressSpace.installHistoricalDataNode(vars[name], { maxOnlineValues: opts.historyValues ?? 100_000 });
  }
  const histVars: UAVariable[] = [];
  if (opts.historizedBulk && opts.historizedBulk.count > 0) {
    const hb = opts.historizedBulk;
    const folder = ns.addFolder(addressSpace.rootFolder.objects, { browseName: 'Hist', nodeId: 's=Hist' });
    const perNode = Math.floor((hb.toMs - hb.fromMs) / hb.stepMs) + 1;
    for (let i = 1; i <= hb.count; i++) {
      const v = ns.addVariable({ componentOf: folder, browseName: `V${i}`, nodeId: `s=Hist.V${i}`, dataType: 'Double', value: new Variant({ dataType: DataType.Double, value: 0 }) });
      addressSpace.installHistoricalDataNode(v, { maxOnlineValues: perNode + 100_000 });
      for (let t = hb.fromMs; t <= hb.toMs; t += hb.stepMs) v.setValueFromSource(new Variant({ dataType: DataType.Double, value: i + (t % 1_000_000) / 1e6 }), StatusCodes.Good, new Date(t));
      histVars.push(v);
    }
  }

  const misbehaviour = opts.misbehave ? installMisbehaviour(server, ns, opts.misbehave) : null;
  const alarms = opts.alarms === true ? installPressAlarms(ns, press) : null;
  const bulkAlarms: SimAlarm[] = [];
  if ((opts.bulkAlarms ?? 0) > 0) {
    const folder = ns.addObject({ organizedBy: addressSpace.rootFolder.objects, browseName: 'BulkAlarms', nodeId: 's=BulkAlarms', eventSourceOf: serverObject, eventNotifier: 1 });
    for (let i = 1; i <= opts.bulkAlarms!; i++) bulkAlarms.push(manualAlarm(ns, folder, `A${i}`, `s=BulkAlarms.A${i}`, 500));
  }

  await server.start();
  const endpointUrl = `opc.tcp://127.0.0.1:${port}/UA/Press1`;
  if (opts.verbose) process.stderr.write(`OPC UA simulator listening on ${endpointUrl}\n`);

  // --- the process -------------------------------------------------------------------------
  const schedule = opts.stateSchedule && opts.stateSchedule.length > 0 ? opts.stateSchedule : DEFAULT_STATE_SCHEDULE;
  let stepIndex = 0;
  let stepStarted = performance.now();
  let state: number = schedule[0].state;
  let tick = 0;
  let paused = false;
  let count = 0;
  const set = (v: UAVariable, dataType: DataType, value: unknown, status: StatusCode = StatusCodes.Good, sourceTimestamp = new Date()) => {
    v.setValueFromSource(new Variant({ dataType, value }), status, sourceTimestamp);
  };
  set(vars.state, DataType.Int32, state);

  const update = () => {
    tick += 1;
    // Advance the state schedule by the monotonic clock.
    while (performance.now() - stepStarted >= schedule[stepIndex].durationMs) {
      stepStarted += schedule[stepIndex].durationMs;
      stepIndex = (stepIndex + 1) % schedule.length;
    }
    if (schedule[stepIndex].state !== state) {
      const previous = state;
      state = schedule[stepIndex].state;
      set(vars.state, DataType.Int32, state);
      set(vars.running, DataType.Boolean, state === 1);
      opts.onStateChange?.(state, previous);
    }
    const running = state === 1;
    const wobble = Math.sin(tick / 20);
    set(vars.temperature, DataType.Double, round(running ? 62 + 3 * wobble + Math.random() * 0.4 : 35 + Math.random() * 0.2));
    set(vars.pressure, DataType.Double, round(running ? 180 + 15 * Math.sin(tick / 7) + Math.random() : 1 + Math.random() * 0.1));
    set(vars.speed, DataType.Double, round(running ? 1200 + 30 * wobble : 0));
    if (running) {
      count += 1;
      set(vars.count, DataType.UInt32, count);
    }
    const now = Date.now();
    for (let i = 0; i < histVars.length; i++) set(histVars[i], DataType.Double, i + 1 + (now % 1_000_000) / 1e6);
    misbehaviour?.tick(now);
  };
  const timer = setInterval(() => {
    if (!paused) update();
  }, opts.updateIntervalMs ?? 1000);
  timer.unref();

  const nodeIds = {} as Record<SimVariableName, string>;
  const nsuNodeIds = {} as Record<SimVariableName, string>;
  for (const name of Object.keys(BROWSE_NAMES) as SimVariableName[]) {
    nodeIds[name] = `ns=${nsIndex};${id(name)}`;
    nsuNodeIds[name] = `nsu=${NAMESPACE_URI};${id(name)}`;
  }

  let closed = false;
  return {
    endpointUrl,
    port,
    namespaceUri: NAMESPACE_URI,
    nodeIds,
    nsuNodeIds,
    bulkNodeId: (i) => `ns=${nsIndex};s=Bulk.V${i}`,
    histNodeId: (i) => `ns=${nsIndex};s=Hist.V${i}`,
    certificateFile: server.certificateFile,
    setValue(name, value, o = {}) {
      const v = vars[name];
      const status = o.status === undefined || o.status === 'Good' ? StatusCodes.Good : o.status === 'Bad' ? StatusCodes.BadSensorFailure : o.status === 'Uncertain' ? StatusCodes.UncertainLastUsableValue : o.status;
      const dataType = typeof value === 'string' ? DataType.String : typeof value === 'boolean' ? DataType.Boolean : (v.dataTypeObj.basicDataType as DataType);
      if (name === 'count' && typeof value === 'number') count = value;
      if (!o.sourceTimestamp) {
        v.setValueFromSource(new Variant({ dataType, value }), status, new Date());
        return;
      }
      // setValueFromSource stamps the server time with the source time; a PLC reporting a buffered
      // value has an old SourceTimestamp and a current ServerTimestamp (Part 4 §7.11), so build it.
      const dv = new DataValue({ value: new Variant({ dataType, value }), statusCode: status, sourceTimestamp: o.sourceTimestamp, serverTimestamp: new Date() });
      (v as unknown as { _internal_set_dataValue(dv: DataValue): void })._internal_set_dataValue(dv);
    },
    pauseUpdates: () => {
      paused = true;
    },
    resumeUpdates: () => {
      paused = false;
    },
    machineState: () => state,
    sessionCount: () => server.engine.currentSessionCount,
    bulkStats: () => ({ reads: bulkReads, subscriptions: subscriptionStats(server) }),
    monitoredItemStats: () => ({ ...createCalls, callSizes: [...createCalls.callSizes], itemsBySession: itemsBySession(server) }),
    attributeReads: () => new Map(attributeReads),
    misbehaviour,
    continuationPoints: () =>
      Object.values((server.engine as unknown as { _sessions: Record<string, { continuationPointManager?: { _map?: Map<string, unknown> } }> })._sessions).reduce(
        (n, session) => n + (session.continuationPointManager?._map?.size ?? 0),
        0,
      ),
    alarms,
    bulkAlarm: (i) => {
      const a = bulkAlarms[i - 1];
      if (!a) throw new Error(`bulk alarm ${i} does not exist (bulkAlarms: ${bulkAlarms.length})`);
      return a;
    },
    raiseRawEvent(eventType, fields) {
      (press as unknown as { raiseEvent(t: string, d: Record<string, unknown>): void }).raiseEvent(eventType, { ...fields });
    },
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      // shutdown(0): no grace period; clients see the connection drop like a power cut of the PLC.
      await server.shutdown(0);
      await serverCertificateManager.dispose();
      await userCertificateManager.dispose();
      if (opts.verbose) process.stderr.write(`OPC UA simulator on port ${port} stopped\n`);
    },
  };
}

/**
 * Press1's alarms: a jam detected by a sensor bit (OffNormalAlarmType: active while JamDetected is
 * not its normal value false, Part 9 §5.8.23) and an overtemperature of the hydraulic unit
 * (AlarmConditionType raised by the PLC program), both with ConfirmedState (Part 9 §5.7.3).
 */
function installPressAlarms(ns: Namespace, press: UAObject): { jam: SimAlarm; overtemperature: SimAlarm } {
  const jamDetected = ns.addVariable({ componentOf: press, browseName: 'JamDetected', nodeId: 's=Press1.JamDetected', dataType: 'Boolean', value: new Variant({ dataType: DataType.Boolean, value: false }) });
  const normal = ns.addVariable({ componentOf: press, browseName: 'JamNormalState', nodeId: 's=Press1.JamNormalState', dataType: 'Boolean', value: new Variant({ dataType: DataType.Boolean, value: false }) });
  const jam = ns.instantiateOffNormalAlarm({
    browseName: 'Jam',
    nodeId: 's=Press1.Jam',
    conditionName: 'Jam',
    componentOf: press,
    conditionSource: press,
    inputNode: jamDetected,
    normalState: normal,
    optionals: ['ConfirmedState', 'Confirm'],
  } as Parameters<Namespace['instantiateOffNormalAlarm']>[0]);
  // SourceName as a PLC reports it (node-opcua uses the browse name with its namespace index, "2:Press1").
  jam.sourceName.setValueFromSource(new Variant({ dataType: DataType.String, value: 'Press1' }));
  let jamInfo = { severity: 700, message: 'Material jam at the infeed' };
  jam.calculateConditionInfo = (_state, isActive) =>
    new ConditionInfo({ severity: jamInfo.severity, message: isActive ? jamInfo.message : 'Jam cleared', quality: StatusCodes.Good, retain: isActive ? true : needsRetain(jam) });
  const jamAlarm: SimAlarm = {
    name: 'Jam',
    conditionId: `ns=${ns.index};s=Press1.Jam`,
    activate(o = {}) {
      jamInfo = { severity: o.severity ?? 700, message: o.message ?? 'Material jam at the infeed' };
      jamDetected.setValueFromSource(new Variant({ dataType: DataType.Boolean, value: true }));
    },
    deactivate() {
      jamDetected.setValueFromSource(new Variant({ dataType: DataType.Boolean, value: false }));
    },
    isActive: () => jam.currentBranch().getActiveState() === true,
    transitionTime: () => transitionTimeOf(jam),
    eventId: () => jam.eventId.readValue().value.value as Buffer,
  };
  const overtemperature = manualAlarm(ns, press, 'Overtemperature', 's=Press1.Overtemperature', 800, 'Hydraulic oil over 70 °C', 'Press1');
  return { jam: jamAlarm, overtemperature };
}

/** Retain after the inactive transition: while the activation still waits for Acknowledge or Confirm (Part 9 §5.5.2). */
function needsRetain(alarm: UAAlarmConditionEx): boolean {
  const branch = alarm.currentBranch();
  const acked = branch.getAckedState() === true;
  const confirmed = alarm.confirmedState ? branch.getConfirmedState() === true : true;
  return !acked || !confirmed;
}

function transitionTimeOf(alarm: UAAlarmConditionEx): number | null {
  const v = alarm.activeState.transitionTime?.readValue().value.value as Date | null | undefined;
  return v instanceof Date ? v.getTime() : null;
}

/** An AlarmConditionType raised and cleared by the program (no input node). */
function manualAlarm(ns: Namespace, parent: UAObject, name: string, nodeId: string, severity: number, message = `${name} active`, sourceName?: string): SimAlarm {
  const inputNode = ns.addVariable({ componentOf: parent, browseName: `${name}Input`, nodeId: `${nodeId}Input`, dataType: 'Boolean', value: new Variant({ dataType: DataType.Boolean, value: false }) });
  const alarm = ns.instantiateAlarmCondition('AlarmConditionType', {
    browseName: name,
    nodeId,
    conditionName: name,
    componentOf: parent,
    conditionSource: parent,
    inputNode,
    optionals: ['ConfirmedState', 'Confirm'],
  } as Parameters<Namespace['instantiateAlarmCondition']>[1]);
  if (sourceName) alarm.sourceName.setValueFromSource(new Variant({ dataType: DataType.String, value: sourceName }));
  return {
    name,
    conditionId: `ns=${ns.index};${nodeId}`,
    activate(o = {}) {
      alarm.activateAlarm();
      if (alarm.confirmedState) alarm.currentBranch().setConfirmedState(false);
      alarm.raiseNewCondition({ severity: o.severity ?? severity, message: o.message ?? message, quality: StatusCodes.Good, retain: true });
    },
    deactivate(o = {}) {
      const retain = o.retain ?? needsRetain(alarm);
      alarm.deactivateAlarm(retain);
      alarm.raiseNewCondition({ severity: alarm.currentBranch().getSeverity(), message: o.message ?? `${name} cleared`, quality: StatusCodes.Good, retain });
    },
    isActive: () => alarm.currentBranch().getActiveState() === true,
    transitionTime: () => transitionTimeOf(alarm),
    eventId: () => alarm.eventId.readValue().value.value as Buffer,
  };
}

function round(v: number): number {
  return Math.round(v * 1000) / 1000;
}

/** `tsx src/sim/opcua-server.ts [port]`: run the simulator alone (the demo starts it in-process). */
if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.argv[2] ?? 4840);
  startOpcuaSimulator({ port, verbose: true, users: [{ username: 'operator', password: 'operator' }] })
    .then((sim) => {
      process.stderr.write(`nodes:\n${Object.entries(sim.nodeIds).map(([k, v]) => `  ${k}: ${v}`).join('\n')}\n`);
      const stop = () => void sim.close().then(() => process.exit(0));
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    })
    .catch((err) => {
      process.stderr.write(`simulator failed: ${(err as Error).message}\n`);
      process.exit(1);
    });
}

/**
 * Counts the CreateMonitoredItems requests by wrapping the server's handler (node-opcua dispatches
 * a request to the instance's `_on_<RequestName>` method, base_server.js), before its
 * MaxMonitoredItemsPerCall check, so a call it refuses is counted too.
 */
function countCreateMonitoredItems(server: OPCUAServer): Omit<MonitoredItemStats, 'itemsBySession'> {
  const c = { createCalls: 0, itemsRequested: 0, maxItemsPerCall: 0, callsOverLimit: 0, callSizes: [] as number[] };
  type Handler = (message: { request: { itemsToCreate?: unknown[] | null } }, channel: unknown) => unknown;
  const s = server as unknown as { _on_CreateMonitoredItemsRequest: Handler };
  const original = s._on_CreateMonitoredItemsRequest.bind(server);
  s._on_CreateMonitoredItemsRequest = (message, channel) => {
    const n = message.request.itemsToCreate?.length ?? 0;
    const limit = server.engine.serverCapabilities.operationLimits.maxMonitoredItemsPerCall;
    c.createCalls += 1;
    c.itemsRequested += n;
    c.maxItemsPerCall = Math.max(c.maxItemsPerCall, n);
    if (limit > 0 && n > limit) c.callsOverLimit += 1;
    c.callSizes.push(n);
    if (c.callSizes.length > 10_000) c.callSizes.shift();
    return original(message, channel);
  };
  return c;
}

/** Counts the nodes each Read request asks for, by attribute id (the same wrapping as above). */
function countAttributeReads(server: OPCUAServer): Map<number, number> {
  const counts = new Map<number, number>();
  type Handler = (message: { request: { nodesToRead?: Array<{ attributeId: number }> | null } }, channel: unknown) => unknown;
  const s = server as unknown as { _on_ReadRequest: Handler };
  const original = s._on_ReadRequest.bind(server);
  s._on_ReadRequest = (message, channel) => {
    for (const n of message.request.nodesToRead ?? []) counts.set(n.attributeId, (counts.get(n.attributeId) ?? 0) + 1);
    return original(message, channel);
  };
  return counts;
}

function itemsBySession(server: OPCUAServer): Record<string, number> {
  const out: Record<string, number> = {};
  const sessions = Object.values((server.engine as unknown as { _sessions: Record<string, { sessionName: string; publishEngine?: { subscriptions: Array<{ monitoredItemCount: number }> } | null }> })._sessions);
  for (const s of sessions) out[s.sessionName] = (out[s.sessionName] ?? 0) + (s.publishEngine?.subscriptions ?? []).reduce((t, sub) => t + sub.monitoredItemCount, 0);
  return out;
}

/** Per-subscription counters of every open session (node-opcua internals, read-only). */
function subscriptionStats(server: OPCUAServer): BulkStats['subscriptions'] {
  interface Sub {
    id: number;
    monitoredItemCount: number;
    state: number;
    subscriptionDiagnostics: { dataChangeNotificationsCount: number; monitoringQueueOverflowCount: number };
    _pending_notifications?: { size: number };
    monitoredItems: Map<number, { queue?: unknown[] }>;
  }
  interface Session {
    sessionName: string;
    publishEngine?: { subscriptions: Sub[]; pendingPublishRequestCount: number } | null;
  }
  const sessions = Object.values((server.engine as unknown as { _sessions: Record<string, Session> })._sessions);
  const states = ['?', 'CLOSED', 'CREATING', 'NORMAL', 'LATE', 'KEEPALIVE', 'TERMINATED'];
  return sessions.flatMap((s) =>
    (s.publishEngine?.subscriptions ?? []).map((sub) => ({
      session: s.sessionName,
      id: sub.id,
      items: sub.monitoredItemCount,
      notificationsSent: sub.subscriptionDiagnostics.dataChangeNotificationsCount,
      queueOverflows: sub.subscriptionDiagnostics.monitoringQueueOverflowCount,
      pendingNotifications: sub._pending_notifications?.size ?? 0,
      queuedInItems: [...sub.monitoredItems.values()].reduce((t, item) => t + (item.queue?.length ?? 0), 0),
      queuedPublishRequests: s.publishEngine?.pendingPublishRequestCount ?? 0,
      state: states[sub.state] ?? String(sub.state),
    })),
  );
}
