import type { GatewayConfig } from '../config/schema.js';
import { ConfigError } from '../core/errors.js';
import type { Source, SourceContext, SourceKind } from '../core/source.js';
import { createGeneratorSources } from './generator/index.js';
import { createModbusSources } from './modbus/index.js';
import { createMqttSources } from './mqtt/index.js';
import { createOpcuaSources } from './opcua/index.js';

/**
 * Builds every configured source (no I/O). Source names must be unique across protocols because
 * they label metrics and status entries.
 */
export function buildSources(config: GatewayConfig, makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  const sources = [
    ...createGeneratorSources(config.generator, makeContext),
    ...createOpcuaSources(config.opcua, makeContext),
    ...createModbusSources(config.modbus, makeContext),
    ...createMqttSources(config.mqtt, makeContext),
  ];
  const seen = new Map<string, SourceKind>();
  const problems: string[] = [];
  for (const s of sources) {
    const other = seen.get(s.name);
    if (other) problems.push(`source name "${s.name}" is used twice (${other} and ${s.kind}); names label metrics and must be unique`);
    seen.set(s.name, s.kind);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return sources;
}
