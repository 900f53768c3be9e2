import type { z } from 'zod';
import { generatorPlugin } from './generator/plugin.js';
import { modbusPlugin } from './modbus/plugin.js';
import { mqttPlugin } from './mqtt/plugin.js';
import { opcuaPlugin } from './opcua/plugin.js';
import type { SourcePlugin } from './plugin.js';

/**
 * Every source protocol, in the order their sources are built and their sections are written.
 * Everything that needs every protocol (the configuration schema, the registry, the inventory,
 * mapped variables, reloads, status, the console) loops over this list: a new protocol is its
 * folder with a plugin.ts and one line here.
 */
export const SOURCE_PLUGINS = [generatorPlugin, opcuaPlugin, modbusPlugin, mqttPlugin] as const;

type Plugins = (typeof SOURCE_PLUGINS)[number];
/** The top-level config sections that hold sources (one per protocol, named by its kind). */
export type SourceSection = Plugins['kind'];
/** The section schemas by key, as the gateway's configuration schema takes them. */
export type SourceSectionShape = { [P in Plugins as P['kind']]: P['schema'] };
/** The configuration's source sections: all a source set is built from. */
export type SourceSections = z.output<z.ZodObject<SourceSectionShape>>;

/** Each section can be rebuilt on its own at a hot reload. */
export const SOURCE_SECTIONS: readonly SourceSection[] = SOURCE_PLUGINS.map((p) => p.kind);

/** The section schemas, for the gateway's configuration schema. */
export function sourceSectionShape(): SourceSectionShape {
  return Object.fromEntries(SOURCE_PLUGINS.map((p) => [p.kind, p.schema])) as SourceSectionShape;
}

/** Just the source sections of a configuration. */
export function sourceSections(config: SourceSections): SourceSections {
  return Object.fromEntries(SOURCE_PLUGINS.map((p) => [p.kind, config[p.kind]])) as SourceSections;
}

/** A descriptor with its section's type erased, as loops over every protocol see it. */
export type AnyPlugin = SourcePlugin<string, z.ZodType>;

/**
 * Each plugin with its own section of `config`. The pairing is sound (the section is read by the
 * plugin's kind) but not expressible per element of a union, hence the one widening here.
 */
export function pluginSections(config: SourceSections): Array<[AnyPlugin, unknown]> {
  return SOURCE_PLUGINS.map((p) => [p as AnyPlugin, config[p.kind]]);
}

/** The descriptor of a kind, or undefined for a kind no plugin has (a status from another version). */
export function pluginOf(kind: string): Plugins | undefined {
  return SOURCE_PLUGINS.find((p) => p.kind === kind);
}

/** How operators read a source kind: "OPC UA". */
export function kindLabel(kind: string | undefined): string {
  return (kind !== undefined ? pluginOf(kind)?.label : undefined) ?? kind ?? 'source';
}
