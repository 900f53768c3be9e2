import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { DataType, DataValue, StatusCodes, Variant, VariantArrayType } from 'node-opcua';
import { validateConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/core/errors.js';
import { decodeDataValue, type NodeBinding } from '../../../src/sources/opcua/decode.js';
import { parseNodeId, resolveNodeId, toNsuForm } from '../../../src/sources/opcua/node-id.js';
import { defaultQueueSize } from '../../../src/sources/opcua/validate-nodes.js';
import { createOpcuaSources } from '../../../src/sources/opcua/index.js';
import { opcuaDemoSection } from '../../../src/sim/opcua-server.js';
import { DEMO_FIXTURE } from '../../../src/emulator/demo-fixture.js';
import { createMetrics } from '../../../src/core/metrics.js';
import { silentLogger } from '../../../src/core/logger.js';
import { SourceStats } from '../../../src/core/source.js';
import { systemClock } from '../../../src/core/clock.js';

process.env.OPCUA_CFG_TEST_SECRET = 'svc-secret';
process.env.OPCUA_PASSWORD = 'plc-password-123';
process.env.OPCUA_PRESS1_PASSWORD = 'example-password';
const base = {
  service: {
    base_url: 'http://127.0.0.1:9/tracking/v1',
    auth_url: 'http://127.0.0.1:9',
    organisation_id: 'org_demo',
    auth: { mode: 'client_credentials', client_id: 'gw', client_secret: { env: 'OPCUA_CFG_TEST_SECRET' } },
  },
};
const server = (over: Record<string, unknown> = {}) => ({ name: 'press1', endpoint: 'opc.tcp://10.0.0.5:4840', nodes: [{ node_id: 'ns=2;s=Press1.Temperature', variable: 'mvr_press1_temperature' }], ...over });

function problemsOf(opcua: unknown): string[] {
  try {
    validateConfig({ ...base, opcua });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected the config to be refused');
}

describe('opcua config', () => {
  it('applies documented defaults', () => {
    const { config } = validateConfig({ ...base, opcua: { servers: [server()] } });
    const s = config.opcua.servers[0];
    expect(s).toMatchObject({ security_mode: 'None', user: { type: 'anonymous' }, trust_on_first_use: false, mode: 'subscription', publishing_interval: 1_000, keep_alive_count: 3, watchdog_multiplier: 10, timestamp: 'source', uncertain: 'forward', reconnect: { initial_delay: 1_000, max_delay: 30_000 } });
    expect(s.nodes[0]).toMatchObject({ scale: 1, offset: 0 });
    expect(s.queue_size).toBeUndefined();
    // Unset, a node's queue holds 30 s of its samplings (10 to 1,000): the server keeps values in it
    // while the gateway holds its Publish requests back.
    expect([defaultQueueSize(1_000, 1_000), defaultQueueSize(100, 1_000), defaultQueueSize(5_000, 1_000), defaultQueueSize(0, 500), defaultQueueSize(10, 1_000)]).toEqual([30, 300, 10, 60, 1_000]);
    expect(s.max_message_size).toBe(4 * 1024 * 1024);
    expect(s.history).toEqual({ backfill: 'auto', max_window: 86_400_000, values_per_request: 1_000, max_values_per_gap: 1_000_000 });
    expect(validateConfig(base).config.opcua.servers).toEqual([]);
  });

  it('names the setting and the bad value', () => {
    expect(problemsOf({ servers: [server({ endpoint: 'http://plc:4840' })] })).toEqual(['opcua.servers[0].endpoint: "http://plc:4840" is not an opc.tcp endpoint URL (opc.tcp://host:4840/path)']);
    expect(problemsOf({ servers: [server({ security_mode: 'Encrypt' })] })).toEqual(['opcua.servers[0].security_mode: "Encrypt" is not one of None, Sign, SignAndEncrypt']);
    expect(problemsOf({ servers: [server({ security_mode: 'SignAndEncrypt', security_policy: 'Basic128Rsa15' })] })).toEqual([
      'opcua.servers[0].security_policy: "Basic128Rsa15" is not one of None, Basic256Sha256, Aes128_Sha256_RsaOaep, Aes256_Sha256_RsaPss',
    ]);
    expect(problemsOf({ servers: [server({ security_policy: 'Basic256Sha256' })] })).toEqual(['opcua.servers[0].security_policy: "Basic256Sha256" needs security_mode Sign or SignAndEncrypt (security_mode is None)']);
    expect(problemsOf({ servers: [server({ nodes: [{ node_id: 'ns=2;x=Temp', variable: 'mvr_a' }] })] })[0]).toBe(
      'opcua.servers[0].nodes[0].node_id: "ns=2;x=Temp" is not a node id (expected ns=<index>;s=<name>, ns=<index>;i=<number>, i=<number> or nsu=<namespace uri>;s=<name>)',
    );
    expect(problemsOf({ servers: [server({ nodes: [{ node_id: 'ns=2;i=12a', variable: 'mvr_a' }] })] })).toEqual(['opcua.servers[0].nodes[0].node_id: "ns=2;i=12a" has a numeric identifier (i=) that is not a whole number']);
    expect(problemsOf({ servers: [server({ nodes: [{ node_id: 'ns=2;s=T', variable: 'temperature' }] })] })).toEqual(['opcua.servers[0].nodes[0].variable: "temperature" is not a machine variable id (mvr_...)']);
    expect(problemsOf({ servers: [server({ nodes: [{ node_id: 'ns=2;s=T', variable: 'mvr_a', timestamp: 'plc' }] })] })).toEqual(['opcua.servers[0].nodes[0].timestamp: "plc" is not one of source, server, gateway']);
    expect(problemsOf({ servers: [server({ nodes: [{ node_id: 'ns=2;s=T', variable: 'mvr_a', deadband: { type: 'percent', value: 150 } }] })] })).toEqual(['opcua.servers[0].nodes[0].deadband.value: a percent deadband must be between 0 and 100']);
    expect(problemsOf({ servers: [server({ publishing_interval: '1 fortnight' })] })).toEqual(['opcua.servers[0].publishing_interval: "1 fortnight" is not a duration (use ms or a unit: 500ms, 5s, 2m)']);
    expect(problemsOf({ servers: [server({ samplinginterval: 5 })] })).toEqual(['opcua.servers[0].samplinginterval: unknown setting (did you mean "sampling_interval"?)']);
    expect(problemsOf({ servers: [server({ user: { type: 'username', username: 'op' } })] })).toEqual(['opcua.servers[0].user.password: required setting is missing']);
    expect(problemsOf({ servers: [server({ max_message_size: '64KiB' })] })).toEqual(['opcua.servers[0].max_message_size: "64KiB" is below the minimum of 131,072 bytes']);
    expect(problemsOf({ servers: [server({ history: { max_values_per_gap: 10 } })] })).toEqual(['opcua.servers[0].history.max_values_per_gap: 10 is below the minimum of 1000']);
    expect(problemsOf({ servers: [server({ user: { type: 'kerberos' } })] })).toEqual(['opcua.servers[0].user.type: "kerberos" is not one of anonymous, username, certificate']);
  });

  it('refuses contradictions zod cannot see field by field', () => {
    expect(problemsOf({ servers: [server({ watchdog_multiplier: 3, keep_alive_count: 5 })] })).toEqual([
      'opcua.servers[0].watchdog_multiplier: 3 must be above keep_alive_count (5), or an idle subscription would trip the watchdog between keep-alives',
    ]);
    expect(
      problemsOf({
        servers: [
          server({
            mode: 'polling',
            nodes: [
              { node_id: 'ns=2;s=A', variable: 'mvr_a' },
              { node_id: 'ns=2;s=A', variable: 'mvr_b' },
              { node_id: 'ns=2;s=C', variable: 'mvr_a' },
              { node_id: 'ns=2;s=D', variable: 'mvr_d', deadband: { type: 'percent', value: 2 } },
            ],
          }),
        ],
      }),
    ).toEqual([
      'opcua.servers[0].nodes[1].node_id: "ns=2;s=A" is already listed at nodes[0]',
      'opcua.servers[0].nodes[2].variable: "mvr_a" is already fed by nodes[0]; two nodes writing one machine variable would interleave',
      'opcua.servers[0].nodes[3].deadband.type: "percent" needs mode subscription (the server computes it from the EURange); use an absolute deadband with polling',
    ]);
  });

  it('resolves the password from the environment and never prints it', () => {
    const { config } = validateConfig({ ...base, opcua: { servers: [server({ security_mode: 'SignAndEncrypt', user: { type: 'username', username: 'op', password: { env: 'OPCUA_PASSWORD' } } })] } });
    const user = config.opcua.servers[0].user;
    if (user.type !== 'username') throw new Error('type');
    expect(user.password.reveal()).toBe('plc-password-123');
    expect(JSON.stringify(config)).not.toContain('plc-password-123');
    expect(problemsOf({ servers: [server({ user: { type: 'username', username: 'op', password: { env: 'NOT_SET_OPCUA_PW' } } })] })).toEqual([
      'opcua.servers[0].user.password: environment variable NOT_SET_OPCUA_PW is not set (nor NOT_SET_OPCUA_PW_FILE)',
    ]);
  });

  it('the example file config/examples/opcua.yaml is valid', () => {
    const doc = parse(readFileSync(new URL('../../../config/examples/opcua.yaml', import.meta.url), 'utf8')) as Record<string, unknown>;
    const { config } = validateConfig({ ...base, opcua: doc.opcua });
    expect(config.opcua.servers.length).toBeGreaterThanOrEqual(2);
    // The factory does no I/O: building sources from it succeeds without any server.
    const metrics = createMetrics();
    const sources = createOpcuaSources(config.opcua, (name, kind) => ({
      sink: { append: async () => undefined },
      logger: silentLogger(),
      stats: new SourceStats(name, kind, metrics, systemClock),
      metrics,
      clock: systemClock,
      dataDir: '/nonexistent/not-touched-by-the-factory',
    }));
    expect(sources.map((s) => [s.name, s.kind, s.status().state])).toEqual([
      ['press1', 'opcua', 'starting'],
      ['lathe1', 'opcua', 'starting'],
    ]);
  });
});

it('the simulator demo section maps the press to the demo fixture variables', () => {
  const nsuNodeIds = Object.fromEntries(['temperature', 'pressure', 'speed', 'state', 'count', 'label', 'running', 'vector', 'setpoint'].map((n) => [n, `nsu=urn:edge-gateway:sim:press1;s=Press1.${n}`])) as never;
  const { config } = validateConfig({ ...base, opcua: opcuaDemoSection({ endpointUrl: 'opc.tcp://127.0.0.1:4840/UA/Press1', nsuNodeIds }) });
  const variables = config.opcua.servers[0].nodes.map((n) => n.variable);
  expect(variables).toEqual(['mvr_press1_temperature', 'mvr_press1_pressure', 'mvr_press1_speed', 'mvr_press1_state', 'mvr_press1_count']);
  const known = new Set(DEMO_FIXTURE.machine_variables.map((v) => v.id));
  for (const v of variables) expect(known.has(v)).toBe(true);
});

describe('node ids', () => {
  it('parses and resolves every form', () => {
    expect(parseNodeId('ns=2;s=Press1.Temperature')).toEqual({ namespace: { index: 2 }, type: 's', identifier: 'Press1.Temperature' });
    expect(parseNodeId('i=2258')).toEqual({ namespace: { index: 0 }, type: 'i', identifier: '2258' });
    expect(parseNodeId('nsu=urn:a%3Bb;s=X')).toEqual({ namespace: { uri: 'urn:a;b' }, type: 's', identifier: 'X' });
    const p = parseNodeId('nsu=urn:plc;i=7');
    if ('problem' in p) throw new Error(p.problem);
    expect(resolveNodeId(p, ['http://opcfoundation.org/UA/', 'urn:x', 'urn:plc'])).toEqual({ ok: true, nodeId: 'ns=2;i=7', namespaceIndex: 2 });
    expect(resolveNodeId(p, ['http://opcfoundation.org/UA/'])).toMatchObject({ ok: false });
    expect(toNsuForm('ns=1;s=A;B', ['u0', 'urn:x;y'])).toBe('nsu=urn:x%3By;s=A;B');
    expect(parseNodeId('ns=2;g=nope')).toEqual({ problem: 'has a GUID identifier (g=) that is not a GUID' });
  });
});

describe('decoding values', () => {
  const binding: NodeBinding = { index: 0, configuredId: 'ns=2;s=X', nodeId: 'ns=2;s=X', variable: 'mvr_x', scale: 1, offset: 0, timestamp: 'source', uncertain: 'forward', samplingInterval: 100, queueSize: 1 };
  const T0 = Date.UTC(2026, 0, 5, 6);
  const NOW = T0 + 9;
  const dv = (variant: Variant, status = StatusCodes.Good) => new DataValue({ value: variant, statusCode: status, sourceTimestamp: new Date(T0 + 1_000), serverTimestamp: new Date(T0 + 2_000) });
  it('handles 64-bit integers, NaN, strings and missing timestamps without throwing', () => {
    expect(decodeDataValue(binding, dv(new Variant({ dataType: DataType.Int64, arrayType: VariantArrayType.Scalar, value: [0, 5] })), NOW)).toEqual({ ok: true, sample: { variable: 'mvr_x', ts: T0 + 1_000, value: 5 } });
    expect(decodeDataValue(binding, dv(new Variant({ dataType: DataType.Int64, arrayType: VariantArrayType.Scalar, value: [-1, 0xfffffffe] })), NOW)).toMatchObject({ ok: true, sample: { value: -2 } });
    expect(decodeDataValue(binding, dv(new Variant({ dataType: DataType.Double, value: Number.NaN })), NOW)).toMatchObject({ ok: false, reason: 'not_finite' });
    expect(decodeDataValue(binding, dv(new Variant({ dataType: DataType.String, value: 'x' })), NOW)).toMatchObject({ ok: false, reason: 'not_numeric' });
    const noSource = new DataValue({ value: new Variant({ dataType: DataType.Float, value: 1.5 }), serverTimestamp: new Date(T0 + 2_000) });
    expect(decodeDataValue(binding, noSource, NOW)).toMatchObject({ ok: true, sample: { ts: T0 + 2_000 } });
    expect(decodeDataValue({ ...binding, timestamp: 'server' }, new DataValue({ value: new Variant({ dataType: DataType.Float, value: 1.5 }) }), NOW)).toMatchObject({ ok: true, sample: { ts: NOW } });
  });

  it('refuses a device timestamp more than 24 h ahead of the gateway clock or before 2000 (bad_timestamp, shared with MQTT); gateway time is never refused', () => {
    const at = (source: number, server = source) => new DataValue({ value: new Variant({ dataType: DataType.Double, value: 1 }), sourceTimestamp: new Date(source), serverTimestamp: new Date(server) });
    expect(decodeDataValue(binding, at(NOW + 24 * 3_600_000), NOW)).toMatchObject({ ok: true });
    expect(decodeDataValue(binding, at(NOW + 24 * 3_600_000 + 1), NOW)).toEqual({ ok: false, reason: 'bad_timestamp', detail: `SourceTimestamp ${new Date(NOW + 24 * 3_600_000 + 1).toISOString()} is more than 24 h in the future (PLC clock wrong?)` });
    expect(decodeDataValue({ ...binding, timestamp: 'server' }, at(NOW, Date.UTC(1999, 0, 1)), NOW)).toEqual({ ok: false, reason: 'bad_timestamp', detail: 'ServerTimestamp 1999-01-01T00:00:00.000Z is before 2000-01-01 (PLC clock not set?)' });
    expect(decodeDataValue({ ...binding, timestamp: 'gateway' }, at(NOW + 48 * 3_600_000), NOW)).toMatchObject({ ok: true, sample: { ts: NOW } });
  });
});
