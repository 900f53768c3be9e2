import mqtt, { type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import { sparkplugCodec } from '../sources/mqtt/decoders/sparkplug.js';
import { PrimaryHostWatch } from './sparkplug-host-watch.js';

/**
 * The MQTT part of the simulated plant (demo and tests):
 *
 * - Packer 1 publishes its line state as JSON on `plant/packer1/status`:
 *   `{"ts": <epoch ms>, "rate": 118.4, "state": 1, "rejects": 12, "temperature": 41.3}`
 *   (machine variables mvr_packer1_rate|state|rejects|temperature, mapped by JSON path);
 * - Oven 1 is a Sparkplug B 3.0 edge node `oven-ctl` in group `plant` with device `oven1`: NBIRTH and
 *   DBIRTH certificates with aliases, then DDATA carrying aliases only, an NDEATH Will with bdSeq,
 *   and it answers "Node Control/Rebirth" commands (metrics Temperature, Setpoint, State, Gas Flow →
 *   mvr_oven1_temperature|setpoint|state|gas_flow, mapped by metric name). With `primaryHostId` it
 *   waits for that Primary Host's STATE before its BIRTH, keeps its DDATA while the host is offline
 *   and sends them, flagged is_historical, after its next BIRTH (store and forward).
 *
 * `demoMqttConnection()` gives the gateway configuration that reads exactly this.
 */
export interface MqttSimulatorOptions {
  url: string;
  username?: string;
  password?: string;
  clientId?: string;
  /** One packer message and one oven DDATA every interval. Default 1000 ms. */
  intervalMs?: number;
  /** QoS of the packer JSON messages. Default 1. */
  qos?: 0 | 1 | 2;
  packerTopic?: string;
  sparkplug?: { group?: string; edgeNode?: string; device?: string } | false;
  /** Publish Packer 1's JSON messages (default true); false with `sparkplug` leaves only Oven 1's edge node. */
  packer?: boolean;
  /** Sparkplug 3.0 Primary Host the edge node waits for (spBv1.0/STATE/<id>); unset: it publishes regardless. */
  primaryHostId?: string;
  logger?: Logger;
}

export interface MqttSimulator {
  readonly client: MqttClient;
  readonly packerTopic: string;
  /** Messages published so far, by kind. */
  counts(): { packer: number; nbirth: number; dbirth: number; ddata: number; rebirthRequests: number; stored: number; forwarded: number };
  /** Publishes one packer message and one oven DDATA now. */
  tick(): Promise<void>;
  /** With primaryHostId: whether the edge node takes its Primary Host as online; else null. */
  primaryHostOnline(): boolean | null;
  /** Sends NBIRTH + DBIRTH again, as on a rebirth request. */
  rebirth(): Promise<void>;
  close(): Promise<void>;
}

const MAX_STORED = 10_000;

export const OVEN_METRICS = [
  { name: 'Temperature', alias: 1, type: 'Float', variable: 'mvr_oven1_temperature' },
  { name: 'Setpoint', alias: 2, type: 'Float', variable: 'mvr_oven1_setpoint' },
  { name: 'State', alias: 3, type: 'Int32', variable: 'mvr_oven1_state' },
  { name: 'Gas Flow', alias: 4, type: 'Double', variable: 'mvr_oven1_gas_flow' },
] as const;

export const PACKER_FIELDS = [
  { path: 'rate', variable: 'mvr_packer1_rate' },
  { path: 'state', variable: 'mvr_packer1_state' },
  { path: 'rejects', variable: 'mvr_packer1_rejects' },
  { path: 'temperature', variable: 'mvr_packer1_temperature' },
] as const;

/** The raw `mqtt.connections[]` entry that reads what the simulator publishes. */
export function demoMqttConnection(opts: { name?: string; url: string; clientId?: string; group?: string }): Record<string, unknown> {
  const group = opts.group ?? 'plant';
  return {
    name: opts.name ?? 'plant-mqtt',
    url: opts.url,
    ...(opts.url === 'embedded' ? {} : { client_id: opts.clientId ?? 'edge-gateway-demo' }),
    subscriptions: [
      { topic: 'plant/packer1/status', format: 'json', qos: 1, timestamp: { path: 'ts', format: 'epoch_ms' }, values: PACKER_FIELDS.map((f) => ({ ...f })) },
      { topic: `spBv1.0/${group}/#`, format: 'sparkplug', qos: 1, metrics: OVEN_METRICS.map((m) => ({ name: m.name, variable: m.variable })) },
    ],
  };
}

export async function startMqttSimulator(opts: MqttSimulatorOptions): Promise<MqttSimulator> {
  const packerTopic = opts.packerTopic ?? 'plant/packer1/status';
  const sp = opts.sparkplug === false ? null : { group: opts.sparkplug?.group ?? 'plant', edgeNode: opts.sparkplug?.edgeNode ?? 'oven-ctl', device: opts.sparkplug?.device ?? 'oven1' };
  const interval = opts.intervalMs ?? 1_000;
  const qos = opts.qos ?? 1;
  const counts = { packer: 0, nbirth: 0, dbirth: 0, ddata: 0, rebirthRequests: 0, stored: 0, forwarded: 0 };
  const watch = sp && opts.primaryHostId !== undefined ? new PrimaryHostWatch(opts.primaryHostId) : null;
  /** Store and forward: oven DDATA not sent while the Primary Host was offline (the newest MAX_STORED). */
  const stored: Array<{ ts: number; values: Record<string, number> }> = [];
  let bdSeq = 0;
  let seq = 0;
  let tickNo = 0;
  let rejects = 0;
  const nextSeq = () => {
    const s = seq;
    seq = (seq + 1) % 256;
    return s;
  };

  const topic = (type: string, device?: string) => (sp ? `spBv1.0/${sp.group}/${type}/${sp.edgeNode}${device ? `/${device}` : ''}` : '');
  const ndeathPayload = () => Buffer.from(sparkplugCodec.encodePayload({ timestamp: Date.now(), metrics: [{ name: 'bdSeq', type: 'UInt64', value: bdSeq }] }));

  const client = await mqtt.connectAsync(opts.url, {
    clientId: opts.clientId ?? `plant-sim-${process.pid}-${Math.random().toString(16).slice(2, 8)}`,
    username: opts.username,
    password: opts.password,
    reconnectPeriod: 1_000,
    connectTimeout: 5_000,
    // Sparkplug B 3.0 chapter 5: the NDEATH is the Will, QoS 1, with the bdSeq of the coming NBIRTH.
    ...(sp ? { will: { topic: topic('NDEATH'), payload: ndeathPayload(), qos: 1 as const, retain: false } } : {}),
  });

  const ovenValues = () => {
    const t = tickNo;
    return {
      Temperature: Math.round((180 + 4 * Math.sin(t / 20)) * 10) / 10,
      Setpoint: 180,
      State: t % 600 < 570 ? 1 : 2,
      'Gas Flow': Math.round((12 + 1.5 * Math.cos(t / 15)) * 100) / 100,
    } as Record<string, number>;
  };

  const publish = (t: string, payload: Buffer | string, q: 0 | 1 | 2) => client.publishAsync(t, payload, { qos: q, retain: false }).then(() => undefined);

  const birth = async () => {
    if (!sp) return;
    seq = 0;
    const now = Date.now();
    // NBIRTH: seq 0, bdSeq, and the Rebirth control the host may write (spec chapter 6).
    await publish(
      topic('NBIRTH'),
      Buffer.from(
        sparkplugCodec.encodePayload({
          timestamp: now,
          seq: nextSeq(),
          metrics: [
            { name: 'bdSeq', type: 'UInt64', value: bdSeq, timestamp: now },
            { name: 'Node Control/Rebirth', alias: 100, type: 'Boolean', value: false, timestamp: now },
          ],
        }),
      ),
      0,
    );
    counts.nbirth += 1;
    const values = ovenValues();
    await publish(
      topic('DBIRTH', sp.device),
      Buffer.from(
        sparkplugCodec.encodePayload({
          timestamp: now,
          seq: nextSeq(),
          metrics: OVEN_METRICS.map((m) => ({ name: m.name, alias: m.alias, type: m.type, value: values[m.name], timestamp: now })),
        }),
      ),
      0,
    );
    counts.dbirth += 1;
  };

  const tick = async () => {
    tickNo += 1;
    const now = Date.now();
    if (tickNo % 7 === 0) rejects += 1;
    if (opts.packer !== false) {
      const packer = {
        ts: now,
        rate: Math.round((120 + 6 * Math.sin(tickNo / 10)) * 10) / 10,
        state: tickNo % 300 < 280 ? 1 : 3,
        rejects,
        temperature: Math.round((41 + Math.sin(tickNo / 40)) * 10) / 10,
      };
      await publish(packerTopic, JSON.stringify(packer), qos);
      counts.packer += 1;
    }
    if (sp && watch && !watch.hostOnline) {
      if (stored.length >= MAX_STORED) stored.shift();
      stored.push({ ts: now, values: ovenValues() });
      counts.stored += 1;
    } else if (sp) {
      const values = ovenValues();
      // DDATA carries aliases only, as real edge nodes do to save bytes.
      await publish(
        topic('DDATA', sp.device),
        Buffer.from(sparkplugCodec.encodePayload({ timestamp: now, seq: nextSeq(), metrics: OVEN_METRICS.map((m) => ({ alias: m.alias, type: m.type, value: values[m.name], timestamp: now })) })),
        0,
      );
      counts.ddata += 1;
    }
  };

  /** After a BIRTH: the stored values, one DDATA per instant, metrics flagged is_historical (spec chapter 6, Metric). */
  const forward = async () => {
    while (stored.length > 0 && watch?.hostOnline) {
      const { ts, values } = stored.shift()!;
      await publish(topic('DDATA', sp!.device), Buffer.from(sparkplugCodec.encodePayload({ timestamp: Date.now(), seq: nextSeq(), metrics: OVEN_METRICS.map((m) => ({ alias: m.alias, type: m.type, value: values[m.name], timestamp: ts, isHistorical: true })) })), 0);
      counts.forwarded += 1;
    }
  };

  if (sp) {
    client.on('message', (t, payload) => {
      if (watch && t === watch.topic) {
        if (watch.onState(payload) === 'online') void birth().then(forward).catch((err) => opts.logger?.warn({ err: String(err) }, 'simulator birth failed'));
        return;
      }
      if (t !== topic('NCMD')) return;
      if (watch && !watch.hostOnline) return;
      try {
        const cmd = sparkplugCodec.decodePayload(new Uint8Array(payload));
        if (cmd.metrics?.some((m) => m.name === 'Node Control/Rebirth' && m.value === true)) {
          counts.rebirthRequests += 1;
          void birth().catch((err) => opts.logger?.warn({ err: String(err) }, 'simulator rebirth failed'));
        }
      } catch {
        /* not a Sparkplug payload: ignore, as an edge node would */
      }
    });
    client.on('connect', () => {
      // A new MQTT session: next bdSeq, new Will, new births (spec chapter 5, "Edge Node Session Establishment").
      if (counts.nbirth === 0) return;
      bdSeq = (bdSeq + 1) % 256;
      client.options.will = { topic: topic('NDEATH'), payload: ndeathPayload(), qos: 1, retain: false };
      // With a Primary Host the BIRTH waits for its STATE, which the resubscription brings back (retained).
      if (watch) watch.sessionLost();
      else void birth().catch(() => undefined);
    });
    await client.subscribeAsync(topic('NCMD'), { qos: 0 });
    if (watch) await client.subscribeAsync(watch.topic, { qos: 1 });
    else await birth();
  }

  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  const loop = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      tick()
        .catch((err) => opts.logger?.warn({ err: String(err) }, 'simulator publish failed'))
        .finally(loop);
    }, interval);
  };
  if (interval > 0 && Number.isFinite(interval)) loop();

  return {
    client,
    packerTopic,
    counts: () => ({ ...counts }),
    primaryHostOnline: () => (watch ? watch.hostOnline : null),
    tick,
    rebirth: birth,
    close: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (sp && client.connected) {
        // Intentional disconnect: publish NDEATH first (spec chapter 5, "Edge Node Session Termination").
        await publish(topic('NDEATH'), ndeathPayload(), 0).catch(() => undefined);
      }
      await new Promise<void>((r) => client.end(false, () => r()));
    },
  };
}
