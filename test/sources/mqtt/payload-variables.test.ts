import { afterEach, describe, expect, it } from 'vitest';
import { formatIssues } from '../../../src/config/issues.js';
import { mqttSectionSchema } from '../../../src/sources/mqtt/config.js';
import { sparkplugCodec } from '../../../src/sources/mqtt/decoders/sparkplug.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import type { EmbeddedBrokerSource } from '../../../src/sources/mqtt/broker-source.js';
import { openTestBuffer } from '../../helpers/buffer.js';
import { captureLogger, connectClient, contexts, endClient, section, waitFor } from './helpers.js';

/**
 * Issue 12 §4: a payload that names its variable (mvr_... in a metrics array or as a Sparkplug
 * metric name) could write any variable of the organisation. `payload_variables` limits that per
 * subscription; mapped names are always allowed.
 */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c().catch(() => undefined);
});

describe('payload_variables allow-list', () => {
  it('stores allowed and mapped names, refuses the rest with variable_not_allowed (metrics and Sparkplug through the embedded broker)', async () => {
    const tb = openTestBuffer();
    cleanup.push(() => tb.destroy());
    const log = captureLogger();
    const ctxs = contexts(tb.buffer, log.logger);
    const sources = createMqttSources(
      section({
        broker: { enabled: true, host: '127.0.0.1', port: 0, allow_anonymous: true },
        connections: [
          {
            name: 'in',
            url: 'embedded',
            subscriptions: [
              { format: 'metrics', topic: 'm/#', names: { Speed: 'mvr_line_speed' }, payload_variables: ['mvr_oven1_*', 'mvr_exact'] },
              { format: 'sparkplug', topic: 'spBv1.0/plant/#', request_rebirth: false, payload_variables: ['mvr_sp_ok'] },
            ],
          },
        ],
      }),
      ctxs.makeContext,
    );
    for (const s of sources) await s.start();
    cleanup.push(() => Promise.all(sources.map((s) => s.close())));
    const broker = (sources[0] as EmbeddedBrokerSource).broker;
    await waitFor(() => broker.address, { what: 'broker listening' });
    const pub = await connectClient(`mqtt://127.0.0.1:${broker.address!.port}`);
    cleanup.push(() => endClient(pub));

    const ts = Date.now();
    const metrics = [
      { name: 'mvr_oven1_temp', value: 1 },
      { name: 'mvr_exact', value: 2 },
      { name: 'Speed', value: 3 },
      { name: 'mvr_payroll_total', value: 999 },
      { name: 'mvr_exact_not', value: 998 },
    ].map((m) => ({ ...m, timestamp: ts }));
    await pub.publishAsync('m/line', JSON.stringify({ metrics }), { qos: 1 });
    const birth = sparkplugCodec.encodePayload({ timestamp: ts, seq: 0, metrics: [{ name: 'bdSeq', type: 'UInt64', value: 0 }, { name: 'mvr_sp_ok', type: 'Double', value: 5, timestamp: ts }, { name: 'mvr_sp_evil', type: 'Double', value: 997, timestamp: ts }] });
    await pub.publishAsync('spBv1.0/plant/NBIRTH/edge1', Buffer.from(birth), { qos: 1 });

    await waitFor(() => tb.rows().length >= 4, { what: 'allowed samples committed' });
    const stored = Object.fromEntries(tb.rows().map((r) => [r.variable, r.value]));
    expect(stored).toEqual({ mvr_oven1_temp: 1, mvr_exact: 2, mvr_line_speed: 3, mvr_sp_ok: 5 });
    const refused = (await ctxs.metrics.mqttRefusals.get()).values.filter((v) => v.labels.reason === 'variable_not_allowed').reduce((a, v) => a + v.value, 0);
    expect(refused).toBe(3);
    expect(log.text()).toContain('variable not allowed');
  });

  it('refuses entries that are neither a variable id nor a prefix', () => {
    const r = mqttSectionSchema.safeParse({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ format: 'metrics', topic: 'm/#', payload_variables: ['payroll*'] }] }] }, { reportInput: true });
    expect(r.success).toBe(false);
    expect(formatIssues(r.error!.issues, ['mqtt'])).toEqual(['mqtt.connections[0].subscriptions[0].payload_variables[0]: "payroll*" is not a machine variable id (mvr_...) or a prefix ending in "*" (mvr_oven1_*)']);
  });
});
