import type { GatewayConfig } from '../config/schema.js';
import { ConfigError } from '../core/errors.js';
import type { Source, SourceKind } from '../core/source.js';
import type { MakeContext } from './context.js';
import { createGeneratorSources } from './generator/index.js';

/** The top-level config sections that hold sources; each can be rebuilt on its own at a hot reload. */
export const SOURCE_SECTIONS = ['generator', 'opcua', 'modbus', 'mqtt'] as const;
export type SourceSection = (typeof SOURCE_SECTIONS)[number];
/** The configuration's source sections: all a source set is built from. */
export type SourceSections = Pick<GatewayConfig, SourceSection>;

export function sourceSections(config: SourceSections): SourceSections {
  return { generator: config.generator, opcua: config.opcua, modbus: config.modbus, mqtt: config.mqtt };
}

/**
 * Builds the sources of one config section (no I/O). A protocol's module is loaded only when its
 * section is present, so a gateway without OPC UA does not pay for loading node-opcua at every start.
 */
export async function buildSourceSection(section: SourceSection, config: SourceSections, makeContext: MakeContext): Promise<Source[]> {
  switch (section) {
    case 'generator':
      return createGeneratorSources(config.generator, makeContext);
    case 'opcua':
      return config.opcua && config.opcua.servers.length > 0 ? (await import('./opcua/index.js')).createOpcuaSources(config.opcua, makeContext) : [];
    case 'modbus':
      return config.modbus ? (await import('./modbus/index.js')).createModbusSources(config.modbus, makeContext) : [];
    case 'mqtt':
      if (!config.mqtt) return [];
      // Without the embedded broker, its modules (aedes, ws) are not loaded at all.
      return config.mqtt.broker?.enabled ? (await import('./mqtt/index.js')).createMqttSources(config.mqtt, makeContext) : (await import('./mqtt/remote-sources.js')).createRemoteMqttSources(config.mqtt, makeContext);
  }
}

/** Builds every configured source (no I/O). */
export async function buildSources(config: SourceSections, makeContext: MakeContext): Promise<Source[]> {
  const sources: Source[] = [];
  for (const section of SOURCE_SECTIONS) sources.push(...(await buildSourceSection(section, config, makeContext)));
  assertUniqueNames(sources);
  return sources;
}

/** Source names must be unique across protocols because they label metrics and status entries. */
export function assertUniqueNames(sources: ReadonlyArray<Pick<Source, 'name' | 'kind'>>): void {
  const seen = new Map<string, SourceKind>();
  const problems: string[] = [];
  for (const s of sources) {
    const other = seen.get(s.name);
    if (other) problems.push(`source name "${s.name}" is used twice (${other} and ${s.kind}); names label metrics and must be unique`);
    seen.set(s.name, s.kind);
  }
  if (problems.length > 0) throw new ConfigError(problems);
}
