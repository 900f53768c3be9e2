import type { Source, SourceKind } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import type { MqttSection } from './config.js';
import { MqttConnectionSource } from './remote-connection.js';

/**
 * The MQTT sources of a section whose embedded broker is off: one client per connection, each to
 * a remote broker (a connection to `embedded` needs the broker, the schema says so). The registry
 * loads this instead of index.ts then, so aedes and ws (the broker and its websocket listener,
 * ~2 MB of heap) stay unloaded in a gateway that only subscribes (bench/small-plant.ts).
 */
export function createRemoteMqttSources(section: NonNullable<MqttSection>, makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  return section.connections.map((cfg) => new MqttConnectionSource(cfg, makeContext(cfg.name, 'mqtt')));
}
