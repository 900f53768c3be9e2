import { z } from 'zod';
import { checkMqttConnection, mqttConnectionFields } from '../config/mqtt-connection.js';
import { durationMs } from '../config/units.js';

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
    ...mqttConnectionFields({
      url: { description: 'The plant broker every gateway of the site connects to (mqtts:// uses the system CA store unless tls.ca is set)', examples: ['mqtt://broker.plant.local:1883'] },
      clientId: { description: 'MQTT client id (default: edge-gateway-fleet-<gateway.name>); must differ between gateways', examples: ['line3-fleet'] },
      broker: 'the plant broker',
      passwordEnv: 'FLEET_MQTT_PASSWORD',
      passphraseEnv: 'FLEET_MQTT_KEY_PASSPHRASE',
      keepalive: { minMs: 1_000, defaultMs: 15_000, description: 'MQTT keep-alive (§3.1.2.10): the broker publishes the offline last-will within 1.5 times this after the gateway vanishes' },
    }),
    prefix: fleetPrefix.default('edge-gateway/fleet').meta({ description: 'Topic prefix: status goes to <prefix>/<gateway.name>/status (retained), budget announcements to <prefix>/<gateway.name>/budget', examples: ['plant-a/gateways'] }),
    interval: durationMs({ min: 1_000, max: 3_600_000 }).default(10_000).meta({ description: 'How often the status is published', examples: ['10s'] }),
  })
  .superRefine((c, ctx) => checkMqttConnection(c, ctx))
  .meta({ description: 'Connection to the plant broker for fleet status and budget sharing' });

export const fleetSchema = z
  .strictObject({
    mqtt: fleetMqttSchema.optional(),
  })
  .meta({ description: 'Many gateways, one plant: status of every gateway on the plant broker (edge-gateway fleet shows it)' });

export type FleetMqttConfig = z.output<typeof fleetMqttSchema>;
