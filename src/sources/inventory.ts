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

/** A count is read again at most this often (a reload changes the sources; the status is read every second). */
const MAPPED_COUNT_MS = 10_000;

/**
 * The number of distinct machine variables the sources map, for the uplink's "delivering N of M
 * variables"; null when a source learns its variables only as data arrives (the count would be short).
 */
export function mappedCount(inventory: () => ReadonlyMap<string, SourceInfo>, clock: { monotonic(): number }): () => number | null {
  let cached: { at: number; n: number | null } | null = null;
  return () => {
    const now = clock.monotonic();
    if (cached && now - cached.at < MAPPED_COUNT_MS) return cached.n;
    const all = new Set<string>();
    let complete = true;
    for (const info of inventory().values()) {
      if (info.variables.length === 0) complete = false;
      for (const v of info.variables) all.add(v);
    }
    cached = { at: now, n: complete ? all.size : null };
    return cached.n;
  };
}
