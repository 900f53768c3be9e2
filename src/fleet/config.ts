import { z } from 'zod';
import { secretSchema } from '../config/secrets.js';
import { durationMs } from '../config/units.js';

const brokerUrl = z
  .string()
  .superRefine((s, ctx) => {
    let u: URL;
    try {
      u = new URL(s);
    } catch {
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)} is not a URL (mqtt://host:1883, mqtts://host:8883, ws://, wss://)`, input: s });
      return;
    }
    if (!['mqtt:', 'mqtts:', 'ws:', 'wss:'].includes(u.protocol)) {
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(s)}: scheme "${u.protocol.replace(':', '')}" is not one of mqtt, mqtts, ws, wss`, input: s });
    }
    // Credentials in a URL end up in logs and status output; they have their own settings.
    if (u.username || u.password) ctx.addIssue({ code: 'custom', message: 'must not contain a user name or password; use username: and password: instead', input: '[url with credentials]' });
  })
  .meta({ description: 'The plant broker every gateway of the site connects to (mqtts:// uses the system CA store)', examples: ['mqtt://broker.plant.local:1883'] });

/** A topic prefix: plain levels, no wildcards (MQTT §4.7.1), no empty level at either end. */
export const fleetPrefix = z
  .string()
  .min(1)
  .max(200)
  .refine((p) => !/[+#\u0000]/.test(p) && !p.startsWith('/') && !p.endsWith('/') && !p.includes('//'), {
    error: 'must be topic levels without wildcards (+, #) and without a leading, trailing or doubled "/"',
  });

export const fleetMqttSchema = z
  .strictObject({
    url: brokerUrl,
    username: z.string().min(1).optional().meta({ description: 'User name for the plant broker', examples: ['edge-gateway'] }),
    password: secretSchema().optional().meta({ description: 'Password for the plant broker: {env: NAME}, {file: PATH} or a literal', examples: [{ env: 'FLEET_MQTT_PASSWORD' }] }),
    client_id: z.string().min(1).max(65_535).optional().meta({ description: 'MQTT client id (default: edge-gateway-fleet-<gateway.name>); must differ between gateways', examples: ['line3-fleet'] }),
    prefix: fleetPrefix.default('edge-gateway/fleet').meta({ description: 'Topic prefix: status goes to <prefix>/<gateway.name>/status (retained), budget announcements to <prefix>/<gateway.name>/budget', examples: ['plant-a/gateways'] }),
    interval: durationMs({ min: 1_000, max: 3_600_000 }).default(10_000).meta({ description: 'How often the status is published', examples: ['10s'] }),
    keepalive: durationMs({ min: 1_000, max: 65_535_000 }).default(15_000).meta({ description: 'MQTT keep-alive (§3.1.2.10): the broker publishes the offline last-will within 1.5 times this after the gateway vanishes', examples: ['15s'] }),
  })
  .meta({ description: 'Connection to the plant broker for fleet status and budget sharing' });

export const fleetSchema = z
  .strictObject({
    mqtt: fleetMqttSchema.optional(),
  })
  .meta({ description: 'Many gateways, one plant: status of every gateway on the plant broker (edge-gateway fleet shows it)' });

export type FleetMqttConfig = z.output<typeof fleetMqttSchema>;
