import { createRequire } from 'node:module';
import type spb from 'sparkplug-payload';
import type { SparkplugSubscriptionConfig } from '../config.js';
import { MACHINE_VARIABLE_ID, payloadVariableAllowed, scaled, type Decoded, type InboundMessage, type PayloadDecoder, type RawSample, type Refusal } from '../decoding.js';
import { checkRange, coerceText, shorten } from '../values.js';
import { EdgeNodeTable, type EdgeNodeState } from './sparkplug-nodes.js';

type Codec = NonNullable<ReturnType<typeof spb.get>>;
type UPayload = ReturnType<Codec['decodePayload']>;
type UMetric = NonNullable<UPayload['metrics']>[number];

let codec: Codec | null = null;

/**
 * Eclipse Tahu's sparkplug-payload, loaded at the first Sparkplug message: it brings protobufjs
 * with it, a few MB of heap a gateway without Sparkplug subscriptions does not need
 * (bench/small-plant.ts).
 */
function loadCodec(): Codec {
  if (codec) return codec;
  const lib = createRequire(import.meta.url)('sparkplug-payload') as typeof spb;
  const c = lib.get('spBv1.0');
  if (!c) throw new Error('sparkplug-payload does not provide the spBv1.0 codec');
  return (codec = c);
}

/** The Sparkplug B protobuf codec (Eclipse Tahu's sparkplug-payload). */
export const sparkplugCodec: Pick<Codec, 'decodePayload' | 'encodePayload'> = {
  decodePayload: (bytes) => loadCodec().decodePayload(bytes),
  encodePayload: (payload) => loadCodec().encodePayload(payload),
};

export type SparkplugMessageType = 'NBIRTH' | 'NDEATH' | 'DBIRTH' | 'DDEATH' | 'NDATA' | 'DDATA' | 'NCMD' | 'DCMD';
const NODE_TYPES = new Set(['NBIRTH', 'NDEATH', 'NDATA', 'NCMD']);
const DEVICE_TYPES = new Set(['DBIRTH', 'DDEATH', 'DDATA', 'DCMD']);

export type SparkplugTopic =
  | { kind: 'message'; group: string; type: SparkplugMessageType; edgeNode: string; device: string | null }
  | { kind: 'state'; hostId: string };

/**
 * Sparkplug B 3.0 chapter 4 "Topics and Messages": `spBv1.0/<group_id>/<message_type>/<edge_node_id>[/<device_id>]`,
 * plus the host application's `spBv1.0/STATE/<host_id>`.
 */
export function parseSparkplugTopic(topic: string): { ok: true; topic: SparkplugTopic } | { ok: false; detail: string } {
  const levels = topic.split('/');
  if (levels[0] !== 'spBv1.0') return { ok: false, detail: `topic ${JSON.stringify(shorten(topic))} is not in the spBv1.0 namespace` };
  if (levels[1] === 'STATE' && levels.length === 3) return { ok: true, topic: { kind: 'state', hostId: levels[2] } };
  const [, group, type, edgeNode, device] = levels;
  if (NODE_TYPES.has(type) && levels.length === 4 && group && edgeNode) {
    return { ok: true, topic: { kind: 'message', group, type: type as SparkplugMessageType, edgeNode, device: null } };
  }
  if (DEVICE_TYPES.has(type) && levels.length === 5 && group && edgeNode && device) {
    return { ok: true, topic: { kind: 'message', group, type: type as SparkplugMessageType, edgeNode, device } };
  }
  return { ok: false, detail: `topic ${JSON.stringify(shorten(topic))} is not spBv1.0/<group>/<NBIRTH|NDEATH|NDATA|DBIRTH|DDEATH|DDATA>/<edge node>[/<device>]` };
}

/** What the decoder needs from the connection around it. */
export interface SparkplugHost {
  /** Publishes a command (QoS 0, not retained); returns false when not connected. */
  publish(topic: string, payload: Buffer): boolean;
  monotonic(): number;
  now(): number;
  /** Counts a protocol event (nbirth, ndeath, seq_gap, rebirth_requested ...) and logs it. */
  event(event: string, fields: Record<string, unknown>): void;
  /** A new origin number for an edge node or device (Decoded.origin). */
  newOrigin(): number;
  /** The variables last delivered by these origins are stale from `at` (an NDEATH or DDEATH). */
  stale(origins: ReadonlySet<number>, at: number): void;
}

interface MappingEntry {
  variable: string;
  group?: string;
  edge_node?: string;
  device?: string;
  node_only: boolean;
  scale: number;
  offset: number;
}

/** Metrics that carry protocol state, not process values (spec chapter 6: bdSeq, Node Control/*, Device Control/*). */
function isProtocolMetric(name: string): boolean {
  return name === 'bdSeq' || name.startsWith('Node Control/') || name.startsWith('Device Control/');
}

/**
 * Sparkplug B payloads. Keeps per edge node the alias table and session state (sparkplug-nodes.ts),
 * turns NBIRTH/DBIRTH/NDATA/DDATA metrics into samples by metric name, and never guesses: a DATA
 * metric whose alias is not in the BIRTH it belongs to is refused as `unknown_alias` and, when
 * allowed, a Rebirth is requested so the edge node re-sends its BIRTH certificates.
 */
export class SparkplugDecoder implements PayloadDecoder {
  private readonly nodes: EdgeNodeTable;
  private readonly mapping = new Map<string, MappingEntry[]>();
  private readonly countUnknown: boolean;
  private readonly allowed: (variable: string) => boolean;

  constructor(private readonly cfg: SparkplugSubscriptionConfig, private readonly host: SparkplugHost) {
    this.nodes = new EdgeNodeTable(() => host.newOrigin());
    this.allowed = payloadVariableAllowed(cfg.payload_variables);
    for (const m of cfg.metrics) {
      const list = this.mapping.get(m.name) ?? [];
      list.push({ variable: m.variable, group: m.group, edge_node: m.edge_node, device: m.device, node_only: m.node_only, scale: m.scale, offset: m.offset });
      this.mapping.set(m.name, list);
    }
    this.countUnknown = cfg.unknown_names === 'count';
  }

  decode(msg: InboundMessage): Decoded {
    const t = parseSparkplugTopic(msg.topic);
    if (!t.ok) return { samples: [], refusals: [{ reason: 'malformed', detail: t.detail }] };
    const topic = t.topic;
    // STATE is the host applications' own birth/death (plain JSON or text); commands go to edge nodes.
    if (topic.kind === 'state') return { samples: [], refusals: [], ignored: 'host application STATE' };
    if (topic.type === 'NCMD' || topic.type === 'DCMD') return { samples: [], refusals: [], ignored: `${topic.type} command` };

    let payload: UPayload;
    try {
      payload = sparkplugCodec.decodePayload(new Uint8Array(msg.payload.buffer, msg.payload.byteOffset, msg.payload.length));
    } catch (err) {
      return { samples: [], refusals: [{ reason: 'decode_error', detail: `not a Sparkplug B payload (${shorten((err as Error).message, 80)})` }] };
    }

    const node = this.nodes.getOrCreate(topic.group, topic.edgeNode);
    const seq = toNumberOrNull(payload.seq);
    const metrics = payload.metrics ?? [];
    const where = { group: topic.group, edge_node: topic.edgeNode, ...(topic.device ? { device: topic.device } : {}) };

    switch (topic.type) {
      case 'NBIRTH': {
        const bdSeq = findBdSeq(metrics);
        node.birth(bdSeq, seq, msg.receivedAt);
        for (const m of metrics) {
          const alias = toNumberOrNull(m.alias);
          if (alias !== null && m.name) node.aliases.set(alias, { name: m.name, device: null });
        }
        this.host.event('nbirth', { ...where, bd_seq: bdSeq, metrics: metrics.length });
        return this.samplesOf(metrics, payload, node, null, msg);
      }
      case 'NDEATH': {
        const bdSeq = findBdSeq(metrics);
        // The Will may arrive after the node has already reconnected and sent a new NBIRTH; only
        // an NDEATH whose bdSeq matches the current NBIRTH ends the session (spec chapter 5).
        if (node.born && node.bdSeq !== null && bdSeq !== null && bdSeq !== node.bdSeq) {
          this.host.event('stale_ndeath', { ...where, bd_seq: bdSeq, current_bd_seq: node.bdSeq });
          return { samples: [], refusals: [], ignored: 'NDEATH of an earlier session' };
        }
        node.death();
        this.host.event('ndeath', { ...where, bd_seq: bdSeq });
        // Sparkplug B 3.0 chapter 5 (Edge Node Session Termination): the host marks every metric of
        // the edge node and of its devices stale.
        this.host.stale(new Set([node.origin, ...node.deviceOrigins.values()]), msg.receivedAt);
        return { samples: [], refusals: [], ignored: 'NDEATH' };
      }
      case 'DBIRTH': {
        const device = topic.device as string;
        if (!node.born) this.maybeRebirth(node, 'DBIRTH from an edge node whose NBIRTH was not seen');
        else this.checkSeq(node, seq);
        node.deviceBirth(device, msg.receivedAt);
        for (const m of metrics) {
          const alias = toNumberOrNull(m.alias);
          if (alias !== null && m.name) node.aliases.set(alias, { name: m.name, device });
        }
        this.host.event('dbirth', { ...where, metrics: metrics.length });
        return this.samplesOf(metrics, payload, node, device, msg);
      }
      case 'DDEATH': {
        if (node.born) this.checkSeq(node, seq);
        node.deviceDeath(topic.device as string, msg.receivedAt);
        this.host.event('ddeath', where);
        // Chapter 5 (Device Session Termination): every metric of the device is stale.
        this.host.stale(new Set([node.deviceOrigin(topic.device as string)]), msg.receivedAt);
        return { samples: [], refusals: [], ignored: 'DDEATH' };
      }
      case 'NDATA':
      case 'DDATA': {
        if (!node.born) this.maybeRebirth(node, `${topic.type} from an edge node whose NBIRTH was not seen`);
        else this.checkSeq(node, seq);
        return this.samplesOf(metrics, payload, node, topic.device, msg);
      }
    }
    return { samples: [], refusals: [], ignored: 'unhandled message type' };
  }

  private checkSeq(node: EdgeNodeState, seq: number | null): void {
    if (seq === null) return;
    const now = this.host.monotonic();
    const skipped = node.observeSeq(seq, now);
    if (skipped.length > 0) this.host.event('seq_gap', { group: node.group, edge_node: node.edgeNode, seq, skipped: skipped.length });
    // "Sparkplug Host Application Message Ordering": a message still missing after the Reorder
    // Timeout means the state may be out of date; ask for a Rebirth.
    if (node.gapExpired(now, this.cfg.reorder_timeout)) {
      node.clearGaps();
      this.maybeRebirth(node, 'messages missing after the reorder timeout');
    }
  }

  private samplesOf(metrics: UMetric[], payload: UPayload, node: EdgeNodeState, device: string | null, msg: InboundMessage): Decoded {
    const samples: RawSample[] = [];
    const refusals: Refusal[] = [];
    const origin = device === null ? node.origin : node.deviceOrigin(device);
    const payloadTs = toNumberOrNull(payload.timestamp);
    for (const m of metrics) {
      const alias = toNumberOrNull(m.alias);
      let name = m.name ?? undefined;
      if (!name && alias !== null) name = node.aliases.get(alias)?.name;
      if (!name) {
        if (alias !== null) {
          node.unknownAliases += 1;
          refusals.push({ reason: 'unknown_alias', detail: `alias ${alias} of edge node ${node.group}/${node.edgeNode}${device ? ` device ${device}` : ''} is not in its BIRTH` });
          this.maybeRebirth(node, `unknown alias ${alias}`);
        } else {
          refusals.push({ reason: 'malformed', detail: 'metric with neither name nor alias' });
        }
        continue;
      }
      if (isProtocolMetric(name) || m.isTransient) continue; // transient metrics must not be historized (spec chapter 6)
      const target = this.resolve(node.group, node.edgeNode, device, name);
      if (target === 'not_allowed') {
        refusals.push({ reason: 'variable_not_allowed', detail: `metric ${JSON.stringify(shorten(name))}${device ? ` of device ${device}` : ''} names a variable that is not in payload_variables` });
        continue;
      }
      if (!target) {
        if (this.countUnknown) refusals.push({ reason: 'unknown_name', detail: `metric ${JSON.stringify(shorten(name))}${device ? ` of device ${device}` : ''} is not in metrics` });
        continue;
      }
      const v = metricValue(m);
      if (!v.ok) {
        refusals.push({ reason: v.reason, detail: `metric ${JSON.stringify(shorten(name))}: ${v.detail}`, variable: target.variable });
        continue;
      }
      const value = scaled(v.value, target.scale, target.offset);
      if (!Number.isFinite(value)) {
        refusals.push({ reason: 'not_finite', detail: `metric ${JSON.stringify(shorten(name))}: scaled value is not finite`, variable: target.variable });
        continue;
      }
      const rawTs = toNumberOrNull(m.timestamp) ?? payloadTs;
      if (rawTs === null) {
        samples.push({ variable: target.variable, value, ts: undefined });
        continue;
      }
      const ts = checkRange(rawTs, msg.receivedAt);
      if (!ts.ok) {
        refusals.push({ reason: 'bad_timestamp', detail: `metric ${JSON.stringify(shorten(name))}: ${ts.detail}`, variable: target.variable });
        continue;
      }
      samples.push({ variable: target.variable, value, ts: ts.ts });
    }
    return { samples, refusals, origin };
  }

  private resolve(group: string, edgeNode: string, device: string | null, name: string): { variable: string; scale: number; offset: number } | 'not_allowed' | null {
    const entries = this.mapping.get(name);
    if (entries) {
      for (const e of entries) {
        if (e.group !== undefined && e.group !== group) continue;
        if (e.edge_node !== undefined && e.edge_node !== edgeNode) continue;
        if (e.device !== undefined && e.device !== device) continue;
        if (e.node_only && device !== null) continue;
        return e;
      }
    }
    if (MACHINE_VARIABLE_ID.test(name)) return this.allowed(name) ? { variable: name, scale: 1, offset: 0 } : 'not_allowed';
    return null;
  }

  /** Publishes "Node Control/Rebirth" (spec chapter 6, NCMD) at most once per rebirth_min_interval per node. */
  private maybeRebirth(node: EdgeNodeState, reason: string): void {
    if (!this.cfg.request_rebirth) return;
    const now = this.host.monotonic();
    if (node.lastRebirthRequest !== null && now - node.lastRebirthRequest < this.cfg.rebirth_min_interval) return;
    const payload = sparkplugCodec.encodePayload({
      timestamp: this.host.now(),
      metrics: [{ name: 'Node Control/Rebirth', type: 'Boolean', value: true }],
    });
    const sent = this.host.publish(`spBv1.0/${node.group}/NCMD/${node.edgeNode}`, Buffer.from(payload));
    if (!sent) return;
    node.lastRebirthRequest = now;
    node.rebirthRequests += 1;
    this.host.event('rebirth_requested', { group: node.group, edge_node: node.edgeNode, reason });
  }

  detail(): Record<string, unknown> {
    const nodes = [...this.nodes.all()].slice(0, 50).map((n) => n.summary());
    return { edge_nodes: nodes, edge_nodes_total: this.nodes.size };
  }
}

type MetricValue = { ok: true; value: number } | { ok: false; reason: 'not_numeric' | 'not_finite' | 'null_value' | 'bad_status' | 'uncertain_status'; detail: string };

/**
 * A metric's value as a sample value. Integer types may arrive as protobuf Longs; Float is a
 * 32-bit float and is given as the shortest decimal that reads back as the same float (21.3, not
 * 21.299999237060547). An OPC-style `Quality` property (as Ignition sends it: 192 good, 64-191
 * uncertain, below 64 bad) refuses the value when not good.
 */
export function metricValue(m: UMetric): MetricValue {
  const quality = qualityOf(m);
  if (quality !== null && quality < 192) {
    return quality >= 64 ? { ok: false, reason: 'uncertain_status', detail: `quality ${quality}` } : { ok: false, reason: 'bad_status', detail: `quality ${quality}` };
  }
  if (m.isNull || m.value === null || m.value === undefined) return { ok: false, reason: 'null_value', detail: 'is null' };
  const v = m.value as unknown;
  switch (m.type) {
    case 'Float':
      return typeof v === 'number' && Number.isFinite(v) ? { ok: true, value: shortestFloat32(v) } : { ok: false, reason: 'not_finite', detail: String(v) };
    case 'Boolean':
      return { ok: true, value: v ? 1 : 0 };
    case 'String':
    case 'Text':
    case 'UUID': {
      const c = typeof v === 'string' ? coerceText(v) : ({ ok: false, reason: 'not_numeric', detail: typeof v } as const);
      return c.ok ? c : { ok: false, reason: c.reason, detail: `${m.type} ${c.detail}` };
    }
    case 'DataSet':
    case 'Bytes':
    case 'File':
    case 'Template':
    case 'PropertySet':
    case 'PropertySetList':
      return { ok: false, reason: 'not_numeric', detail: `${m.type} metrics are not read (map the numeric members instead)` };
    default: {
      const n = toNumberOrNull(v);
      if (n === null) return { ok: false, reason: 'not_numeric', detail: `${String(m.type)} value of type ${typeof v}` };
      return Number.isFinite(n) ? { ok: true, value: n } : { ok: false, reason: 'not_finite', detail: String(n) };
    }
  }
}

function qualityOf(m: UMetric): number | null {
  const q = m.properties?.Quality;
  if (!q) return null;
  return toNumberOrNull(q.value);
}

function findBdSeq(metrics: UMetric[]): number | null {
  const m = metrics.find((x) => x.name === 'bdSeq');
  return m ? toNumberOrNull(m.value) : null;
}

/** Numbers and protobuf Longs (`{low, high, unsigned}` with toNumber) as numbers. */
export function toNumberOrNull(v: unknown): number | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'object' && typeof (v as { toNumber?: unknown }).toNumber === 'function') return (v as { toNumber(): number }).toNumber();
  return null;
}

/** The shortest decimal that maps back to the same 32-bit float. */
export function shortestFloat32(v: number): number {
  const f = Math.fround(v);
  for (let p = 6; p <= 9; p++) {
    const candidate = Number(f.toPrecision(p));
    if (Math.fround(candidate) === f) return candidate;
  }
  return f;
}
