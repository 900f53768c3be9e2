import type { SourceKind } from '../core/source.js';
import type { SourceFacts } from './plugin.js';
import { pluginSections, type SourceSections } from './plugins.js';

/**
 * The source inventory: what the configuration says each source delivers, by source name. The gap
 * watcher (runtime/gap-watch.ts) scopes gaps with it and the gap annotator (annotations/
 * gap-annotator.ts) names machine variables from it (issue 14).
 */
export interface SourceInfo extends SourceFacts {
  kind: SourceKind;
}

/** What the configuration says about each source, by name (every protocol's, sources/plugins.ts). */
export function describeSources(config: SourceSections): Map<string, SourceInfo> {
  const out = new Map<string, SourceInfo>();
  for (const [plugin, section] of pluginSections(config)) for (const [name, facts] of plugin.inventory(section)) out.set(name, { kind: plugin.kind, ...facts });
  return out;
}

/** Which source's configuration names a machine variable (the first one), from the inventory. */
export function variableSourceLookup(inventory: ReadonlyMap<string, SourceInfo>): (variable: string) => string | null {
  const by = new Map<string, string>();
  for (const [name, info] of inventory) for (const v of info.variables) if (!by.has(v)) by.set(v, name);
  return (variable) => by.get(variable) ?? null;
}
