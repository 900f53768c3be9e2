import { mkdirSync } from 'node:fs';
import { z } from 'zod';
import { formatIssues } from '../config/issues.js';
import { opcuaSnippetYaml } from '../config/yaml-writer.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { HttpError } from '../http/server.js';
import { SECURITY_MODES, type SECURITY_POLICIES } from '../sources/opcua/config.js';
import type { UserIdentityInfo } from 'node-opcua';
import { SECURITY_POLICY_CHOICES, type BrowseResponse, type ProbeResponse } from './api/build.js';

/** Turns a zod failure of a request body into a 400 naming the field. */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const r = schema.safeParse(body, { reportInput: true });
  if (!r.success) throw new HttpError(400, 'bad_request', formatIssues(r.error.issues).join('; '), r.error.issues[0]?.path.join('.') || undefined);
  return r.data;
}

// --- OPC UA browse -------------------------------------------------------------------------------

/**
 * POST /console/api/opcua/browse (api/build.ts BrowseRequest). The console's tree asks for one
 * level at a time: the children of `root` (default the Objects folder, i=85), `depth` 1.
 */
export const browseSchema = z.strictObject({
  endpoint: z.string().regex(/^opc\.tcp:\/\//, { error: 'must start with opc.tcp://' }),
  root: z.string().min(1).max(4_096).default('i=85'),
  depth: z.number().int().min(1).max(10).default(1),
  max_nodes: z.number().int().min(1).max(20_000).default(5_000),
  security_mode: z.enum(SECURITY_MODES).default('None'),
  security_policy: z.enum(SECURITY_POLICY_CHOICES).optional(),
  user: z.string().min(1).max(128).optional(),
  // Never echoed: config/issues.ts shows no value under a setting named password.
  password: z.string().max(1_024).optional(),
  trust_server: z.boolean().default(false),
  include_properties: z.boolean().default(false),
  path: z.string().max(4_096).default(''),
});

/** The browse form's policies (api/build.ts, for the browser) are the ones the config accepts: a compile-time check. */
type SameMembers<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const policyChoicesMatch: SameMembers<(typeof SECURITY_POLICY_CHOICES)[number], (typeof SECURITY_POLICIES)[number]> = true;

/** A console browse stops after this long (and after max_nodes), whatever the server does. */
export const BROWSE_TIMEOUT_MS = 60_000;

/**
 * Browses a server with the code of `edge-gateway browse` (src/sources/opcua/browse.ts): one
 * session per request, one attempt, certificates in the console's own PKI folder under the data
 * dir. A session per request rather than one kept open between the expansions of the tree: a PLC
 * has few session slots (the gateway's own sources use one), and nothing of the engineer's login,
 * password included, stays in the gateway once the answer is sent. The password goes into the
 * session's identity token and nowhere else: not into a Secret (which would register it for log
 * redaction for the life of the process), an error, a log line or the answer.
 */
export async function browseOpcua(input: z.output<typeof browseSchema>, pkiDir: string): Promise<BrowseResponse> {
  if (input.password !== undefined && input.user === undefined) throw new HttpError(400, 'bad_request', 'password: given without a user name (user); leave both empty to log in anonymously', 'user');
  const [{ opcuaServerSchema, effectivePolicy }, { browseAddressSpace, BrowseRootError, nodeComment }, { createClient, userIdentity }, { installNodeOpcuaLogging }, { classifyConnectError }, { ClockTolerantCertificateManager }, { ensureOwnCertificate }, { toNsuForm }, { UserTokenType }] = await Promise.all([
    import('../sources/opcua/config.js'),
    import('../sources/opcua/browse.js'),
    import('../sources/opcua/client-options.js'),
    import('../sources/opcua/node-opcua-logging.js'),
    import('../sources/opcua/errors.js'),
    import('../sources/opcua/certificate-validity.js'),
    import('../sources/opcua/own-certificate.js'),
    import('../sources/opcua/node-id.js'),
    import('node-opcua'),
  ]);
  installNodeOpcuaLogging();
  const parsed = opcuaServerSchema.safeParse({
    name: 'console',
    endpoint: input.endpoint,
    security_mode: input.security_mode,
    ...(input.security_policy ? { security_policy: input.security_policy } : {}),
    trust_on_first_use: input.trust_server,
    nodes: [{ node_id: 'i=2258', variable: 'mvr_browse' }],
  });
  if (!parsed.success) throw new HttpError(400, 'bad_request', formatIssues(parsed.error.issues).join('; '), String(parsed.error.issues[0]?.path[0] ?? 'endpoint'));
  const cfg = parsed.data;
  const identity: UserIdentityInfo = input.user !== undefined ? { type: UserTokenType.UserName, userName: input.user, password: input.password ?? '' } : userIdentity(cfg, 'browse');
  mkdirSync(pkiDir, { recursive: true });
  const cm = new ClockTolerantCertificateManager({ rootFolder: pkiDir, automaticallyAcceptUnknownCertificate: cfg.trust_on_first_use, name: 'PKI' });
  await cm.initialize();
  await ensureOwnCertificate(cm, cfg.application_name).catch(() => undefined);
  const client = createClient({ ...cfg, reconnect: { initial_delay: 500, max_delay: 1_000 } }, cm);
  // One attempt: a browse is interactive, the engineer retries.
  (client as unknown as { connectionStrategy: { maxRetry: number } }).connectionStrategy.maxRetry = 0;
  try {
    await client.connect(cfg.endpoint);
    const session = await client.createSession(identity);
    try {
      const result = await browseAddressSpace(session, { root: input.root, depth: input.depth, maxNodes: input.max_nodes, includeStandard: false, includeProperties: input.include_properties, rootPath: input.path, timeoutMs: BROWSE_TIMEOUT_MS });
      return {
        endpoint: cfg.endpoint,
        security_mode: cfg.security_mode,
        security_policy: effectivePolicy(cfg),
        ...(input.user !== undefined ? { user: input.user } : {}),
        root: input.root,
        namespaces: result.namespaces,
        truncated: result.truncated,
        stopped_by: result.stoppedBy,
        nodes: result.nodes.map((n) => ({ ...n, nsu: toNsuForm(n.nodeId, result.namespaces), mappable: n.nodeClass === 'Variable' && n.numeric === true && n.scalar !== false, comment: nodeComment(n) })),
      };
    } finally {
      await session.close().catch(() => undefined);
    }
  } catch (err) {
    if (err instanceof HttpError) throw err;
    if (err instanceof BrowseRootError) throw new HttpError(400, 'bad_request', err.message, 'root');
    const e = classifyConnectError(err, { path: 'browse', endpoint: cfg.endpoint, securityMode: cfg.security_mode, securityPolicy: effectivePolicy(cfg), pkiDir, ...(input.user !== undefined ? { user: input.user } : {}) });
    // The console's words for the settings the message names (it was written for the config file).
    const message = e.message.replace(/^browse(\.user)?: /, '').replace(/, or set browse\.trust_on_first_use: true/, ', or tick "Trust the server certificate" and browse again');
    throw new HttpError(502, 'browse_failed', message);
  } finally {
    await client.disconnect().catch(() => undefined);
    await cm.dispose().catch(() => undefined);
  }
}

export const snippetSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: 'letters, digits, _ . - (1 to 64)' }),
  endpoint: z.string().regex(/^opc\.tcp:\/\//, { error: 'must start with opc.tcp://' }),
  security_mode: z.enum(['None', 'Sign', 'SignAndEncrypt']).default('None'),
  nodes: z.array(z.strictObject({ node_id: z.string().min(1), variable: z.string().min(1), comment: z.string().max(200).optional() })).min(1).max(20_000),
});

/** The `opcua:` snippet for the ticked nodes, in the form `edge-gateway browse --snippet` writes. */
export function renderOpcuaSnippet(s: z.output<typeof snippetSchema>): string {
  return opcuaSnippetYaml(s);
}

// --- Modbus probe --------------------------------------------------------------------------------

export const probeSchema = z.strictObject({
  device: z.string().min(1),
  unit_id: z.number().int().min(0).max(255).default(1),
  table: z.enum(['coil', 'discrete_input', 'holding', 'input']).default('holding'),
  address: z.number().int().min(0).max(65_535),
  count: z.number().int().min(1).max(125).default(8),
  timeout_ms: z.number().int().min(100).max(30_000).default(2_000),
});

/** Reads a range once and returns the raw words and every type × byte order (probe-format.ts). */
export async function probeModbus(input: z.output<typeof probeSchema>, clock: Clock): Promise<ProbeResponse> {
  const [{ parseDeviceUrl }, { ModbusLink }, { endpointKey }, { candidateRows }, { toRequestError }, { TABLE_INFO }] = await Promise.all([
    import('../sources/modbus/probe-cli.js'),
    import('../sources/modbus/link.js'),
    import('../sources/modbus/plan.js'),
    import('../sources/modbus/probe-format.js'),
    import('../sources/modbus/errors.js'),
    import('../sources/modbus/address.js'),
  ]);
  let endpoint;
  try {
    endpoint = parseDeviceUrl(input.device);
  } catch (err) {
    throw new HttpError(400, 'bad_request', `device: ${describeError(err)}`, 'device');
  }
  const info = TABLE_INFO[input.table];
  if (info.bits && input.count > 125) throw new HttpError(400, 'bad_request', 'count: at most 125', 'count');
  const failed = new AbortController();
  const link = new ModbusLink(endpoint, { logger: silentLogger(), clock, reconnect: { initialMs: 60_000, maxMs: 60_000 }, connectTimeoutMs: input.timeout_ms, onConnectError: () => failed.abort() });
  const key = endpointKey(endpoint);
  try {
    link.start();
    if (!(await link.waitUntilConnected(AbortSignal.any([failed.signal, AbortSignal.timeout(input.timeout_ms + 1_500)])))) {
      throw new HttpError(502, 'probe_failed', `could not connect to ${key}: ${link.status().last_error ?? 'no answer in time'}`);
    }
    let bytes: Uint8Array;
    try {
      bytes = (await link.read({ unitId: input.unit_id, table: input.table, address: input.address, count: input.count, timeoutMs: input.timeout_ms })).bytes;
    } catch (raw) {
      const err = toRequestError(raw);
      const what = `${input.count} ${info.plural} from ${input.address}`;
      const msg = err.exception ? `unit ${input.unit_id} answered exception ${err.exception.code} (${err.exception.name}) to reading ${what}: ${err.exception.hint}` : err.kind === 'timeout' ? `unit ${input.unit_id} at ${key} did not answer reading ${what} within ${input.timeout_ms} ms` : `reading ${what} failed: ${err.message}`;
      throw new HttpError(502, 'probe_failed', msg);
    }
    if (info.bits) return { device: key, table: input.table, bits: Array.from({ length: input.count }, (_, i) => (bytes[i >> 3] >> (i & 7)) & 1), registers: [], candidates: [] };
    const registers = Array.from({ length: input.count }, (_, i) => (bytes[i * 2] << 8) | bytes[i * 2 + 1]);
    return { device: key, table: input.table, registers, candidates: candidateRows(bytes, input.address) };
  } finally {
    await link.close();
  }
}

// The configuration editor's check, read and apply: config-check.ts, config-edit.ts, config-routes.ts.
