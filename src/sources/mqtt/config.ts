import { z } from 'zod';
import { checkMqttConnection, mqttConnectionFields } from '../../config/mqtt-connection.js';
import { secretSchema } from '../../config/secrets.js';
import { byteSize, durationMs } from '../../config/units.js';
import { machineVariableId, scaleOffset, sourceName, unitSetting } from '../common-schema.js';
import { parseJsonPath } from './json-path.js';
import { hostIdProblem } from './primary-host.js';
import { filtersOverlap, topicFilterProblem, topicMatches } from './topic-filter.js';

/**
 * Configuration of the MQTT source (top-level key `mqtt:`): connections to brokers (or to the
 * embedded broker) with their subscriptions and payload mappings, and the optional embedded
 * broker itself. README.md in this folder explains every setting with examples.
 */

const topicFilter = z
  .string()
  .superRefine((s, ctx) => {
    const problem = topicFilterProblem(s);
    if (problem) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)} ${problem}`, input: s });
  })
  .meta({ description: 'MQTT topic filter; "+" matches one level, "#" the rest (MQTT §4.7)', examples: ['plant/line3/+/temperature', 'spBv1.0/plant/#'] });

const jsonPath = z
  .string()
  .superRefine((s, ctx) => {
    const r = parseJsonPath(s);
    if (!r.ok) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)} is not a path: ${r.problem}`, input: s });
  })
  .meta({ description: 'Where the value sits in the JSON payload: dotted keys, [index] or ["key.with.dots"], or a JSON Pointer starting with "/"', examples: ['temperature', 'data.values[0].v', '/data/temperature'] });

const qos = z.number().int().min(0).max(2).default(1).meta({
  description: 'Subscription QoS (the most the broker sends with). 1 or 2: a message is acknowledged only after its samples are committed to the buffer, so nothing is lost when the gateway stops before the commit. 0: a message in flight when the gateway or the network fails is lost',
  examples: [1],
});

const timestampFormat = z.enum(['auto', 'epoch_ms', 'epoch_s', 'iso8601']).default('auto').meta({
  description: 'How the timestamp is written: epoch_ms, epoch_s, iso8601 (with Z or an offset), or auto (numbers by magnitude: < 1e11 seconds, < 1e14 milliseconds; strings as ISO 8601)',
});

const timestampSpec = z
  .strictObject({
    path: jsonPath.meta({ description: 'Where the timestamp sits in the JSON payload', examples: ['ts', 'header.time'] }),
    format: timestampFormat,
  })
  .meta({ description: 'Take the sample timestamp from the payload. Without it the gateway stamps the time the message arrived: a QoS 1/2 message the broker delivers again after a crash of the gateway (received, not yet acknowledged) then gets a new timestamp and becomes a second value upstream. Set it wherever the payload carries a time', examples: [{ path: 'ts', format: 'epoch_ms' }] });

/** Without it, a payload naming any mvr_ id writes that variable. */
const payloadVariables = z
  .array(z.string().regex(/^mvr_[A-Za-z0-9_]*\*?$/, { error: 'is not a machine variable id (mvr_...) or a prefix ending in "*" (mvr_oven1_*)' }))
  .optional()
  .meta({
    description:
      'Allow-list for variables named by the payload itself (a metric or Sparkplug metric name that is an mvr_ id, with no mapping entry): exact ids or prefixes ending in "*". A payload-named variable not on the list is refused (reason variable_not_allowed). Not set: any mvr_ name is accepted, so anyone who can publish on the topic can write any variable of the organisation; [] accepts only the mapped names',
    examples: [['mvr_oven1_*', 'mvr_packer1_rate']],
  });

/**
 * A publisher's last will (MQTT §3.1.2.5): the message the broker publishes for it when its
 * connection dies. The values of this subscription are then stale until they arrive again.
 */
const lastWill = z
  .strictObject({
    topic: z
      .string()
      .min(1)
      .superRefine((t, ctx) => {
        if (/[+#]/.test(t)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(t)} must be one topic, without "+" or "#"`, input: t });
      })
      .meta({ description: 'Topic the publisher registered its last will on (its status topic)', examples: ['plant/press1/status'] }),
    payload: z.string().min(1).default('offline').meta({ description: 'Payload of the will (compared after trimming spaces); any other payload on the topic (its "online") is not data and is skipped', examples: ['offline'] }),
  })
  .optional()
  .meta({
    description: 'The publisher\'s last will: when the broker publishes it, every variable of this subscription is stale (the console, /status and gateway_source_variables say so) until its next value. The gateway subscribes to the topic (QoS 1)',
    examples: [{ topic: 'plant/press1/status', payload: 'offline' }],
  });

const commonSubscription = {
  topic: topicFilter,
  qos,
  retained: z.enum(['accept', 'ignore']).default('accept').meta({
    description: 'Retained messages (the broker\'s last stored value, sent on subscribe): accept stores them like any message; ignore skips them (useful when the payload has no timestamp and the retained value is old)',
  }),
  unknown_names: z.enum(['count', 'ignore']).default('count').meta({
    description: 'Names in the payload that map to no variable (metrics and sparkplug forms): count counts and logs them as unknown_name; ignore skips them silently (when only a few of many metrics are wanted)',
  }),
};

const numberSubscription = z
  .strictObject({
    format: z.literal('number').meta({ description: 'The payload is one value as text: 42.5, -3, 1e3, true or false. It carries no time, so the sample is stamped on arrival: a message redelivered after a crash of the gateway becomes a second value upstream (use json with a timestamp path where that matters)' }),
    ...commonSubscription,
    last_will: lastWill,
    variable: machineVariableId.optional().meta({ description: 'Variable every message on this topic is stored under', examples: ['mvr_packer1_rate'] }),
    variable_from_topic: z
      .strictObject({
        level: z.number().int().min(0).max(99).meta({ description: 'Topic level (counting from 0) that names the variable; it must be a "+" or "#" level of the filter', examples: [1] }),
        variables: z.record(z.string().min(1), machineVariableId).meta({ description: 'Text at that level → variable', examples: [{ packer1: 'mvr_packer1_temperature', oven1: 'mvr_oven1_temperature' }] }),
      })
      .optional()
      .meta({ description: 'Pick the variable from a topic level: with topic plant/+/temperature and level 1, plant/packer1/temperature goes to variables.packer1' }),
    ...scaleOffset,
    unit: unitSetting,
  })
  .superRefine((s, ctx) => {
    if (!s.variable && !s.variable_from_topic) ctx.addIssue({ code: 'custom', path: ['variable'], message: 'set variable (one variable for the topic) or variable_from_topic (a table for a topic level)', input: undefined });
    if (s.variable && s.variable_from_topic) ctx.addIssue({ code: 'custom', path: ['variable_from_topic'], message: 'set either variable or variable_from_topic, not both', input: undefined });
    if (s.variable_from_topic) {
      const levels = s.topic.split('/');
      const lvl = s.variable_from_topic.level;
      const wildcard = lvl < levels.length ? levels[lvl] === '+' || levels[lvl] === '#' : levels[levels.length - 1] === '#';
      if (!wildcard) ctx.addIssue({ code: 'custom', path: ['variable_from_topic', 'level'], message: `${lvl}: level ${lvl} of "${s.topic}" is ${lvl < levels.length ? `"${levels[lvl]}"` : 'past its end'}, not a "+" or "#" wildcard`, input: lvl });
    }
  })
  .meta({ description: 'Plain value payloads' });

const jsonSubscription = z
  .strictObject({
    format: z.literal('json').meta({ description: 'The payload is a JSON document; each entry of values picks one value by path' }),
    ...commonSubscription,
    last_will: lastWill,
    values: z
      .array(
        z.strictObject({
          path: jsonPath,
          variable: machineVariableId,
          timestamp: timestampSpec.optional().meta({ description: 'Timestamp of this value, when it differs from the message timestamp' }),
          ...scaleOffset,
          unit: unitSetting,
        }),
      )
      .min(1)
      .meta({ description: 'One variable per path', examples: [[{ path: 'rate', variable: 'mvr_packer1_rate' }, { path: 'state', variable: 'mvr_packer1_state' }]] }),
    timestamp: timestampSpec.optional(),
  })
  .meta({ description: 'JSON payloads with values at known paths' });

const metricsSubscription = z
  .strictObject({
    format: z.literal('metrics').meta({ description: 'The payload is {"metrics": [{"name", "timestamp", "value", "datatype"}, ...]} (optionally with a top-level "timestamp")' }),
    ...commonSubscription,
    last_will: lastWill,
    names: z.record(z.string().min(1), machineVariableId).default({}).meta({
      description: 'Metric name → variable. A name that is itself a machine variable id (mvr_...) needs no entry',
      examples: [{ 'Packer1.Rate': 'mvr_packer1_rate', 'Packer1.Temp': 'mvr_packer1_temperature' }],
    }),
    timestamp_format: timestampFormat,
    payload_variables: payloadVariables,
  })
  .meta({ description: 'Vendor metrics-array payloads' });

const sparkplugSubscription = z
  .strictObject({
    format: z.literal('sparkplug').meta({ description: 'Sparkplug B 3.0 (protobuf): NBIRTH/DBIRTH alias tables are remembered, NDATA/DDATA decoded' }),
    ...commonSubscription,
    topic: topicFilter
      .superRefine((t, ctx) => {
        if (!/^(spBv1\.0|\+|#)(\/|$)/.test(t)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(t)} must start with spBv1.0/ (the Sparkplug B namespace, spec §4.1.1)`, input: t });
      })
      .default('spBv1.0/#')
      .meta({ description: 'Sparkplug topic filter: spBv1.0/<group>/<message type>/<edge node>[/<device>]', examples: ['spBv1.0/plant/#'] }),
    qos: qos.default(1).meta({ description: 'Subscription QoS. Sparkplug edge nodes publish data at QoS 0 (spec §4.1.2) and their NDEATH at QoS 1; 1 costs nothing and keeps NDEATH reliable' }),
    metrics: z
      .array(
        z.strictObject({
          name: z.string().min(1).meta({ description: 'Sparkplug metric name (as in the BIRTH certificate, folders included)', examples: ['Temperature', 'Oven/Gas Flow'] }),
          variable: machineVariableId,
          group: z.string().min(1).optional().meta({ description: 'Only for this group id' }),
          edge_node: z.string().min(1).optional().meta({ description: 'Only for this edge node id' }),
          device: z.string().min(1).optional().meta({ description: 'Only for this device id' }),
          node_only: z.boolean().default(false).meta({ description: 'Only the edge node\'s own metrics (NBIRTH/NDATA), not its devices\'' }),
          ...scaleOffset,
          unit: unitSetting,
        }),
      )
      .default([])
      .meta({
        description: 'Metric name → variable; the first entry whose name, group, edge_node and device match wins. A metric whose name is a machine variable id (mvr_...) needs no entry',
        examples: [[{ name: 'Temperature', device: 'oven1', variable: 'mvr_oven1_temperature' }]],
      }),
    payload_variables: payloadVariables,
    request_rebirth: z.boolean().default(true).meta({
      description: 'Publish a Rebirth request (NCMD "Node Control/Rebirth", spec §6.4.9) when data arrives from an edge node whose BIRTH this gateway has not seen, with an unknown alias, or with a sequence gap. Needs publish permission on spBv1.0/<group>/NCMD/<edge node>',
    }),
    rebirth_min_interval: durationMs({ min: 1_000, max: 3_600_000 }).default(30_000).meta({ description: 'At most one Rebirth request per edge node in this time', examples: ['30s'] }),
    reorder_timeout: durationMs({ min: 0, max: 600_000 }).default(2_000).meta({
      description: 'Sparkplug "Reorder Timeout": how long a skipped sequence number may stay missing before the edge node\'s state is considered out of date (and a Rebirth is requested)',
      examples: ['2s'],
    }),
  })
  .meta({ description: 'Sparkplug B edge nodes and devices' });

export const subscriptionSchema = z
  .discriminatedUnion('format', [numberSubscription, jsonSubscription, metricsSubscription, sparkplugSubscription])
  .meta({ description: 'One topic filter and how its payloads become samples' });

export const connectionSchema = z
  .strictObject({
    name: sourceName,
    ...mqttConnectionFields({
      embedded: true,
      url: { description: 'Broker address: mqtt://host:1883, mqtts://host:8883, ws://host/mqtt, wss://host/mqtt, or "embedded" for the broker built into the gateway (mqtt.broker)', examples: ['mqtts://broker.plant.local:8883', 'embedded'] },
      clientId: { description: 'MQTT client id. Must be unique on the broker and stable, because the broker keeps the persistent session (and the messages for it) under this id. Default: edge-gateway-<host name>-<connection name>', examples: ['edge-gw-line3'] },
      broker: 'the broker',
      passwordEnv: 'MQTT_PASSWORD',
      passphraseEnv: 'MQTT_KEY_PASSPHRASE',
      keepalive: { minMs: 0, defaultMs: 30_000, description: 'Keep-alive interval (MQTT §3.1.2.10); a dead connection is noticed within 1.5 times this. 0 turns it off' },
    }),
    clean: z.boolean().default(false).meta({
      description: 'Start a clean session on every connect. false (default) keeps a persistent session: QoS 1/2 messages published while the gateway is stopped or disconnected wait at the broker and arrive on reconnect. The broker bounds that queue: mosquitto keeps at most max_queued_messages (default 1000) per client and drops the rest ("Outgoing messages are being dropped for client ..." in its log), so a restart under load loses messages there. Raise max_queued_messages (and max_queued_bytes) in mosquitto.conf to cover the longest stop at your message rate',
    }),
    session_expiry: durationMs({ min: 1_000, max: 4_294_967_000 })
      .default(7 * 86_400_000)
      .meta({ description: 'MQTT 5 only: how long the broker keeps the persistent session (and queued messages) while the gateway is away (MQTT 5 §3.1.2.11.2). MQTT 3.1.1 brokers keep it until cleared', examples: ['7d'] }),
    protocol_version: z
      .union([z.literal(4), z.literal(5)])
      .default(4)
      .meta({ description: 'MQTT protocol: 4 for MQTT 3.1.1 (every broker), 5 for MQTT 5 (adds Receive Maximum, so the broker never has more unacknowledged messages in flight than max_pending_messages)' }),
    reconnect: z
      .strictObject({
        initial: durationMs({ min: 10, max: 600_000 }).default(1_000).meta({ description: 'Wait before the first reconnection attempt', examples: ['1s'] }),
        max: durationMs({ min: 10, max: 3_600_000 }).default(30_000).meta({ description: 'Longest wait between attempts (the wait doubles up to this)', examples: ['30s'] }),
      })
      .prefault({})
      .meta({ description: 'Reconnection backoff' }),
    max_payload_bytes: byteSize({ min: 16, max: 268_435_455 }).default(262_144).meta({ description: 'Larger payloads are refused (counted as oversize, acknowledged, not stored)', examples: ['256KiB'] }),
    max_pending_messages: z.number().int().min(1).max(65_535).default(1_000).meta({
      description: 'Messages received but not yet committed to the buffer. At this limit the gateway stops reading from the broker until commits catch up (back-pressure instead of unbounded memory)',
    }),
    subscriptions: z.array(subscriptionSchema).min(1).meta({ description: 'What to subscribe to and how to read it' }),
    primary_host_id: z
      .string()
      .superRefine((id, ctx) => {
        const problem = hostIdProblem(id);
        if (problem) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(id)} ${problem}`, input: id });
      })
      .optional()
      .meta({
        description:
          'Sparkplug B 3.0 Primary Host Application id. Set: the connection registers the death STATE {"online":false,"timestamp":t} as its MQTT Will on spBv1.0/STATE/<id> (QoS 1, retained), publishes the birth STATE {"online":true,"timestamp":t} after subscribing, answers an offline STATE for its id with a new birth, and publishes the death STATE before a clean stop. Edge nodes configured with this id publish only while it is online and store and forward their values (is_historical) while it is away. Needs a sparkplug subscription and publish rights on the STATE topic; not for url: embedded',
        examples: ['edge-gateway-line3'],
      }),
  })
  .superRefine((c, ctx) => {
    if (c.primary_host_id !== undefined) {
      if (c.url === 'embedded') {
        ctx.addIssue({ code: 'custom', path: ['primary_host_id'], message: 'does not apply to url: embedded (the broker runs inside the gateway: when the gateway stops, every edge node loses its connection, which is its signal to store and forward)', input: c.primary_host_id });
      } else if (!c.subscriptions.some((s) => s.format === 'sparkplug')) {
        ctx.addIssue({ code: 'custom', path: ['primary_host_id'], message: `${JSON.stringify(c.primary_host_id)}: a Primary Host Application needs a subscription with format: sparkplug on this connection`, input: c.primary_host_id });
      }
    }
    if (c.url === 'embedded') {
      for (const key of ['client_id', 'username', 'password', 'tls'] as const) {
        if (c[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'does not apply to url: embedded (the subscription runs inside the gateway\'s own broker)', input: undefined });
      }
    } else {
      checkMqttConnection(c, ctx);
    }
    for (let i = 0; i < c.subscriptions.length; i++) {
      for (let j = 0; j < i; j++) {
        const a = c.subscriptions[j].topic;
        const b = c.subscriptions[i].topic;
        if (filtersOverlap(a, b)) {
          ctx.addIssue({
            code: 'custom',
            path: ['subscriptions', i, 'topic'],
            message: `${JSON.stringify(b)} overlaps ${JSON.stringify(a)} of subscriptions[${j}]; a message matching both would be stored twice. Narrow the filters or use a second connection`,
            input: b,
          });
        }
      }
    }
  })
  .meta({ description: 'A connection to an MQTT broker (one MQTT client, one persistent session)' });

export const brokerSchema = z
  .strictObject({
    enabled: z.boolean().default(false).meta({ description: 'Run an MQTT broker inside the gateway so PLCs and HMI panels can publish straight to it' }),
    name: sourceName.default('mqtt-broker').meta({ description: 'Name of the broker in status, logs and metrics' }),
    host: z.string().min(1).default('0.0.0.0').meta({ description: 'Address to listen on (0.0.0.0: every interface; 127.0.0.1: this machine only)', examples: ['0.0.0.0'] }),
    port: z.number().int().min(0).max(65_535).default(1883).meta({ description: 'TCP port for MQTT (0: any free port, for tests)', examples: [1883] }),
    websocket: z
      .strictObject({
        port: z.number().int().min(0).max(65_535).meta({ description: 'Port for MQTT over WebSocket (HMI panels, browsers)', examples: [8083] }),
        host: z.string().min(1).optional().meta({ description: 'Address to listen on; default: the same as host' }),
        path: z.string().regex(/^\//, { error: 'must start with "/"' }).default('/mqtt').meta({ description: 'URL path of the WebSocket endpoint', examples: ['/mqtt'] }),
      })
      .optional()
      .meta({ description: 'Also accept MQTT over WebSocket' }),
    username: z.string().min(1).optional().meta({ description: 'User name publishers must present', examples: ['plc'] }),
    password: secretSchema().optional().meta({ description: 'Password publishers must present: {env: NAME}, {file: PATH} or a literal', examples: [{ env: 'MQTT_BROKER_PASSWORD' }] }),
    allow_anonymous: z.boolean().default(false).meta({ description: 'Accept clients without credentials. Needed when username/password are not set; only sensible on an isolated machine network' }),
    max_packet_size: byteSize({ min: 64, max: 268_435_455 }).default(262_144).meta({ description: 'Largest MQTT packet a client may send; a client sending more is disconnected (MQTT 5 §3.1.2.24 semantics)', examples: ['256KiB'] }),
    max_clients: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(1_000)
      .meta({
        description:
          'Most connections at once (TCP and WebSocket together, counted from the TCP accept). At the limit the oldest connection that has not authenticated, of the address holding the most connections, is closed for the newcomer; a newcomer is refused only when every connection is an authenticated client, so idle sockets never keep a PLC with the right password out. Lowered at start when the process\'s open-file limit leaves less: of what stays after a reserve for the gateway\'s own files, the broker may hold three quarters (docs/operations.md)',
      }),
    max_clients_per_address: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(100)
      .meta({
        description:
          'Most connections at once from one remote address (an IPv6 client: its /64). A further one closes that address\'s oldest connection that has not authenticated, or is refused when all of them are authenticated clients. Raise it when more PLCs than this reach the broker through one NAT router',
        examples: [100],
      }),
    max_unauthenticated: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .default(64)
      .meta({ description: 'Most connections at once that have not yet completed CONNECT with valid credentials. Beyond it the oldest such connection of the address holding the most of them is closed, so idle sockets cannot keep a PLC with the right password out', examples: [64] }),
    max_unauthenticated_per_address: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .default(16)
      .meta({
        description:
          'Most connections at once from one remote address that have not yet completed CONNECT with valid credentials. Beyond it that address\'s oldest such connection is closed: a host opening idle sockets (500 a second) closes its own, never a PLC\'s from another address that is about to send CONNECT. Raise it when many PLCs behind one NAT router reconnect at once',
        examples: [16],
      }),
    connect_deadline: durationMs({ min: 500, max: 60_000 })
      .default(5_000)
      .meta({ description: 'A connection that has not completed CONNECT with valid credentials within this time of its TCP accept (a WebSocket\'s upgrade included) is closed, however steadily its bytes arrive (aedes\' own default is 30 s)', examples: ['5s'] }),
    max_retained: z.number().int().min(0).max(1_000_000).default(10_000).meta({ description: 'Most topics with a retained message; a retained message on a further topic is delivered but not kept (counted in gateway_broker_messages_dropped_total{reason="retained_limit"})', examples: [10_000] }),
    max_retained_bytes: byteSize({ min: 0, max: 1_073_741_824 }).default(16 * 1_048_576).meta({ description: 'Most payload bytes of all retained messages together', examples: ['16MiB'] }),
    max_queued_messages: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(1_000)
      .meta({ description: 'Most QoS 1/2 messages queued for one persistent session (an offline subscriber, or one that has not acknowledged yet); further ones are dropped for that session and counted (reason="queue_limit")', examples: [1_000] }),
    max_queued_bytes: byteSize({ min: 1_024, max: 4_294_967_296 }).default(64 * 1_048_576).meta({ description: 'Most payload bytes queued for all persistent sessions together', examples: ['64MiB'] }),
  })
  .superRefine((b, ctx) => {
    if (!b.enabled) return;
    if ((b.username === undefined) !== (b.password === undefined)) {
      ctx.addIssue({ code: 'custom', path: [b.username === undefined ? 'username' : 'password'], message: 'username and password go together; set both', input: undefined });
    }
    if (b.username === undefined && b.password === undefined && !b.allow_anonymous) {
      ctx.addIssue({ code: 'custom', path: ['username'], message: 'required setting is missing: set username and password, or allow_anonymous: true to accept any client', input: undefined });
    }
    if (b.websocket && b.websocket.port !== 0 && b.websocket.port === b.port && (b.websocket.host ?? b.host) === b.host) {
      ctx.addIssue({ code: 'custom', path: ['websocket', 'port'], message: `${b.websocket.port} is already the MQTT port`, input: b.websocket.port });
    }
  })
  .meta({ description: 'The embedded MQTT broker (aedes). Sessions and retained messages are kept in memory only' });

export const mqttSectionSchema = z
  .strictObject({
    broker: brokerSchema.optional(),
    connections: z.array(connectionSchema).default([]).meta({ description: 'Broker connections and what to read from them' }),
  })
  .superRefine((s, ctx) => {
    const embedded = s.connections.some((c) => c.url === 'embedded');
    if (embedded && !s.broker?.enabled) {
      const i = s.connections.findIndex((c) => c.url === 'embedded');
      ctx.addIssue({ code: 'custom', path: ['connections', i, 'url'], message: '"embedded" needs the embedded broker: set mqtt.broker.enabled: true', input: 'embedded' });
    }
    const seen = new Map<string, number>();
    s.connections.forEach((c, i) => {
      const prev = seen.get(c.name);
      if (prev !== undefined) ctx.addIssue({ code: 'custom', path: ['connections', i, 'name'], message: `${JSON.stringify(c.name)} is already the name of connections[${prev}]`, input: c.name });
      seen.set(c.name, i);
    });
  })
  .optional()
  .meta({ description: 'MQTT: broker connections (JSON, vendor metrics, Sparkplug B payloads) and the optional embedded broker' });

/** The machine variables a subscription's configuration names (payload-named ones are known only as data arrives). */
export function subscriptionVariables(s: MqttSubscriptionConfig): string[] {
  switch (s.format) {
    case 'number':
      return [...(s.variable ? [s.variable] : []), ...Object.values(s.variable_from_topic?.variables ?? {})];
    case 'json':
      return s.values.map((v) => v.variable);
    case 'metrics':
      return Object.values(s.names);
    case 'sparkplug':
      return s.metrics.map((m) => m.variable);
  }
}

/** Last-will topics of a connection's subscriptions that none of its topic filters already covers (each needs a subscription of its own). */
export function lastWillTopics(c: Pick<MqttConnectionConfig, 'subscriptions'>): string[] {
  const out = new Set<string>();
  for (const s of c.subscriptions) {
    const t = s.format === 'sparkplug' ? undefined : s.last_will?.topic;
    if (t !== undefined && !c.subscriptions.some((x) => topicMatches(x.topic, t))) out.add(t);
  }
  return [...out];
}

export type MqttSection = z.output<typeof mqttSectionSchema>;
export type MqttConnectionConfig = z.output<typeof connectionSchema>;
export type MqttSubscriptionConfig = z.output<typeof subscriptionSchema>;
export type MqttBrokerConfig = z.output<typeof brokerSchema>;
export type NumberSubscriptionConfig = Extract<MqttSubscriptionConfig, { format: 'number' }>;
export type JsonSubscriptionConfig = Extract<MqttSubscriptionConfig, { format: 'json' }>;
export type MetricsSubscriptionConfig = Extract<MqttSubscriptionConfig, { format: 'metrics' }>;
export type SparkplugSubscriptionConfig = Extract<MqttSubscriptionConfig, { format: 'sparkplug' }>;
