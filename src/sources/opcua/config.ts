import { z } from 'zod';
import { secretSchema } from '../../config/secrets.js';
import { byteSize, durationMs } from '../../config/units.js';
import { machineVariableId, scaleOffset, sourceName, unitSetting } from '../common-schema.js';
import { parseNodeId } from './node-id.js';
import { opcuaEventsSchema } from './events-config.js';

/**
 * The `opcua:` section of the configuration. The schema is the documentation (README.md in this
 * folder renders the same settings with examples); unknown keys are refused.
 */

export const SECURITY_MODES = ['None', 'Sign', 'SignAndEncrypt'] as const;
/**
 * Policies offered. The deprecated Basic128Rsa15 and Basic256 (OPC UA Part 7, "deprecated" since
 * 1.04) are deliberately absent: they need RSA PKCS#1 v1.5 encryption, which Node 20 refuses since
 * CVE-2023-46809, and they are not secure any more.
 */
export const SECURITY_POLICIES = ['None', 'Basic256Sha256', 'Aes128_Sha256_RsaOaep', 'Aes256_Sha256_RsaPss'] as const;
export const TIMESTAMP_SOURCES = ['source', 'server', 'gateway'] as const;

const nodeIdText = z
  .string()
  .transform((raw, ctx) => {
    const parsed = parseNodeId(raw);
    if ('problem' in parsed) {
      ctx.issues.push({ code: 'custom', message: `${JSON.stringify(raw)} ${parsed.problem}`, input: raw });
      return z.NEVER;
    }
    return raw.trim();
  })
  .meta({
    description: 'Node id: ns=<index>;s=<name>, ns=<index>;i=<number>, i=<number>, or nsu=<namespace uri>;s=<name> (resolved against the server namespace array at every connect)',
    examples: ['ns=2;s=Press1.Temperature', 'nsu=urn:edge-gateway:sim:press1;s=Press1.Pressure', 'ns=3;i=1001'],
  });

const deadbandSchema = z
  .strictObject({
    type: z.enum(['absolute', 'percent']).meta({ description: 'absolute: in engineering units; percent: of the EURange the server publishes for the node (AnalogItemType, OPC UA Part 8 §6.2)' }),
    value: z.number().min(0).meta({ description: 'Smallest change that is reported; for percent, 0-100', examples: [0.5] }),
  })
  .refine((d) => d.type !== 'percent' || d.value <= 100, { error: 'a percent deadband must be between 0 and 100', path: ['value'] })
  .meta({ description: 'Report a change only when it exceeds this deadband (DataChangeFilter, OPC UA Part 4 §7.22.2)', examples: [{ type: 'absolute', value: 0.5 }] });

const timestampSchema = z.enum(TIMESTAMP_SOURCES).meta({
  description: 'Timestamp stored with the value: source (the device, OPC UA SourceTimestamp), server (ServerTimestamp) or gateway (the gateway clock when the value arrives). Falls back to server, then gateway, when the chosen one is missing',
});
const uncertainSchema = z.enum(['forward', 'refuse']).meta({ description: 'What to do with values of Uncertain quality: forward them, or refuse them (counted as uncertain_status)' });

export const opcuaNodeSchema = z
  .strictObject({
    node_id: nodeIdText,
    variable: machineVariableId,
    ...scaleOffset,
    unit: unitSetting,
    timestamp: timestampSchema.optional().meta({ description: 'Overrides the server-level timestamp setting for this node' }),
    deadband: deadbandSchema.optional(),
    sampling_interval: durationMs({ min: 0, max: 3_600_000 }).optional().meta({ description: 'How often the server samples the node (subscription mode). Default: the server-level sampling_interval', examples: ['500ms'] }),
    queue_size: z.number().int().min(1).max(10_000).optional().meta({ description: 'Values the server keeps per node between publishes (subscription mode). Default: the server-level queue_size, else 30 s of the node\'s samplings (10 to 1,000)', examples: [10] }),
    uncertain: uncertainSchema.optional().meta({ description: 'Overrides the server-level uncertain setting for this node' }),
  })
  .meta({ description: 'One OPC UA variable and the machine variable it feeds' });

const userSchema = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('anonymous') }).meta({ description: 'No user identity' }),
    z
      .strictObject({
        type: z.literal('username'),
        username: z.string().min(1).meta({ description: 'User name', examples: ['gateway'] }),
        password: secretSchema().meta({ description: 'Password: {env: NAME}, {file: PATH} or a literal (lab only)', examples: [{ env: 'OPCUA_PASSWORD' }] }),
      })
      .meta({ description: 'User name and password (encrypted with the server certificate by the security policy)' }),
    z
      .strictObject({
        type: z.literal('certificate'),
        certificate_file: z.string().min(1).meta({ description: 'User certificate (PEM or DER)', examples: ['/etc/edge-gateway/opcua-user.pem'] }),
        private_key_file: z.string().min(1).meta({ description: 'Private key of the user certificate (PEM)', examples: ['/etc/edge-gateway/opcua-user.key'] }),
      })
      .meta({ description: 'X.509 user certificate (the server must trust it in its user PKI)' }),
  ])
  .default({ type: 'anonymous' })
  .meta({ description: 'User identity for the session: anonymous, username or certificate', examples: [{ type: 'username', username: 'gateway', password: { env: 'OPCUA_PASSWORD' } }] });

export const opcuaServerSchema = z
  .strictObject({
    name: sourceName,
    endpoint: z
      .string()
      .regex(/^opc\.tcp:\/\/[^\s/:]+(:\d{1,5})?(\/\S*)?$/, { error: 'is not an opc.tcp endpoint URL (opc.tcp://host:4840/path)' })
      .meta({ description: 'Endpoint URL of the server', examples: ['opc.tcp://192.168.10.20:4840'] }),
    security_mode: z.enum(SECURITY_MODES).default('None').meta({ description: 'Message security: None, Sign or SignAndEncrypt (OPC UA Part 4 §7.15)' }),
    security_policy: z.enum(SECURITY_POLICIES).optional().meta({ description: 'Security policy. Default: None with security_mode None, Basic256Sha256 otherwise', examples: ['Basic256Sha256'] }),
    user: userSchema,
    trust_on_first_use: z
      .boolean()
      .default(false)
      .meta({ description: 'Trust an unknown server certificate automatically and remember it (written to the trust folder). Off by default: an unknown certificate is refused and the error names the file to move into pki/trusted/certs' }),
    application_name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$/, { error: 'must be 1-64 letters, digits, spaces, "_", "." or "-"' }).default('edge-gateway').meta({ description: 'Application name in the gateway certificate and session' }),
    mode: z.enum(['subscription', 'polling']).default('subscription').meta({ description: 'subscription: the server reports changes (recommended); polling: the gateway reads every polling_interval' }),
    publishing_interval: durationMs({ min: 50, max: 3_600_000 }).default(1_000).meta({ description: 'Subscription publishing interval (OPC UA Part 4 §5.13.2)', examples: ['1s'] }),
    sampling_interval: durationMs({ min: 0, max: 3_600_000 }).optional().meta({ description: 'Default sampling interval of the nodes. Default: the publishing interval', examples: ['500ms'] }),
    queue_size: z.number().int().min(1).max(10_000).optional().meta({ description: 'Default queue size per node: values the server keeps between publishes, so a change faster than publishing is not lost, and while the gateway holds its Publish requests back (its buffer not keeping up). Default: 30 s of the node\'s samplings, at least 10 and at most 1,000 (30 at 1 s); the server may lower it (status flow.server_queue_ms)' }),
    keep_alive_count: z.number().int().min(1).max(1_000).default(3).meta({ description: 'Publishing intervals without data after which the server sends a keep-alive (Part 4 §5.13.1)' }),
    watchdog_multiplier: z
      .number()
      .min(2)
      .max(1_000)
      .default(10)
      .meta({ description: 'Reconnect when neither data nor a keep-alive arrived for this many publishing intervals (polling: polling intervals). Must be above keep_alive_count' }),
    polling_interval: durationMs({ min: 50, max: 3_600_000 }).default(1_000).meta({ description: 'Polling mode: read all nodes this often', examples: ['2s'] }),
    timestamp: timestampSchema.default('source'),
    uncertain: uncertainSchema.default('forward'),
    reconnect: z
      .strictObject({
        initial_delay: durationMs({ min: 100, max: 600_000 }).default(1_000).meta({ description: 'First retry delay after a failed connect', examples: ['1s'] }),
        max_delay: durationMs({ min: 100, max: 3_600_000 }).default(30_000).meta({ description: 'Cap of the exponential retry delay', examples: ['30s'] }),
      })
      .prefault({})
      .meta({ description: 'Reconnect backoff (capped exponential with jitter)' }),
    session_timeout: durationMs({ min: 10_000, max: 3_600_000 })
      .default(30_000)
      .meta({
        description:
          'Requested session timeout; the server keeps the session (and its subscriptions) this long after a connection loss. Kept short by default: a gateway that is killed (power cut, SIGKILL) cannot close its session, and a PLC with few session slots refuses the restarted gateway (BadTooManySessions, retried with backoff) until the old session times out',
        examples: ['30s'],
      }),
    request_timeout: durationMs({ min: 1_000, max: 600_000 }).default(15_000).meta({ description: 'Timeout of one request to the server', examples: ['15s'] }),
    max_message_size: byteSize({ min: 128 * 1024, max: 128 * 1024 * 1024 })
      .default(4 * 1024 * 1024)
      .meta({
        description:
          'Largest message the gateway accepts from the server, announced in the connection Hello (OPC UA Part 6 §7.1.2.3): the server must refuse a larger response (BadTcpMessageTooLarge) instead of sending it, so one answer (a HistoryRead of a server that ignores numValuesPerNode, a huge Browse) cannot take hundreds of MB and block the gateway for seconds. Also sets maxNotificationsPerPublish so a subscription backlog comes in several Publish responses',
        examples: ['4MiB', '16MiB'],
      }),
    max_pending_samples: z.number().int().min(1_000).max(10_000_000).default(200_000).meta({ description: 'Values held in memory while the buffer commits. Subscription mode keeps its Publish requests to what fits (the server holds the rest in its monitored-item queues); a value beyond it is refused and counted as lost (buffer_full, dropped_total)' }),
    nodes: z.array(opcuaNodeSchema).default([]).meta({ description: 'Nodes to read (at least one, unless events are configured)' }),
    events: opcuaEventsSchema.optional(),
    history: z
      .strictObject({
        backfill: z
          .enum(['auto', 'off'])
          .default('auto')
          .meta({ description: 'auto: after any gap (gateway stopped, session lost, subscription re-created, watchdog rebuild) read the values the server historized meanwhile (HistoryRead raw, OPC UA Part 11) for nodes whose AccessLevel has HistoryRead; off: never' }),
        max_window: durationMs({ min: 1_000, max: 366 * 86_400_000 })
          .default(86_400_000)
          .meta({ description: 'Longest interval read back after one gap; of a longer gap only the newest part is read (the gap is then marked partially filled)', examples: ['24h', '2h'] }),
        values_per_request: z
          .number()
          .int()
          .min(1)
          .max(100_000)
          .default(1_000)
          .meta({ description: 'Values per node in one HistoryRead (numValuesPerNode); more are fetched with continuation points. A server that ignores it can send no more than max_message_size in one answer', examples: [1000] }),
        max_values_per_gap: z
          .number()
          .int()
          .min(1_000)
          .max(100_000_000)
          .default(1_000_000)
          .meta({
            description:
              'Most values read back for one node after one gap (and at most 10 × max_values_per_gap / values_per_request HistoryRead pages). Beyond it the reading stops, the server\'s continuation point is released and the gap is marked partially filled with a note',
            examples: [1_000_000],
          }),
      })
      .prefault({})
      .meta({ description: 'Historical backfill: fill gaps in the data from the server\'s history (issue 14)' }),
  })
  .superRefine((s, ctx) => {
    const policy = s.security_policy;
    if (s.security_mode === 'None' && policy !== undefined && policy !== 'None') {
      ctx.addIssue({ code: 'custom', path: ['security_policy'], message: `"${policy}" needs security_mode Sign or SignAndEncrypt (security_mode is None)`, input: policy });
    }
    if (s.security_mode !== 'None' && policy === 'None') {
      ctx.addIssue({ code: 'custom', path: ['security_policy'], message: `"None" cannot be used with security_mode ${s.security_mode}; choose ${SECURITY_POLICIES.slice(1).join(', ')}`, input: policy });
    }
    if (s.watchdog_multiplier <= s.keep_alive_count) {
      ctx.addIssue({ code: 'custom', path: ['watchdog_multiplier'], message: `${s.watchdog_multiplier} must be above keep_alive_count (${s.keep_alive_count}), or an idle subscription would trip the watchdog between keep-alives`, input: s.watchdog_multiplier });
    }
    if (s.reconnect.max_delay < s.reconnect.initial_delay) {
      ctx.addIssue({ code: 'custom', path: ['reconnect', 'max_delay'], message: `${s.reconnect.max_delay} ms is below reconnect.initial_delay (${s.reconnect.initial_delay} ms)`, input: s.reconnect.max_delay });
    }
    if (s.nodes.length === 0 && !s.events) {
      ctx.addIssue({ code: 'custom', path: ['nodes'], message: 'lists no node: give at least one node, or configure events', input: s.nodes });
    }
    const byNode = new Map<string, number>();
    const byVariable = new Map<string, number>();
    s.nodes.forEach((n, i) => {
      const prevNode = byNode.get(n.node_id);
      if (prevNode !== undefined) ctx.addIssue({ code: 'custom', path: ['nodes', i, 'node_id'], message: `"${n.node_id}" is already listed at nodes[${prevNode}]`, input: n.node_id });
      else byNode.set(n.node_id, i);
      const prevVar = byVariable.get(n.variable);
      if (prevVar !== undefined) ctx.addIssue({ code: 'custom', path: ['nodes', i, 'variable'], message: `"${n.variable}" is already fed by nodes[${prevVar}]; two nodes writing one machine variable would interleave`, input: n.variable });
      else byVariable.set(n.variable, i);
      if (s.mode === 'polling' && n.deadband?.type === 'percent') {
        ctx.addIssue({ code: 'custom', path: ['nodes', i, 'deadband', 'type'], message: '"percent" needs mode subscription (the server computes it from the EURange); use an absolute deadband with polling', input: 'percent' });
      }
    });
  })
  .meta({ description: 'One OPC UA server (one source)' });

export const opcuaSectionSchema = z
  .strictObject({
    pki_dir: z
      .string()
      .min(1)
      .optional()
      .meta({ description: 'Folder of the gateway certificate and trust lists, shared by every server when set. Default: one per server, <gateway.data_dir>/sources/<server name>/opcua/pki. Trusted server certificates go in <pki_dir>/trusted/certs', examples: ['/var/lib/edge-gateway/opcua/pki'] }),
    servers: z.array(opcuaServerSchema).default([]).meta({ description: 'OPC UA servers to read from; each is one source' }),
  })
  .prefault({})
  .meta({ description: 'OPC UA sources (client sessions to PLCs and OPC UA servers)' });

export type OpcuaSection = z.output<typeof opcuaSectionSchema>;
export type OpcuaServerConfig = z.output<typeof opcuaServerSchema>;
export type OpcuaNodeConfig = z.output<typeof opcuaNodeSchema>;
export type OpcuaUserConfig = OpcuaServerConfig['user'];

/** The security policy in force (the default depends on the mode). */
export function effectivePolicy(cfg: Pick<OpcuaServerConfig, 'security_mode' | 'security_policy'>): (typeof SECURITY_POLICIES)[number] {
  return cfg.security_policy ?? (cfg.security_mode === 'None' ? 'None' : 'Basic256Sha256');
}
