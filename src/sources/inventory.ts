import type { SourceKind } from '../core/source.js';
import { generatorVariables } from './generator/config.js';
import { subscriptionVariables } from './mqtt/config.js';
import type { SourceSections } from './registry.js';

/**
 * The source inventory: what the configuration says each source delivers, by source name. The gap
 * watcher (runtime/gap-watch.ts) scopes gaps with it and the gap annotator (annotations/
 * gap-annotator.ts) names machine variables from it (issue 14).
 */
export interface SourceInfo {
  kind: SourceKind;
  /** Configured machine variables of the source (empty when only known as data arrives). */
  variables: string[];
  /** Modbus: device name → its variables. */
  devices: Map<string, string[]>;
  historyAuto: boolean;
}

/** What the configuration says about each source, by name. */
export function describeSources(config: SourceSections): Map<string, SourceInfo> {
  const out = new Map<string, SourceInfo>();
  config.generator.forEach((g) => {
    const vars = Array.isArray(g.variables) ? [...g.variables] : [...generatorVariables(g)];
    out.set(g.name, { kind: 'generator', variables: vars, devices: new Map(), historyAuto: false });
  });
  for (const s of config.opcua.servers) out.set(s.name, { kind: 'opcua', variables: s.nodes.map((n) => n.variable), devices: new Map(), historyAuto: s.history.backfill === 'auto' });
  if (config.modbus) {
    const devices = new Map(config.modbus.devices.map((d) => [d.name, d.registers.map((r) => r.variable)]));
    out.set(config.modbus.name, { kind: 'modbus', variables: [...devices.values()].flat(), devices, historyAuto: false });
  }
  for (const c of config.mqtt?.connections ?? []) {
    const vars = c.subscriptions.flatMap(subscriptionVariables);
    out.set(c.name, { kind: 'mqtt', variables: vars, devices: new Map(), historyAuto: false });
  }
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
