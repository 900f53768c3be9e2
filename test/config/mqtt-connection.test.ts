import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { triggerSchema } from '../../src/annotations/config.js';
import { MqttTrigger } from '../../src/annotations/mqtt-trigger.js';
import type { AnnotationService } from '../../src/annotations/service.js';
import { formatIssues } from '../../src/config/issues.js';
import { mqttClientOptions } from '../../src/config/mqtt-connection.js';
import { Secret } from '../../src/config/secrets.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { FleetLink } from '../../src/fleet/broker-link.js';
import { fleetMqttSchema } from '../../src/fleet/config.js';
import { connectionSchema } from '../../src/sources/mqtt/config.js';
import { makeCertificates, mosquittoAvailable, removeDir, startMosquitto, type Certificates, type Mosquitto } from '../sources/mqtt/helpers.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Issue 23 §4: the MQTT source, the fleet link and the annotation trigger each declared their own
 * broker URL, credentials and keep-alive, and drifted apart (the trigger took tcp:// and ssl://
 * while saying it did not; only the source had TLS settings). One declaration now
 * (src/config/mqtt-connection.ts) and one factory of mqtt.js options.
 */
const SUB = [{ topic: 't', format: 'number', variable: 'mvr_t' }];
const sections: Array<[string, z.ZodType, Record<string, unknown>]> = [
  ['mqtt.connections[]', connectionSchema, { name: 'c', subscriptions: SUB }],
  ['fleet.mqtt', fleetMqttSchema, {}],
  ['annotations.mqtt', triggerSchema, {}],
];

function problems(schema: z.ZodType, input: unknown): string[] {
  const r = schema.safeParse(input, { reportInput: true });
  return r.success ? [] : formatIssues(r.error.issues);
}

describe('one MQTT connection schema for the source, the fleet link and the annotation trigger', () => {
  it.each(sections)('%s: the same URLs are accepted and refused, with the same words', (_name, schema, rest) => {
    for (const url of ['mqtt://broker:1883', 'mqtts://broker:8883', 'ws://broker/mqtt', 'wss://broker/mqtt', 'tcp://broker:1883', 'ssl://broker:8883']) {
      expect(problems(schema, { ...rest, url }), url).toEqual([]);
    }
    expect(problems(schema, { ...rest, url: 'http://x' })).toEqual(['url: "http://x": scheme "http" is not one of mqtt, mqtts, ws, wss']);
    expect(problems(schema, { ...rest, url: 'mqtt://user:pw@broker' })).toEqual(['url: must not contain a user name or password; use username: and password: instead']);
    expect(problems(schema, { ...rest, url: 'broker:1883' }).join()).toMatch(/scheme "broker" is not one of/);
    expect(problems(schema, { ...rest, url: 'no url' }).join()).toMatch(/^url: "no url" is not a URL \(mqtt:\/\/host:1883, mqtts:\/\/host:8883, ws:\/\/, wss:\/\/\)/);
  });

  it.each(sections)('%s: TLS settings, only on a TLS URL', (_name, schema, rest) => {
    expect(problems(schema, { ...rest, url: 'mqtts://broker:8883', tls: { reject_unauthorized: false, servername: 'broker.plant' } })).toEqual([]);
    expect(problems(schema, { ...rest, url: 'mqtt://broker:1883', tls: { reject_unauthorized: false } })).toEqual(['tls: is set but url "mqtt://broker:1883" is not mqtts:// or wss://']);
    expect(problems(schema, { ...rest, url: 'mqtts://broker:8883', tls: { cert: '/nonexistent.pem' } }).join('\n')).toMatch(/tls\.cert: "\/nonexistent\.pem": file not found/);
  });

  it('the factory: credentials, keep-alive in whole seconds (never rounded to "off"), TLS', () => {
    const o = mqttClientOptions({ url: 'mqtt://b', username: 'u', password: new Secret('pw', 'test'), keepalive: 400, connect_timeout: 2_500 }, 'gw-1');
    expect(o).toMatchObject({ clientId: 'gw-1', username: 'u', password: 'pw', keepalive: 1, connectTimeout: 2_500, queueQoSZero: false });
    expect(mqttClientOptions({ url: 'mqtt://b', keepalive: 0, connect_timeout: 10_000 }, 'x').keepalive).toBe(0);
    expect(mqttClientOptions({ url: 'mqtt://b', keepalive: 15_000, connect_timeout: 10_000 }, 'x').keepalive).toBe(15);
    expect(mqttClientOptions({ url: 'mqtts://b', keepalive: 1_000, connect_timeout: 10_000, tls: { reject_unauthorized: false, servername: 'b.plant' } }, 'x')).toMatchObject({ rejectUnauthorized: false, servername: 'b.plant' });
  });
});

const HAVE_MOSQUITTO = mosquittoAvailable();

describe.skipIf(!HAVE_MOSQUITTO)('TLS with a client certificate, now also for the fleet link and the annotation trigger (mosquitto)', () => {
  let certs: Certificates;
  let mq: Mosquitto;
  beforeAll(async () => {
    certs = makeCertificates();
    mq = await startMosquitto({ users: { gw: 'gw-pw' }, tls: certs });
  });
  afterAll(async () => {
    await mq?.stop();
    if (mq) removeDir(mq.dir);
    if (certs) removeDir(certs.dir);
  });

  it('fleet.mqtt and annotations.mqtt connect over mqtts:// with tls.ca, cert and key', async () => {
    const url = `mqtts://127.0.0.1:${mq.tlsPort}`;
    const tls = { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey };
    const fleet = new FleetLink({ config: fleetMqttSchema.parse({ url, username: 'gw', password: 'gw-pw', tls }), gateway: 'tls-gw', sharing: false, logger: silentLogger(), metrics: createMetrics(), clock: systemClock });
    const trigger = new MqttTrigger({ config: triggerSchema.parse({ url, username: 'gw', password: 'gw-pw', client_id: 'tls-annotations', tls }), service: {} as AnnotationService, gatewayName: 'tls-gw', logger: silentLogger(), metrics: createMetrics(), clock: systemClock });
    try {
      fleet.start();
      trigger.start();
      await waitFor(() => fleet.connected && trigger.status().connected === true, { what: 'both connected over TLS' });
    } finally {
      await fleet.close();
      await trigger.close();
    }
    // Without the CA the broker's certificate does not verify: no connection, the reason in status.
    const untrusted = new MqttTrigger({ config: triggerSchema.parse({ url, username: 'gw', password: 'gw-pw', client_id: 'tls-untrusted', tls: { ...tls, ca: certs.otherCa } }), service: {} as AnnotationService, gatewayName: 'tls-gw', logger: silentLogger(), metrics: createMetrics(), clock: systemClock });
    try {
      untrusted.start();
      await waitFor(() => untrusted.status().last_error, { what: 'the TLS refusal in status' });
      expect(untrusted.status().connected).toBe(false);
    } finally {
      await untrusted.close();
    }
  });
});
