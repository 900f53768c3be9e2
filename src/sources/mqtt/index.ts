import { ConfigError } from '../../core/errors.js';
import type { Source, SourceKind } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import { EmbeddedBrokerSource } from './broker-source.js';
import type { MqttSection } from './config.js';
import { EmbeddedBroker } from './embedded-broker.js';
import { EmbeddedConnectionSource } from './embedded-connection.js';
import { MqttConnectionSource } from './remote-connection.js';
import { createRemoteMqttSources } from './remote-sources.js';

export { EmbeddedBroker } from './embedded-broker.js';
export { EmbeddedBrokerSource } from './broker-source.js';
export { EmbeddedConnectionSource } from './embedded-connection.js';
export { MqttConnectionSource } from './remote-connection.js';

/**
 * Builds the MQTT sources from the validated `mqtt:` section (no I/O):
 * - the embedded broker, when enabled, as a source of kind `mqtt` named `mqtt.broker.name`;
 * - one source per connection: a remote broker client, or an in-process reader of the embedded
 *   broker for `url: embedded`.
 */
export function createMqttSources(section: MqttSection, makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  if (!section) return [];
  if (!section.broker?.enabled) return createRemoteMqttSources(section, makeContext);
  const sources: Source[] = [];
  let broker: EmbeddedBroker | null = null;
  if (section.broker?.enabled) {
    const ctx = makeContext(section.broker.name, 'mqtt');
    broker = new EmbeddedBroker(section.broker, ctx);
    sources.push(new EmbeddedBrokerSource(section.broker, broker, ctx));
  }
  for (const cfg of section.connections) {
    const ctx = makeContext(cfg.name, 'mqtt');
    if (cfg.url === 'embedded') {
      // The schema refuses url: embedded without an enabled broker.
      if (!broker) throw new ConfigError([`mqtt.connections: ${cfg.name} has url "embedded" but mqtt.broker.enabled is not true`]);
      sources.push(new EmbeddedConnectionSource(cfg, broker, ctx));
    } else {
      sources.push(new MqttConnectionSource(cfg, ctx));
    }
  }
  return sources;
}
