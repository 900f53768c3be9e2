import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../../src/core/logger.js';
import { SparkplugDecoder, metricValue, parseSparkplugTopic, shortestFloat32, sparkplugCodec, type SparkplugHost } from '../../../src/sources/mqtt/decoders/sparkplug.js';
import type { InboundMessage } from '../../../src/sources/mqtt/decoding.js';
import { parseJsonPath, readJsonPath, MISSING } from '../../../src/sources/mqtt/json-path.js';
import { MessagePipeline } from '../../../src/sources/mqtt/message-pipeline.js';
import { filtersOverlap, topicFilterProblem, topicMatches } from '../../../src/sources/mqtt/topic-filter.js';
import { parseTimestamp } from '../../../src/sources/mqtt/values.js';
import { openTestBuffer, type TestBuffer } from '../../helpers/buffer.js';
import { captureLogger, contexts, section } from './helpers.js';

const NOW = Date.UTC(2026, 10, 22, 8, 15, 0);
const msg = (topic: string, payload: string | Buffer | Uint8Array, extra: Partial<InboundMessage> = {}): InboundMessage => ({
  topic,
  payload: typeof payload === 'string' ? Buffer.from(payload) : Buffer.from(payload),
  qos: 1,
  retain: false,
  receivedAt: NOW,
  ...extra,
});

describe('topic filters (MQTT §4.7)', () => {
  it('matches + and # as the spec says', () => {
    expect(topicMatches('plant/+/temperature', 'plant/packer1/temperature')).toBe(true);
    expect(topicMatches('plant/+/temperature', 'plant/packer1/x/temperature')).toBe(false);
    expect(topicMatches('plant/#', 'plant')).toBe(true); // # includes the parent level
    expect(topicMatches('plant/#', 'plant/a/b/c')).toBe(true);
    expect(topicMatches('+/x', '/x')).toBe(true); // empty level
    expect(topicMatches('#', '$SYS/broker/load')).toBe(false); // §4.7.2
    expect(topicMatches('$SYS/#', '$SYS/broker/load')).toBe(true);
  });

  it('refuses malformed filters and finds overlaps', () => {
    expect(topicFilterProblem('a/#/b')).toMatch(/last level/);
    expect(topicFilterProblem('a/b+')).toMatch(/whole level/);
    expect(topicFilterProblem('a/+/b')).toBeNull();
    expect(filtersOverlap('plant/#', 'plant/+/temp')).toBe(true);
    expect(filtersOverlap('plant/+/temp', 'plant/x/temp')).toBe(true);
    expect(filtersOverlap('plant/a/temp', 'plant/b/temp')).toBe(false);
    expect(filtersOverlap('a/+', 'a/+/b')).toBe(false);
  });
});

describe('JSON paths and timestamps', () => {
  it('reads dotted, indexed, quoted and pointer paths', () => {
    const doc = { data: { values: [{ v: 1 }, { v: 2 }], 'motor.speed': 7 }, list: [5, 6] };
    const read = (p: string) => {
      const r = parseJsonPath(p);
      if (!r.ok) throw new Error(r.problem);
      return readJsonPath(doc, r.path);
    };
    expect(read('data.values[1].v')).toBe(2);
    expect(read('data.values.0.v')).toBe(1);
    expect(read('data["motor.speed"]')).toBe(7);
    expect(read('/data/values/1/v')).toBe(2);
    expect(read('list[1]')).toBe(6);
    expect(read('data.nothing')).toBe(MISSING);
    expect(parseJsonPath('a..b').ok).toBe(false);
    expect(parseJsonPath('a[').ok).toBe(false);
  });

  it('reads epoch s, epoch ms and ISO 8601 and refuses the rest', () => {
    expect(parseTimestamp(1_795_000_000, 'auto', NOW)).toEqual({ ok: true, ts: 1_795_000_000_000 });
    expect(parseTimestamp(1_795_000_000_123, 'auto', NOW)).toEqual({ ok: true, ts: 1_795_000_000_123 });
    expect(parseTimestamp('1795000000.5', 'epoch_s', NOW)).toEqual({ ok: true, ts: 1_795_000_000_500 });
    expect(parseTimestamp('2026-11-22T08:00:00.250+01:00', 'auto', NOW)).toEqual({ ok: true, ts: Date.UTC(2026, 10, 22, 7, 0, 0, 250) });
    expect(parseTimestamp('2026-11-22T08:00:00', 'auto', NOW)).toMatchObject({ ok: false, detail: expect.stringMatching(/no UTC offset/) });
    expect(parseTimestamp('yesterday', 'auto', NOW)).toMatchObject({ ok: false });
    expect(parseTimestamp(0, 'epoch_ms', NOW)).toMatchObject({ ok: false, detail: expect.stringMatching(/before 2000/) });
    expect(parseTimestamp(NOW + 3 * 86_400_000, 'epoch_ms', NOW)).toMatchObject({ ok: false, detail: expect.stringMatching(/future/) });
    expect(parseTimestamp('2026-11-22T08:00:00Z', 'epoch_ms', NOW)).toMatchObject({ ok: false });
  });
});

describe('Sparkplug B decoding', () => {
  const events: Array<{ event: string; fields: Record<string, unknown> }> = [];
  const published: Array<{ topic: string; payload: Buffer }> = [];
  let mono = 0;
  let origins = 0;
  const staled: Array<{ origins: number[]; at: number }> = [];
  const host: SparkplugHost = {
    publish: (topic, payload) => {
      published.push({ topic, payload });
      return true;
    },
    monotonic: () => mono,
    now: () => NOW,
    event: (event, fields) => events.push({ event, fields }),
    newOrigin: () => ++origins,
    stale: (o, at) => staled.push({ origins: [...o], at }),
  };
  const cfg = (over: Record<string, unknown> = {}) => {
    const s = section({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ format: 'sparkplug', topic: 'spBv1.0/plant/#', metrics: [{ name: 'Temperature', device: 'oven1', variable: 'mvr_oven1_temperature' }, { name: 'Temperature', variable: 'mvr_other_temperature' }, { name: 'Uptime', node_only: true, variable: 'mvr_node_uptime' }], ...over }] }] });
    const sub = s!.connections[0].subscriptions[0];
    if (sub.format !== 'sparkplug') throw new Error('format');
    return sub;
  };
  const enc = (p: Parameters<typeof sparkplugCodec.encodePayload>[0]) => Buffer.from(sparkplugCodec.encodePayload(p));
  afterEach(() => {
    events.length = 0;
    published.length = 0;
    mono = 0;
  });

  it('parses Sparkplug topics', () => {
    expect(parseSparkplugTopic('spBv1.0/plant/DDATA/oven-ctl/oven1')).toEqual({ ok: true, topic: { kind: 'message', group: 'plant', type: 'DDATA', edgeNode: 'oven-ctl', device: 'oven1' } });
    expect(parseSparkplugTopic('spBv1.0/STATE/scada1')).toEqual({ ok: true, topic: { kind: 'state', hostId: 'scada1' } });
    expect(parseSparkplugTopic('spBv1.0/plant/DDATA/oven-ctl').ok).toBe(false);
    expect(parseSparkplugTopic('spBv1.0/plant/NOPE/oven-ctl').ok).toBe(false);
  });

  it('remembers NBIRTH/DBIRTH aliases, decodes alias-only DATA, refuses unknown aliases and asks for a rebirth', () => {
    const d = new SparkplugDecoder(cfg(), host);
    const t0 = NOW - 1000;
    const nbirth = d.decode(msg('spBv1.0/plant/NBIRTH/oven-ctl', enc({ timestamp: t0, seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 3 }, { name: 'Uptime', alias: 9, type: 'Int64', value: 12345, timestamp: t0 }] })));
    expect(nbirth.samples).toEqual([{ variable: 'mvr_node_uptime', value: 12345, ts: t0 }]);
    const dbirth = d.decode(msg('spBv1.0/plant/DBIRTH/oven-ctl/oven1', enc({ timestamp: t0, seq: 1, metrics: [{ name: 'Temperature', alias: 1, type: 'Float', value: 21.3, timestamp: t0 }, { name: 'mvr_oven1_state', alias: 2, type: 'Int32', value: 1 }] })));
    // Float is given as the shortest decimal of the 32-bit value; an mvr_ metric name maps directly.
    expect(dbirth.samples).toEqual([
      { variable: 'mvr_oven1_temperature', value: 21.3, ts: t0 },
      { variable: 'mvr_oven1_state', value: 1, ts: t0 },
    ]);
    const ddata = d.decode(msg('spBv1.0/plant/DDATA/oven-ctl/oven1', enc({ timestamp: NOW, seq: 2, metrics: [{ alias: 1, type: 'Float', value: 22.5 }, { alias: 2, type: 'Int32', value: 2 }, { alias: 77, type: 'Float', value: 1 }] })));
    expect(ddata.samples).toEqual([
      { variable: 'mvr_oven1_temperature', value: 22.5, ts: NOW },
      { variable: 'mvr_oven1_state', value: 2, ts: NOW },
    ]);
    expect(ddata.refusals).toEqual([{ reason: 'unknown_alias', detail: expect.stringContaining('alias 77') }]);
    expect(published.map((p) => p.topic)).toEqual(['spBv1.0/plant/NCMD/oven-ctl']);
    const cmd = sparkplugCodec.decodePayload(published[0].payload);
    expect(cmd.metrics?.[0]).toMatchObject({ name: 'Node Control/Rebirth', value: true });
    // Node metrics by alias too; the node_only entry does not match device metrics.
    expect(d.decode(msg('spBv1.0/plant/NDATA/oven-ctl', enc({ seq: 3, metrics: [{ alias: 9, type: 'Int64', value: 12400 }] }))).samples).toEqual([{ variable: 'mvr_node_uptime', value: 12400 }]);
    expect(events.map((e) => e.event)).toEqual(['nbirth', 'dbirth', 'rebirth_requested']);
  });

  it('maps by device first, then by name alone', () => {
    const d = new SparkplugDecoder(cfg(), host);
    d.decode(msg('spBv1.0/plant/NBIRTH/n2', enc({ seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 0 }] })));
    const r = d.decode(msg('spBv1.0/plant/DDATA/n2/oven7', enc({ seq: 1, metrics: [{ name: 'Temperature', type: 'Double', value: 5 }] })));
    expect(r.samples).toEqual([{ variable: 'mvr_other_temperature', value: 5 }]);
  });

  it('DATA from an edge node whose NBIRTH was not seen: names work, aliases are refused, one rebirth request per interval', () => {
    const d = new SparkplugDecoder(cfg(), host);
    const r = d.decode(msg('spBv1.0/plant/DDATA/late/oven1', enc({ seq: 40, metrics: [{ alias: 1, type: 'Float', value: 1 }, { name: 'Temperature', type: 'Float', value: 2 }] })));
    expect(r.samples).toEqual([{ variable: 'mvr_oven1_temperature', value: 2 }]);
    expect(r.refusals.map((x) => x.reason)).toEqual(['unknown_alias']);
    d.decode(msg('spBv1.0/plant/DDATA/late/oven1', enc({ seq: 41, metrics: [{ alias: 1, type: 'Float', value: 1 }] })));
    expect(published).toHaveLength(1); // throttled by rebirth_min_interval
    mono += 31_000;
    d.decode(msg('spBv1.0/plant/DDATA/late/oven1', enc({ seq: 42, metrics: [{ alias: 1, type: 'Float', value: 1 }] })));
    expect(published).toHaveLength(2);
  });

  it('honours request_rebirth: false', () => {
    const d = new SparkplugDecoder(cfg({ request_rebirth: false }), host);
    d.decode(msg('spBv1.0/plant/DDATA/late/oven1', enc({ seq: 40, metrics: [{ alias: 1, type: 'Float', value: 1 }] })));
    expect(published).toHaveLength(0);
  });

  it('NDEATH clears the session; a stale NDEATH (older bdSeq) is ignored', () => {
    const d = new SparkplugDecoder(cfg(), host);
    d.decode(msg('spBv1.0/plant/NBIRTH/oven-ctl', enc({ seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 5 }] })));
    d.decode(msg('spBv1.0/plant/DBIRTH/oven-ctl/oven1', enc({ seq: 1, metrics: [{ name: 'Temperature', alias: 1, type: 'Float', value: 1 }] })));
    const stale = d.decode(msg('spBv1.0/plant/NDEATH/oven-ctl', enc({ metrics: [{ name: 'bdSeq', type: 'UInt64', value: 4 }] })));
    expect(stale.ignored).toMatch(/earlier session/);
    expect(d.decode(msg('spBv1.0/plant/DDATA/oven-ctl/oven1', enc({ seq: 2, metrics: [{ alias: 1, type: 'Float', value: 3 }] }))).samples).toHaveLength(1);
    const death = d.decode(msg('spBv1.0/plant/NDEATH/oven-ctl', enc({ metrics: [{ name: 'bdSeq', type: 'UInt64', value: 5 }] })));
    expect(death.ignored).toBe('NDEATH');
    const after = d.decode(msg('spBv1.0/plant/DDATA/oven-ctl/oven1', enc({ seq: 3, metrics: [{ alias: 1, type: 'Float', value: 3 }] })));
    expect(after.samples).toHaveLength(0);
    expect(after.refusals[0].reason).toBe('unknown_alias');
    expect(events.map((e) => e.event)).toEqual(['nbirth', 'dbirth', 'stale_ndeath', 'ndeath', 'rebirth_requested']);
    const detail = d.detail() as { edge_nodes: Array<Record<string, unknown>> };
    expect(detail.edge_nodes[0]).toMatchObject({ edge_node: 'oven-ctl', online: false, unknown_aliases: 1 });
  });

  it('DDEATH forgets that device\'s aliases until its next DBIRTH', () => {
    const d = new SparkplugDecoder(cfg({ request_rebirth: false }), host);
    d.decode(msg('spBv1.0/plant/NBIRTH/oven-ctl', enc({ seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 1 }] })));
    d.decode(msg('spBv1.0/plant/DBIRTH/oven-ctl/oven1', enc({ seq: 1, metrics: [{ name: 'Temperature', alias: 1, type: 'Float', value: 1 }] })));
    d.decode(msg('spBv1.0/plant/DDEATH/oven-ctl/oven1', enc({ seq: 2 })));
    expect(d.decode(msg('spBv1.0/plant/DDATA/oven-ctl/oven1', enc({ seq: 3, metrics: [{ alias: 1, type: 'Float', value: 3 }] }))).refusals[0].reason).toBe('unknown_alias');
    d.decode(msg('spBv1.0/plant/DBIRTH/oven-ctl/oven1', enc({ seq: 4, metrics: [{ name: 'Temperature', alias: 1, type: 'Float', value: 1 }] })));
    expect(d.decode(msg('spBv1.0/plant/DDATA/oven-ctl/oven1', enc({ seq: 5, metrics: [{ alias: 1, type: 'Float', value: 3 }] }))).samples).toHaveLength(1);
  });

  it('notices a sequence gap and asks for a rebirth only when the message is still missing after the reorder timeout', () => {
    const d = new SparkplugDecoder(cfg({ reorder_timeout: 2_000 }), host);
    const data = (seq: number) => d.decode(msg('spBv1.0/plant/NDATA/oven-ctl', enc({ seq, metrics: [] })));
    d.decode(msg('spBv1.0/plant/NBIRTH/oven-ctl', enc({ seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 1 }] })));
    data(1);
    data(3); // 2 missing
    data(2); // arrives late, within the timeout
    mono += 5_000;
    data(4);
    expect(published).toHaveLength(0);
    data(6); // 5 missing for good
    mono += 3_000;
    data(7);
    expect(published).toHaveLength(1);
    data(8);
    expect(events.filter((e) => e.event === 'seq_gap')).toHaveLength(2);
  });

  it('refuses null, bad-quality, string and template metrics with a reason', () => {
    expect(metricValue({ name: 'x', type: 'Double', value: null, isNull: true })).toMatchObject({ ok: false, reason: 'null_value' });
    expect(metricValue({ name: 'x', type: 'Double', value: 1, properties: { Quality: { type: 'Int32', value: 0 } } })).toMatchObject({ ok: false, reason: 'bad_status' });
    expect(metricValue({ name: 'x', type: 'Double', value: 1, properties: { Quality: { type: 'Int32', value: 192 } } })).toEqual({ ok: true, value: 1 });
    expect(metricValue({ name: 'x', type: 'String', value: 'running' })).toMatchObject({ ok: false, reason: 'not_numeric' });
    expect(metricValue({ name: 'x', type: 'String', value: '42.5' })).toEqual({ ok: true, value: 42.5 });
    expect(metricValue({ name: 'x', type: 'Template', value: {} as never })).toMatchObject({ ok: false, reason: 'not_numeric' });
    expect(metricValue({ name: 'x', type: 'Boolean', value: true })).toEqual({ ok: true, value: 1 });
    expect(shortestFloat32(Math.fround(21.3))).toBe(21.3);
  });

  it('refuses what is not Sparkplug and ignores commands and STATE', () => {
    const d = new SparkplugDecoder(cfg(), host);
    expect(d.decode(msg('spBv1.0/plant/NDATA/oven-ctl', Buffer.from([0xff, 0xff, 0xff, 0x0f, 0x07]))).refusals[0].reason).toBe('decode_error');
    expect(d.decode(msg('spBv1.0/plant/NCMD/oven-ctl', Buffer.from([]))).ignored).toMatch(/command/);
    expect(d.decode(msg('spBv1.0/STATE/scada', '{"online":true}')).ignored).toMatch(/STATE/);
    expect(d.decode(msg('spBv1.0/plant/BOGUS/oven-ctl', '')).refusals[0].reason).toBe('malformed');
  });
});

describe('malformed-input table (pipeline with a real buffer)', () => {
  let tb: TestBuffer;
  afterEach(async () => tb?.destroy());

  const subscriptions = [
    { format: 'number', topic: 'num/+', variable_from_topic: { level: 1, variables: { a: 'mvr_num_a' } } },
    { format: 'json', topic: 'json/x', timestamp: { path: 'ts' }, values: [{ path: 'v', variable: 'mvr_json_v' }, { path: 'w', variable: 'mvr_json_w', scale: 10 }] },
    { format: 'metrics', topic: 'metrics/x', names: { Speed: 'mvr_metrics_speed' } },
    { format: 'sparkplug', topic: 'spBv1.0/g/#', request_rebirth: false, metrics: [{ name: 'T', variable: 'mvr_sp_t' }] },
  ];

  // topic, payload, expected refusal reasons (in order), expected stored values
  const TABLE: Array<[string, string | Buffer, string[], number[]]> = [
    ['num/a', '42.5', [], [42.5]],
    ['num/a', ' true ', [], [1]],
    ['num/a', '42 °C', ['not_numeric'], []],
    ['num/a', 'NaN', ['not_finite'], []],
    ['num/a', '', ['malformed'], []],
    ['num/zz', '1', ['unknown_name'], []],
    ['json/x', '{"ts": 1795000000000, "v": 1, "w": 2}', [], [1, 20]],
    ['json/x', '{"ts": 1795000000000, "v": "3.5", "w": true}', [], [3.5, 10]],
    ['json/x', '{not json', ['malformed'], []],
    ['json/x', '{"ts": 1795000000000, "v": "high", "w": null}', ['not_numeric', 'null_value'], []],
    ['json/x', '{"ts": 1795000000000, "v": {"a": 1}}', ['not_numeric', 'missing_value'], []],
    ['json/x', '{"ts": "last tuesday", "v": 1, "w": 1}', ['bad_timestamp', 'bad_timestamp'], []],
    ['json/x', '{"v": 1, "w": 1}', ['bad_timestamp', 'bad_timestamp'], []],
    ['json/x', '[1, 2, 3]', ['bad_timestamp', 'bad_timestamp'], []],
    ['metrics/x', '{"metrics": [{"name": "Speed", "value": 7, "timestamp": 1795000000}, {"name": "mvr_direct", "value": 8}]}', [], [7, 8]],
    ['metrics/x', '{"metrics": [{"name": "Unknown", "value": 7}, {"value": 1}, {"name": "Speed", "value": "fast"}]}', ['unknown_name', 'malformed', 'not_numeric'], []],
    ['metrics/x', '{"metrics": "none"}', ['malformed'], []],
    ['metrics/x', '{"timestamp": "bad", "metrics": []}', ['bad_timestamp'], []],
    ['spBv1.0/g/NDATA/n', Buffer.from('definitely not protobuf \u00ff\u00fe'), ['decode_error'], []],
    ['json/x', Buffer.alloc(300, 0x20), ['oversize'], []],
    ['nobody/listens', '1', [], []],
  ];

  it('counts every bad input by reason and topic, stores the good ones, never throws', async () => {
    tb = openTestBuffer();
    const log = captureLogger();
    const { makeContext, metrics } = contexts(tb.buffer, log.logger);
    const ctx = makeContext('table', 'mqtt');
    const s = section({ connections: [{ name: 'table', url: 'mqtt://x', max_payload_bytes: 256, subscriptions }] });
    const pipeline = new MessagePipeline({ sourceName: 'table', subscriptions: s!.connections[0].subscriptions, maxPayloadBytes: 256, maxPending: 100, ctx, publish: () => false });

    const expectedReasons: Record<string, number> = {};
    let expectedValues: number[] = [];
    for (const [topic, payload, reasons, values] of TABLE) {
      const before = { ...ctx.stats.snapshot().samplesRefused };
      const rowsBefore = tb.rows().length;
      await pipeline.accept(msg(topic, payload, { receivedAt: Date.now() }));
      const after = ctx.stats.snapshot().samplesRefused;
      const got: Record<string, number> = {};
      for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) got[k] = v - (before[k] ?? 0);
      const want: Record<string, number> = {};
      for (const r of reasons) want[r] = (want[r] ?? 0) + 1;
      expect({ topic, payload: String(payload).slice(0, 40), got }).toEqual({ topic, payload: String(payload).slice(0, 40), got: want });
      expect(tb.rows().slice(rowsBefore).map((r) => r.value)).toEqual(values);
      for (const r of reasons) expectedReasons[r] = (expectedReasons[r] ?? 0) + 1;
      expectedValues = [...expectedValues, ...values];
    }
    expect(ctx.stats.snapshot().samplesRefused).toEqual(expectedReasons);
    const detail = pipeline.detail() as { refused_by_topic: Record<string, Record<string, number>>; unmatched_messages: number };
    expect(detail.refused_by_topic['num/a']).toEqual({ not_numeric: 1, not_finite: 1, malformed: 1 });
    expect(detail.refused_by_topic['json/x'].bad_timestamp).toBe(6);
    expect(detail.unmatched_messages).toBe(1);
    // Per subscription and reason in metrics, outcome per message.
    const refusals = await metrics.mqttRefusals.get();
    expect(refusals.values.find((v) => v.labels.subscription === 'json/x' && v.labels.reason === 'oversize')?.value).toBe(1);
    const outcomes = Object.fromEntries((await metrics.mqttMessages.get()).values.map((v) => [v.labels.outcome, v.value]));
    expect(outcomes).toMatchObject({ ok: 5, refused: 15, unmatched: 1 });
    // Logged, with the reason and topic named.
    expect(log.lines.some((l) => l.reason === 'bad_timestamp' && l.topic === 'json/x')).toBe(true);
  });

  it('does not flood the log: 1,000 identical bad messages give one line', async () => {
    tb = openTestBuffer();
    const log = captureLogger();
    const { makeContext } = contexts(tb.buffer, log.logger);
    const ctx = makeContext('flood', 'mqtt');
    const s = section({ connections: [{ name: 'flood', url: 'mqtt://x', subscriptions: [{ format: 'number', topic: 'x', variable: 'mvr_x' }] }] });
    const pipeline = new MessagePipeline({ sourceName: 'flood', subscriptions: s!.connections[0].subscriptions, maxPayloadBytes: 1000, maxPending: 100, ctx, publish: () => false });
    for (let i = 0; i < 1000; i++) await pipeline.accept(msg('x', 'garbage', { receivedAt: Date.now() }));
    expect(ctx.stats.snapshot().samplesRefused).toEqual({ not_numeric: 1000 });
    expect(log.lines.filter((l) => l.reason === 'not_numeric')).toHaveLength(1);
  });

  it('stamps arrival times strictly increasing per variable', async () => {
    tb = openTestBuffer();
    const { makeContext } = contexts(tb.buffer, silentLogger());
    const ctx = makeContext('stamp', 'mqtt');
    const s = section({ connections: [{ name: 'stamp', url: 'mqtt://x', subscriptions: [{ format: 'number', topic: 'x', variable: 'mvr_x' }] }] });
    const pipeline = new MessagePipeline({ sourceName: 'stamp', subscriptions: s!.connections[0].subscriptions, maxPayloadBytes: 1000, maxPending: 100, ctx, publish: () => false });
    await Promise.all([1, 2, 3].map((v) => pipeline.accept(msg('x', String(v), { receivedAt: NOW }))));
    expect(tb.rows().map((r) => r.ts)).toEqual([NOW, NOW + 1, NOW + 2]);
  });
});
