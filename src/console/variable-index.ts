import type { GatewayConfig } from '../config/schema.js';
import { forEachMappedVariable, type MappingSite } from '../sources/mapped-variables.js';
import { pluginSections } from '../sources/plugins.js';

/** What the console knows about a mapped variable from the configuration alone. */
export interface VariableInfo {
  id: string;
  /** Source name (server, device or connection), or null when the setting is not a source. */
  source: string | null;
  kind: string | null;
  /**
   * True when the source reports this variable only when it changes (MQTT; an OPC UA subscription,
   * with or without a deadband): a value hours old is then current, not stale (issue 24 §1).
   * Polled sources (Modbus, OPC UA polling) and generators report on a period.
   */
  onChange: boolean;
  /** Machine name from annotations.machines, when a machine lists the variable. */
  machine: string | null;
  /** Settings that name the variable (`opcua.servers[0].nodes[3].variable`). */
  settings: string[];
  /** The mapping entry itself (node, register, value ...), for the variable's page. */
  config: unknown;
}

/** A setting path as keys: `opcua.servers[0].nodes[3]` → ['opcua', 'servers', 0, 'nodes', 3]. */
export function settingKeys(path: string): Array<string | number> {
  return [...path.matchAll(/\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g)].map((m) => m[1] ?? (m[2] !== undefined ? Number(m[2]) : (JSON.parse(m[3]) as string)));
}

function at(root: unknown, path: string): unknown {
  let cur: unknown = root;
  for (const key of settingKeys(path)) {
    if (cur === null || typeof cur !== 'object') return undefined;
    cur = (cur as Record<string | number, unknown>)[key];
  }
  return cur;
}

/** What the Variables list shows of a mapped variable's source; one object per source, shared by its variables. */
export interface VariableSource {
  source: string | null;
  kind: string | null;
  /** VariableInfo.onChange. */
  onChange: boolean;
}

const NO_SOURCE: VariableSource = { source: null, kind: null, onChange: false };

/**
 * The mapped variables of one configuration, for the console's Variables page. Per variable it
 * holds only a reference to its source's shared VariableSource (the list needs no more); a
 * variable's settings and mapping entry (its detail page) are found again when asked for. Holding a
 * VariableInfo with its setting paths for every variable cost ~285 bytes each: 28.5 MB at 100,000
 * mapped variables, for the life of the process after the first list (issue 25).
 */
export class VariableIndex {
  private readonly sources = new Map<string, VariableSource>();
  private readonly machines = new Map<string, string>();
  /** The mapping's `unit` of the variables that have one (the first mapping's). */
  private readonly units = new Map<string, string>();

  constructor(private readonly config: GatewayConfig) {
    for (const m of config.annotations?.machines ?? []) for (const v of m.machine_variables ?? []) if (!this.machines.has(v)) this.machines.set(v, m.name ?? m.key);
    const perEntry = new Map<string, VariableSource>();
    const annotationOnly = new Set<string>();
    forEachMappedVariable(config, (id, site) => {
      if (site.unit !== undefined && !this.units.has(id)) this.units.set(id, site.unit);
      const known = this.sources.get(id);
      // The first setting that is not an annotation decides; a variable named only by annotations has no source.
      if (site.section === 'annotations') {
        if (!known) {
          this.sources.set(id, NO_SOURCE);
          annotationOnly.add(id);
        }
        return;
      }
      if (known && !annotationOnly.has(id)) return;
      annotationOnly.delete(id);
      const key = `${site.section}:${site.index}`;
      let src = perEntry.get(key);
      if (!src) perEntry.set(key, (src = sourceOf(config, site.section, site.index)));
      this.sources.set(id, src);
    });
  }

  get size(): number {
    return this.sources.size;
  }

  has(id: string): boolean {
    return this.sources.has(id);
  }

  /** Mapped variable ids in order of first use in the configuration. */
  keys(): IterableIterator<string> {
    return this.sources.keys();
  }

  /** The source of a mapped variable (undefined when not mapped). */
  source(id: string): VariableSource | undefined {
    return this.sources.get(id);
  }

  /** The unit its mapping gives (`unit`), or null. */
  unitOf(id: string): string | null {
    return this.units.get(id) ?? null;
  }

  /** Machine name from annotations.machines, when a machine lists the variable. */
  machineOf(id: string): string | null {
    return this.machines.get(id) ?? null;
  }

  /** Everything about one mapped variable, its settings and mapping entry included (one walk of the configuration). */
  info(id: string): VariableInfo | undefined {
    const src = this.sources.get(id);
    if (!src) return undefined;
    const settings: string[] = [];
    forEachMappedVariable(this.config, (v, site) => {
      if (v === id) settings.push(site.path());
    });
    const sourceSetting = settings.find((s) => !s.startsWith('annotations')) ?? settings[0];
    // The mapping entry is the object holding the `variable` setting.
    const entry = sourceSetting === undefined ? undefined : at(this.config, sourceSetting.replace(/\.variable$/, ''));
    return { id, ...src, machine: this.machines.get(id) ?? null, settings, config: entry !== undefined && typeof entry === 'object' ? entry : null };
  }
}

/** The source a mapping section's entry stands for (`opcua.servers[0]` names it). */
function sourceOf(config: GatewayConfig, section: MappingSite['section'], index: number): VariableSource {
  const [plugin, own] = pluginSections(config).find(([p]) => p.kind === section) ?? [];
  const entry = plugin?.mappingSource(own, index);
  return entry ? { source: entry.name, kind: section, onChange: entry.onChange } : NO_SOURCE;
}
