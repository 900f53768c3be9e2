import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/schema.js';
import type { ModbusSimulator } from './modbus-device.js';
import type { MqttSimulator } from './mqtt-publisher.js';
import type { MachineStateStep, OpcuaSimulator } from './opcua-server.js';

/**
 * The demo's simulated plant, started in the demo's process:
 *
 * - Press 1: an OPC UA server (opcua-server.ts) whose machine state follows a script: running,
 *   one stop of `stopForMs` after `stopAfterMs`, running again; the stop repeats every
 *   `repeatEveryMs` so a demo left running keeps producing downtimes. During each stop its server
 *   raises alarms (OPC UA Alarms & Conditions): a jam when it stops, an overtemperature halfway
 *   through, both cleared when it runs again;
 * - Mixer 1: a Modbus TCP device (modbus-device.ts);
 * - Packer 1 (JSON) and Oven 1 (a Sparkplug B edge node): an MQTT publisher (mqtt-publisher.ts)
 *   that publishes to the broker built into the gateway.
 *
 * Where each part listens is read from the gateway configuration that reads it (config/demo.yaml):
 * the file is the plant's wiring, so the two cannot disagree. A part the configuration does not
 * read is not started.
 */

export interface PlantWiring {
  /** OPC UA server port, from the first `opcua.servers[]` endpoint on this machine. */
  opcua: { port: number; endpoint: string } | null;
  /** Modbus TCP port and unit id, from the first TCP `modbus.devices[]` entry on this machine. */
  modbus: { port: number; unitId: number } | null;
  /** Where the publisher connects: the gateway's embedded broker (`mqtt.broker`). */
  mqtt: { url: string; username?: string; password?: string } | null;
}

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/** The plant parts `config` reads, and on which ports they must listen. */
export function plantWiring(config: GatewayConfig): PlantWiring {
  let opcua: PlantWiring['opcua'] = null;
  for (const server of config.opcua?.servers ?? []) {
    const url = new URL(server.endpoint);
    if (LOCAL_HOSTS.has(url.hostname)) {
      opcua = { port: Number(url.port || 4840), endpoint: server.endpoint };
      break;
    }
  }
  const device = config.modbus?.devices.find((d) => d.transport === 'tcp' && d.host !== undefined && LOCAL_HOSTS.has(d.host));
  const modbus = device ? { port: device.port, unitId: device.unit_id } : null;
  const broker = config.mqtt?.broker;
  const mqtt = broker?.enabled
    ? { url: `mqtt://127.0.0.1:${broker.port}`, ...(broker.username ? { username: broker.username, password: broker.password?.reveal() } : {}) }
    : null;
  return { opcua, modbus, mqtt };
}

/** The ports `--ports-from N` gives each listener: the order is part of the demo's help text. */
export const DEMO_PORT_ORDER = ['emulator', 'gateway HTTP', 'OPC UA', 'Modbus', 'MQTT'] as const;

/** The parts of a raw (not yet validated) configuration that name the demo's ports. */
export interface RawDemoSections {
  service?: { base_url?: string; auth_url?: string };
  http?: Record<string, unknown>;
  opcua?: { servers?: Array<{ endpoint?: string }> };
  modbus?: { devices?: Array<{ transport?: string; port?: number }> };
  mqtt?: { broker?: { port?: number } };
}

/**
 * Rewrites a raw demo configuration (as parsed from YAML, before validation) to listen on
 * `base`, `base + 1`, ... in DEMO_PORT_ORDER, for a second demo beside the first or a test.
 */
export function withDemoPorts<T extends RawDemoSections>(raw: T, base: number): T {
  const setPort = (url: string, port: number) => {
    const u = new URL(url);
    u.port = String(port);
    // URL keeps a trailing slash on a bare origin; the config forms have none.
    return url.endsWith('/') ? u.toString() : u.toString().replace(/\/$/, '');
  };
  const out = structuredClone(raw);
  if (out.service?.base_url) out.service.base_url = setPort(out.service.base_url, base);
  if (out.service?.auth_url) out.service.auth_url = setPort(out.service.auth_url, base);
  out.http = { ...out.http, port: base + 1 };
  for (const server of out.opcua?.servers ?? []) if (server.endpoint) server.endpoint = setPort(server.endpoint, base + 2);
  for (const device of out.modbus?.devices ?? []) if ((device.transport ?? 'tcp') === 'tcp') device.port = base + 3;
  if (out.mqtt?.broker) out.mqtt.broker.port = base + 4;
  return out;
}

/** The first of `ports` another program listens on (on 127.0.0.1), or null when all are free. */
export async function firstBusyPort<T extends { port: number }>(ports: T[]): Promise<T | null> {
  for (const p of ports) {
    const free = await new Promise<boolean>((resolve) => {
      const srv = createServer();
      srv.once('error', () => resolve(false));
      srv.listen(p.port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (!free) return p;
  }
  return null;
}

export interface PressScript {
  /** Press 1 stops this long after the plant started ... */
  stopAfterMs: number;
  /** ... for this long ... */
  stopForMs: number;
  /** ... and again every this often (default 5 min, at least the stop plus a minute). */
  repeatEveryMs?: number;
}

export type PlantEvent =
  | { kind: 'press_stopped'; at: number }
  | { kind: 'press_running'; at: number; stoppedMs: number }
  /** Press 1's OPC UA server raised or cleared one of its alarms. */
  | { kind: 'alarm_raised'; at: number; alarm: string; type: string; severity: number }
  | { kind: 'alarm_cleared'; at: number; alarm: string };

export interface PlantOptions {
  wiring: PlantWiring;
  press: PressScript;
  /** Folder for the OPC UA server's certificate; kept between runs because key generation is slow. */
  dataDir: string;
  onEvent?: (event: PlantEvent) => void;
  logger?: Logger;
}

/** A simulated device the demo can take down and bring back. */
export type DemoDeviceName = 'press1' | 'mixer1' | 'packer1' | 'oven1';

export interface DemoDeviceState {
  name: DemoDeviceName;
  /** What the operator calls it: "Press 1". */
  label: string;
  /** How it reaches the gateway: "OPC UA server opc.tcp://127.0.0.1:4840/UA/Press1". */
  what: string;
  up: boolean;
  /** When it last went down or came up (epoch ms). */
  since: number;
}

/** Asked for a device the plant does not run (not in the demo's configuration, or no such name). */
export class UnknownDeviceError extends Error {}

export interface Plant {
  opcua(): OpcuaSimulator | null;
  modbus(): ModbusSimulator | null;
  mqtt(): MqttSimulator | null;
  /** When Press 1's script started (epoch ms). */
  readonly startedAt: number;
  /** One line per running part, for the demo's banner. */
  describe(): string[];
  /** The devices the plant runs, up or down. */
  devices(): DemoDeviceState[];
  /**
   * Takes a device down (its server, or its MQTT client, really stops: the gateway sees the
   * connection go) or brings it back on the same port. Doing what is already so changes nothing.
   */
  setDevice(name: string, up: boolean): Promise<DemoDeviceState>;
  /** Starts the MQTT publishers; called once the gateway (and so its embedded broker) is up. */
  startPublisher(): Promise<void>;
  close(): Promise<void>;
}

/** Press 1's schedule: running, the scripted stop, running until the next repetition. */
export function pressSchedule(script: PressScript): MachineStateStep[] {
  const repeat = Math.max(script.repeatEveryMs ?? 300_000, script.stopAfterMs + script.stopForMs + 60_000);
  return [
    { state: 1, durationMs: script.stopAfterMs },
    { state: 0, durationMs: script.stopForMs },
    { state: 1, durationMs: repeat - script.stopAfterMs - script.stopForMs },
  ];
}

export async function startPlant(opts: PlantOptions): Promise<Plant> {
  const { wiring } = opts;
  let stoppedAt: number | null = null;
  let overtemperatureTimer: NodeJS.Timeout | null = null;
  let opcua: OpcuaSimulator | null = null;
  let modbus: ModbusSimulator | null = null;
  let packer: MqttSimulator | null = null;
  let oven: MqttSimulator | null = null;
  let publishersStarted = false;
  let startedAt = Date.now();
  let closed = false;
  const switched = new Map<DemoDeviceName, { up: boolean; since: number }>();

  const onStateChange = (state: number) => {
    const at = Date.now();
    const alarms = opcua?.alarms;
    if (state !== 1 && stoppedAt === null) {
      stoppedAt = at;
      opts.onEvent?.({ kind: 'press_stopped', at });
      // The press says why it stopped, through its own alarms.
      if (alarms) {
        alarms.jam.activate();
        opts.onEvent?.({ kind: 'alarm_raised', at, alarm: 'Jam', type: 'OffNormalAlarm', severity: 700 });
        overtemperatureTimer = setTimeout(() => {
          overtemperatureTimer = null;
          if (stoppedAt === null) return;
          alarms.overtemperature.activate();
          opts.onEvent?.({ kind: 'alarm_raised', at: Date.now(), alarm: 'Overtemperature', type: 'AlarmCondition', severity: 800 });
        }, Math.floor(opts.press.stopForMs / 2));
        overtemperatureTimer.unref();
      }
    } else if (state === 1 && stoppedAt !== null) {
      if (overtemperatureTimer) clearTimeout(overtemperatureTimer);
      overtemperatureTimer = null;
      if (alarms) {
        for (const a of [alarms.jam, alarms.overtemperature]) {
          if (!a.isActive()) continue;
          a.deactivate();
          opts.onEvent?.({ kind: 'alarm_cleared', at, alarm: a.name });
        }
      }
      opts.onEvent?.({ kind: 'press_running', at, stoppedMs: at - stoppedAt });
      stoppedAt = null;
    }
  };

  /** Press 1's server; `schedule` is its script (brought back up, it just runs). */
  const startPress = async (port: number, schedule: MachineStateStep[]) => {
    // Loaded only here (node-opcua takes seconds to load), after the hook that sends node-opcua's
    // console chatter to the gateway's log at debug.
    await import('../sources/opcua/node-opcua-logging.js');
    const { startOpcuaSimulator } = await import('./opcua-server.js');
    return startOpcuaSimulator({ port, securityModes: ['None'], pkiDir: join(opts.dataDir, 'opcua-server-pki'), stateSchedule: schedule, alarms: true, onStateChange });
  };
  const stopPress = async () => {
    if (overtemperatureTimer) clearTimeout(overtemperatureTimer);
    overtemperatureTimer = null;
    stoppedAt = null;
    const sim = opcua;
    opcua = null;
    await sim?.close();
  };
  let mixerDevice: ModbusSimulator['device'] | undefined;
  const startMixer = async () => {
    const { startModbusSimulator } = await import('./modbus-device.js');
    // The same device (registers, values) as before it went down: a power cycle, not a new device.
    return startModbusSimulator({ port: wiring.modbus!.port, unitId: wiring.modbus!.unitId, device: mixerDevice });
  };
  const stopMixer = async () => {
    const sim = modbus;
    modbus = null;
    mixerDevice = sim?.device;
    await sim?.close();
  };
  // Packer 1 and Oven 1 are separate MQTT clients, so each can go away alone.
  const startPublisher = async (which: 'packer1' | 'oven1') => {
    const { startMqttSimulator } = await import('./mqtt-publisher.js');
    const options = which === 'packer1' ? { sparkplug: false as const } : { packer: false };
    return startMqttSimulator({ ...wiring.mqtt!, ...options, clientId: `demo-plant-${which}`, logger: opts.logger });
  };
  const stopPublisher = async (sim: MqttSimulator | null) => {
    if (!sim) return;
    // The broker lives in the gateway, which may have stopped first. A client that lost it would
    // wait forever for the acknowledgements of its last QoS 1 messages, so it ends without waiting.
    if (!sim.client.connected) sim.client.end(true);
    await Promise.race([sim.close(), new Promise((r) => setTimeout(r, 2_000).unref())]);
  };

  const closeAll = async () => {
    closed = true;
    await stopPublisher(oven).catch(() => undefined);
    await stopPublisher(packer).catch(() => undefined);
    oven = packer = null;
    await stopMixer().catch(() => undefined);
    await stopPress().catch(() => undefined);
  };

  try {
    if (wiring.opcua) {
      opcua = await startPress(wiring.opcua.port, pressSchedule(opts.press));
      // Press 1's script runs from here.
      startedAt = Date.now();
    }
    if (wiring.modbus) modbus = await startMixer();
  } catch (err) {
    await closeAll();
    throw err;
  }

  const known = (): Array<{ name: DemoDeviceName; label: string; what: string }> => [
    ...(wiring.opcua ? [{ name: 'press1' as const, label: 'Press 1', what: `OPC UA server ${wiring.opcua.endpoint}` }] : []),
    ...(wiring.modbus ? [{ name: 'mixer1' as const, label: 'Mixer 1', what: `Modbus TCP device 127.0.0.1:${wiring.modbus.port}, unit ${wiring.modbus.unitId}` }] : []),
    ...(wiring.mqtt
      ? [
          { name: 'packer1' as const, label: 'Packer 1', what: `MQTT client publishing JSON to ${wiring.mqtt.url}` },
          { name: 'oven1' as const, label: 'Oven 1', what: `Sparkplug B edge node on ${wiring.mqtt.url}` },
        ]
      : []),
  ];
  const stateOf = (d: { name: DemoDeviceName; label: string; what: string }): DemoDeviceState => {
    const s = switched.get(d.name);
    return { ...d, up: s?.up ?? true, since: s?.since ?? startedAt };
  };
  // One switch at a time: a second click while a server starts waits for the first.
  let chain: Promise<unknown> = Promise.resolve();

  return {
    opcua: () => opcua,
    modbus: () => modbus,
    mqtt: () => packer,
    startedAt,
    describe: () => [
      ...(wiring.opcua ? [`Press 1    OPC UA server     ${wiring.opcua.endpoint}`] : []),
      ...(wiring.modbus ? [`Mixer 1    Modbus TCP device 127.0.0.1:${wiring.modbus.port}, unit ${wiring.modbus.unitId}`] : []),
      ...(wiring.mqtt
        ? [`Packer 1   MQTT JSON         ${wiring.mqtt.url} (the gateway's broker), topic plant/packer1/status`, `Oven 1     Sparkplug B node  ${wiring.mqtt.url}, group plant, node oven-ctl, device oven1`]
        : []),
    ],
    devices: () => known().map(stateOf),
    setDevice(name, up) {
      const device = known().find((d) => d.name === name);
      if (!device) throw new UnknownDeviceError(`no simulated device "${name}" in this demo; its devices: ${known().map((d) => d.name).join(', ') || 'none'}`);
      const run = chain.then(async () => {
        if (closed) throw new Error('the demo is stopping');
        if (stateOf(device).up === up) return stateOf(device);
        switch (device.name) {
          case 'press1':
            if (up) opcua = await startPress(wiring.opcua!.port, [{ state: 1, durationMs: 3_600_000 }]);
            else await stopPress();
            break;
          case 'mixer1':
            if (up) modbus = await startMixer();
            else await stopMixer();
            break;
          case 'packer1':
            if (up) packer = publishersStarted ? await startPublisher('packer1') : null;
            else {
              await stopPublisher(packer);
              packer = null;
            }
            break;
          case 'oven1':
            if (up) oven = publishersStarted ? await startPublisher('oven1') : null;
            else {
              await stopPublisher(oven);
              oven = null;
            }
            break;
        }
        switched.set(device.name, { up, since: Date.now() });
        return stateOf(device);
      });
      chain = run.catch(() => undefined);
      return run;
    },
    async startPublisher() {
      if (!wiring.mqtt || publishersStarted) return;
      publishersStarted = true;
      if (switched.get('packer1')?.up !== false) packer = await startPublisher('packer1');
      if (switched.get('oven1')?.up !== false) oven = await startPublisher('oven1');
    },
    close: closeAll,
  };
}
