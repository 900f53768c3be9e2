import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { validateConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/core/errors.js';
import { createMqttSources } from '../../../src/sources/mqtt/index.js';
import { contexts, GatedSink } from './helpers.js';

const base = {
  service: {
    base_url: 'http://127.0.0.1:9/tracking/v1',
    auth_url: 'http://127.0.0.1:9',
    organisation_id: 'org_demo',
    auth: { mode: 'client_credentials', client_id: 'gw', client_secret: 'x' },
  },
};

function problemsOf(mqtt: unknown): string[] {
  try {
    validateConfig({ ...base, mqtt });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected the config to be refused');
}

const sub = { format: 'number', topic: 'a/b', variable: 'mvr_x' };

describe('mqtt config', () => {
  it('applies defaults: persistent session, QoS 1, 256 KiB payloads, 1,000 pending messages', () => {
    const { config } = validateConfig({ ...base, mqtt: { connections: [{ name: 'c', url: 'mqtt://broker:1883', subscriptions: [sub] }] } });
    const c = config.mqtt!.connections[0];
    expect(c).toMatchObject({ clean: false, protocol_version: 4, keepalive: 30_000, max_payload_bytes: 262_144, max_pending_messages: 1_000, reconnect: { initial: 1_000, max: 30_000 } });
    expect(c.subscriptions[0]).toMatchObject({ qos: 1, retained: 'accept', scale: 1, offset: 0 });
  });

  it('names the setting and the bad value', () => {
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ ...sub, format: 'jsn' }] }] })).toEqual([
      'mqtt.connections[0].subscriptions[0].format: "jsn" is not one of number, json, metrics, sparkplug (did you mean "json"?)',
    ]);
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ ...sub, topic: 'a/#/b' }] }] })).toEqual(['mqtt.connections[0].subscriptions[0].topic: "a/#/b" "#" must be the last level']);
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ ...sub, qos: 3 }] }] })).toEqual(['mqtt.connections[0].subscriptions[0].qos: 3 is above the maximum of 2']);
    expect(problemsOf({ connections: [{ name: 'c', url: 'http://x', subscriptions: [sub] }] })).toEqual(['mqtt.connections[0].url: "http://x": scheme "http" is not one of mqtt, mqtts, ws, wss']);
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptons: [sub] }] })).toContain('mqtt.connections[0].subscriptons: unknown setting (did you mean "subscriptions"?)');
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ format: 'json', topic: 't', values: [{ path: 'a..b', variable: 'mvr_x' }] }] }] })).toEqual([
      'mqtt.connections[0].subscriptions[0].values[0].path: "a..b" is not a path: empty key at position 2',
    ]);
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ format: 'number', topic: 't' }] }] })).toEqual([
      'mqtt.connections[0].subscriptions[0].variable: set variable (one variable for the topic) or variable_from_topic (a table for a topic level)',
    ]);
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ format: 'number', topic: 'plant/x/t', variable_from_topic: { level: 1, variables: { x: 'mvr_x' } } }] }] })).toEqual([
      'mqtt.connections[0].subscriptions[0].variable_from_topic.level: 1: level 1 of "plant/x/t" is "x", not a "+" or "#" wildcard',
    ]);
  });

  it('refuses overlapping subscriptions, credentials in the URL, and embedded without a broker', () => {
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', subscriptions: [{ ...sub, topic: 'plant/#' }, { ...sub, topic: 'plant/+/t' }] }] })).toEqual([
      'mqtt.connections[0].subscriptions[1].topic: "plant/+/t" overlaps "plant/#" of subscriptions[0]; a message matching both would be stored twice. Narrow the filters or use a second connection',
    ]);
    const withCreds = problemsOf({ connections: [{ name: 'c', url: 'mqtt://user:hunter2@x', subscriptions: [sub] }] });
    expect(withCreds).toEqual(['mqtt.connections[0].url: must not contain a user name or password; use username: and password: instead']);
    expect(withCreds.join()).not.toContain('hunter2');
    expect(problemsOf({ connections: [{ name: 'c', url: 'embedded', subscriptions: [sub] }] })).toEqual(['mqtt.connections[0].url: "embedded" needs the embedded broker: set mqtt.broker.enabled: true']);
    expect(problemsOf({ broker: { enabled: true, allow_anonymous: true }, connections: [{ name: 'c', url: 'embedded', username: 'u', subscriptions: [sub] }] })).toEqual([
      "mqtt.connections[0].username: does not apply to url: embedded (the subscription runs inside the gateway's own broker)",
    ]);
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtt://x', tls: { reject_unauthorized: false }, subscriptions: [sub] }] })).toEqual(['mqtt.connections[0].tls: is set but url "mqtt://x" is not mqtts:// or wss://']);
    expect(problemsOf({ connections: [{ name: 'c', url: 'mqtts://x', tls: { ca: '/nonexistent/ca.pem' }, subscriptions: [sub] }] })).toEqual(['mqtt.connections[0].tls.ca: "/nonexistent/ca.pem": file not found']);
  });

  it('requires broker credentials unless anonymous access is chosen, and never prints passwords', () => {
    expect(problemsOf({ broker: { enabled: true } })).toEqual(['mqtt.broker.username: required setting is missing: set username and password, or allow_anonymous: true to accept any client']);
    expect(problemsOf({ broker: { enabled: true, username: 'plc' } })).toEqual(['mqtt.broker.password: username and password go together; set both']);
    process.env.TEST_MQTT_BROKER_PW = 'pl4nt-secret';
    const { config } = validateConfig({ ...base, mqtt: { broker: { enabled: true, username: 'plc', password: { env: 'TEST_MQTT_BROKER_PW' } }, connections: [{ name: 'c', url: 'mqtt://x', password: 'literal-pw', username: 'u', subscriptions: [sub] }] } });
    expect(config.mqtt!.broker!.password!.reveal()).toBe('pl4nt-secret');
    expect(JSON.stringify(config)).not.toMatch(/pl4nt-secret|literal-pw/);
    expect(inspect(config, { depth: 20 })).not.toMatch(/pl4nt-secret|literal-pw/);
    // Status of the sources built from it does not show them either.
    const { makeContext } = contexts(new GatedSink());
    const sources = createMqttSources(config.mqtt, makeContext);
    expect(JSON.stringify(sources.map((s) => s.status()))).not.toMatch(/pl4nt-secret|literal-pw/);
  });

  it('accepts the documented example file', () => {
    process.env.MQTT_PASSWORD = 'x';
    process.env.MQTT_BROKER_PASSWORD = 'y';
    const doc = parse(readFileSync(new URL('../../../config/examples/mqtt.yaml', import.meta.url), 'utf8')) as Record<string, unknown>;
    const { config } = validateConfig({ ...base, mqtt: doc.mqtt });
    expect(config.mqtt!.connections.map((c) => c.url)).toEqual(["embedded", "mqtt://broker.plant.local:1883"]);
    expect(config.mqtt!.broker).toMatchObject({ enabled: true, port: 1883, max_packet_size: 262_144 });
    expect(new Set(config.mqtt!.connections.flatMap((c) => c.subscriptions.map((s) => s.format)))).toEqual(new Set(['number', 'json', 'metrics', 'sparkplug']));
  });
});
