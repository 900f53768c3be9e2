import type { GatewayConfig } from '../config/schema.js';
import { ConfigError } from '../core/errors.js';
import type { Source, SourceContext, SourceKind } from '../core/source.js';
import { createGeneratorSources } from './generator/index.js';

type MakeContext = (name: string, kind: SourceKind) => SourceContext;

/**
 * Builds every configured source (no I/O). A protocol's module is loaded only when its section is
 * present, so a gateway without OPC UA does not pay for loading node-opcua at every start.
 * Source names must be unique across protocols because they label metrics and status entries.
 */
export async function buildSources(config: GatewayConfig, makeContext: MakeContext): Promise<Source[]> {
  const sources: Source[] = [...createGeneratorSources(config.generator, makeContext)];
  if (config.opcua && config.opcua.servers.length > 0) sources.push(...(await import('./opcua/index.js')).createOpcuaSources(config.opcua, makeContext));
  if (config.modbus) sources.push(...(await import('./modbus/index.js')).createModbusSources(config.modbus, makeContext));
  if (config.mqtt) sources.push(...(await import('./mqtt/index.js')).createMqttSources(config.mqtt, makeContext));
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
