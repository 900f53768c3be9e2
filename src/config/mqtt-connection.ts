import { existsSync, readFileSync } from 'node:fs';
import type { IClientOptions } from 'mqtt';
import { z } from 'zod';
import { secretSchema, type Secret } from './secrets.js';
import { durationMs } from './units.js';

/**
 * One MQTT connection, as every part of the gateway that talks to a broker configures it: the MQTT
 * source (`mqtt.connections[]`), the fleet link (`fleet.mqtt`) and the annotation trigger
 * (`annotations.mqtt`). The settings they share (broker URL, client id, user name and password,
 * TLS, keep-alive, connect timeout) are declared here once, and `mqttClientOptions` turns them
 * into mqtt.js options; each part adds what is its own (subscriptions, prefix, topic, reconnect).
 *
 * It declares no mqtt.js import at run time, so validating a configuration does not load mqtt.js.
 */

/** Schemes a broker URL may have. tcp and ssl are mqtt.js' older names for mqtt and mqtts. */
const SCHEMES = ['mqtt:', 'mqtts:', 'ws:', 'wss:', 'tcp:', 'ssl:'];
/** Schemes that run over TLS, where `tls:` settings apply. */
const TLS_SCHEMES = /^(mqtts|wss|ssl):/;

/**
 * What is wrong with a broker URL, or null. Credentials in a URL would end up in logs and status
 * output; they have their own settings.
 */
export function mqttUrlProblem(url: string, o: { embedded?: boolean } = {}): MqttUrlProblem | null {
  if (o.embedded && url === 'embedded') return null;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { kind: 'not_url', message: `${JSON.stringify(url)} is not a URL (mqtt://host:1883, mqtts://host:8883, ws://, wss://)${o.embedded ? ' nor "embedded"' : ''}`, input: url };
  }
  if (!SCHEMES.includes(u.protocol)) {
    const reason = `scheme "${u.protocol.replace(':', '')}" is not one of mqtt, mqtts, ws, wss`;
    return { kind: 'scheme', reason, message: `${JSON.stringify(url)}: ${reason}`, input: url };
  }
  if (u.username || u.password) return { kind: 'credentials', message: 'must not contain a user name or password; use username: and password: instead', input: '[url with credentials]' };
  return null;
}

export type MqttUrlProblem =
  | { kind: 'not_url' | 'credentials'; message: string; input: string }
  /** `reason`: the message without the URL in front. */
  | { kind: 'scheme'; reason: string; message: string; input: string };

/** Whether the URL's scheme runs over TLS (mqtts://, wss://, ssl://). */
export function isTlsUrl(url: string): boolean {
  return TLS_SCHEMES.test(url);
}

function brokerUrl(o: { embedded: boolean; description: string; examples: string[] }) {
  return z
    .string()
    .superRefine((s, ctx) => {
      const p = mqttUrlProblem(s, { embedded: o.embedded });
      if (p) ctx.addIssue({ code: 'custom', message: p.message, input: p.input });
    })
    .meta({ description: `${o.description}. tcp:// and ssl:// (mqtt.js' older names for mqtt:// and mqtts://) are accepted too`, examples: o.examples });
}

function existingFile(description: string, example: string) {
  return z
    .string()
    .min(1)
    .superRefine((p, ctx) => {
      if (!existsSync(p)) ctx.addIssue({ code: 'custom', message: `${JSON.stringify(p)}: file not found`, input: p });
    })
    .meta({ description, examples: [example] });
}

/** TLS settings of a connection over mqtts://, wss:// or ssl://. */
export function mqttTlsSchema(o: { passphraseEnv: string }) {
  return z
    .strictObject({
      ca: existingFile('PEM file of the certificate authority that signed the broker certificate (default: the system CAs)', '/etc/edge-gateway/mqtt-ca.pem').optional(),
      cert: existingFile('PEM file of the client certificate, for brokers that require one', '/etc/edge-gateway/mqtt-client.pem').optional(),
      key: existingFile('PEM file of the client certificate\'s private key', '/etc/edge-gateway/mqtt-client.key').optional(),
      passphrase: secretSchema().optional().meta({ description: 'Passphrase of an encrypted private key', examples: [{ env: o.passphraseEnv }] }),
      reject_unauthorized: z.boolean().default(true).meta({ description: 'Refuse a broker whose certificate does not verify. Turn off only in a lab' }),
      servername: z.string().min(1).optional().meta({ description: 'Host name to verify the broker certificate against (SNI), when it differs from the URL host' }),
    })
    .superRefine((t, ctx) => {
      if (t.cert && !t.key) ctx.addIssue({ code: 'custom', path: ['key'], message: 'required when cert is set (the client certificate needs its private key)', input: undefined });
      if (t.key && !t.cert) ctx.addIssue({ code: 'custom', path: ['cert'], message: 'required when key is set', input: undefined });
    })
    .meta({ description: 'TLS settings for mqtts:// and wss://' });
}

export interface MqttConnectionFieldOptions {
  /** Whether `url: embedded` (the gateway's own broker) is allowed. */
  embedded?: boolean;
  url: { description: string; examples: string[] };
  clientId: { description: string; examples: string[] };
  /** Example environment variable names for the password and the TLS key passphrase. */
  passwordEnv: string;
  passphraseEnv: string;
  /** What the broker is called in descriptions ("the broker", "the plant broker"). */
  broker: string;
  keepalive: { minMs: number; defaultMs: number; description: string };
}

/** The settings every MQTT connection has, to spread into a section's own strictObject. */
export function mqttConnectionFields(o: MqttConnectionFieldOptions) {
  return {
    url: brokerUrl({ embedded: o.embedded ?? false, ...o.url }),
    client_id: z.string().min(1).max(65_535).optional().meta(o.clientId),
    username: z.string().min(1).optional().meta({ description: `User name for ${o.broker}`, examples: ['edge-gateway'] }),
    password: secretSchema().optional().meta({ description: `Password for ${o.broker}: {env: NAME}, {file: PATH} or a literal`, examples: [{ env: o.passwordEnv }] }),
    tls: mqttTlsSchema({ passphraseEnv: o.passphraseEnv }).optional(),
    keepalive: durationMs({ min: o.keepalive.minMs, max: 65_535_000 }).default(o.keepalive.defaultMs).meta({ description: o.keepalive.description, examples: [`${o.keepalive.defaultMs / 1000}s`] }),
    connect_timeout: durationMs({ min: 100, max: 600_000 }).default(10_000).meta({ description: 'Give up a connection attempt (TCP, TLS and CONNACK) after this long', examples: ['10s'] }),
  };
}

/** The shared settings after validation. */
export interface MqttConnectionSettings {
  url: string;
  client_id?: string;
  username?: string;
  password?: Secret;
  tls?: z.output<ReturnType<typeof mqttTlsSchema>>;
  keepalive: number;
  connect_timeout: number;
}

/** Cross-field check of the shared settings, for the section's superRefine. */
export function checkMqttConnection(c: { url: string; tls?: unknown }, ctx: z.RefinementCtx): void {
  if (c.tls !== undefined && c.url !== 'embedded' && !isTlsUrl(c.url)) {
    ctx.addIssue({ code: 'custom', path: ['tls'], message: `is set but url ${JSON.stringify(c.url)} is not mqtts:// or wss://`, input: undefined });
  }
}

const skipLog = (): void => undefined;

/**
 * mqtt.js options for the shared settings: client id, credentials, keep-alive, connect timeout, TLS
 * files (read now: a file that vanished since validation throws, and the caller retries). The
 * caller adds its own session, reconnect and protocol options.
 */
export function mqttClientOptions(c: MqttConnectionSettings, clientId: string): IClientOptions {
  const options: IClientOptions = {
    clientId,
    // MQTT §3.1.2.10: in whole seconds, 0 turns keep-alive off. A setting under a second is one
    // second, not 0: rounding 400 ms down would silently switch the dead-connection check off.
    keepalive: c.keepalive === 0 ? 0 : Math.max(1, Math.round(c.keepalive / 1000)),
    connectTimeout: c.connect_timeout,
    // Nothing is queued while disconnected: a value published late would be stale.
    queueQoSZero: false,
    // mqtt-packet otherwise builds, at the first write, one Buffer per 16-bit number (packet ids,
    // lengths) and keeps all 65,536 for the process's life: 6.3 MB of heap (bench/small-plant.ts
    // heap snapshot), a twentieth of a small gateway's RSS, to save a 2-byte allocation per packet.
    writeCache: false,
  };
  // mqtt.js logs every step of every packet through the `debug` package: a dozen calls per
  // message, a few percent of the CPU at high rates even when nothing is printed. They are
  // skipped unless DEBUG is set, so that DEBUG=mqttjs* still traces the client.
  if (!process.env.DEBUG) options.log = skipLog;
  if (c.username !== undefined) options.username = c.username;
  if (c.password !== undefined) options.password = c.password.reveal();
  const t = c.tls;
  if (t) {
    if (t.ca) options.ca = readFileSync(t.ca);
    if (t.cert) options.cert = readFileSync(t.cert);
    if (t.key) options.key = readFileSync(t.key);
    if (t.passphrase) (options as Record<string, unknown>).passphrase = t.passphrase.reveal();
    options.rejectUnauthorized = t.reject_unauthorized;
    if (t.servername) options.servername = t.servername;
  }
  return options;
}
