import { pluginSections, type SourceSection, type SourceSections } from './plugins.js';

/**
 * Every machine variable a configuration refers to, with the setting(s) that name it, so that
 * `edge-gateway check --online` can say "mvr_x is missing, used by opcua.servers[0].nodes[3].variable".
 *
 * Walks every section that maps data or annotations onto machine variables: every source
 * protocol's (sources/plugins.ts) and annotations (machines and detectors).
 */
export interface MappedVariables {
  /** Variable id → config paths that use it, in config order. Map order is first use. */
  variables: Map<string, string[]>;
  /**
   * Settings that accept variables not written in the config (a metrics or Sparkplug subscription
   * stores a metric named `mvr_...` under that id without a mapping entry). Those ids are only
   * known when data arrives, so the catalog check can only mention them.
   */
  openEnded: string[];
  /** Variable id → the units its mappings give, with the setting of each (only variables with a unit). */
  units: Map<string, MappedUnit[]>;
}

/** A mapping's `unit` and where it is written (`opcua.servers[0].nodes[3].unit`). */
export interface MappedUnit {
  unit: string;
  setting: string;
}

/**
 * What this walk reads of the annotations section (annotations/config.ts): the machines and
 * detectors that name machine variables. Written here as a shape so the sources need not know the
 * annotations room above them.
 */
export interface AnnotationMappings {
  machines: ReadonlyArray<{ machine_variables: readonly string[] }>;
  detectors: ReadonlyArray<{ variable: string; machine_variables?: readonly string[] }>;
}

/** A configuration as this walk reads it: the source sections and the annotations. */
export type MappingConfig = SourceSections & { annotations?: AnnotationMappings };

/**
 * Where a variable is named: the config section and the index of its entry there (a generator, an
 * OPC UA server, a Modbus device, an MQTT connection; for annotations the machine or detector), and
 * the setting's path, built only when asked for (at 100,000 mapped variables the paths are ~10 MB
 * of strings that a caller wanting one variable's, or none, does not need).
 */
export interface MappingSite {
  section: SourceSection | 'annotations';
  index: number;
  path(): string;
  /** The mapping's `unit`, when it gives one. */
  unit?: string;
}

/**
 * Calls `visit` for every use of a machine variable in `config`, in config order (the order of
 * mappedVariables). Returns the open-ended settings (see MappedVariables.openEnded).
 */
export function forEachMappedVariable(config: MappingConfig, visit: (id: string, site: MappingSite) => void): string[] {
  const openEnded: string[] = [];
  const use = (id: string, section: MappingSite['section'], index: number, path: () => string, unit?: string) => visit(id, unit === undefined ? { section, index, path } : { section, index, path, unit });

  for (const [plugin, section] of pluginSections(config)) {
    const kind = plugin.kind as SourceSection;
    openEnded.push(...plugin.mappedVariables(section, (id, index, path, unit) => use(id, kind, index, path, unit)));
  }

  const a = config.annotations;
  if (a) {
    a.machines.forEach((m, i) => m.machine_variables.forEach((id, j) => use(id, 'annotations', i, () => `annotations.machines[${i}].machine_variables[${j}]`)));
    a.detectors.forEach((d, i) => {
      use(d.variable, 'annotations', i, () => `annotations.detectors[${i}].variable`);
      d.machine_variables?.forEach((id, j) => use(id, 'annotations', i, () => `annotations.detectors[${i}].machine_variables[${j}]`));
    });
  }

  return openEnded;
}

export function mappedVariables(config: MappingConfig): MappedVariables {
  const variables = new Map<string, string[]>();
  const units = new Map<string, MappedUnit[]>();
  const openEnded = forEachMappedVariable(config, (id, site) => {
    const paths = variables.get(id);
    if (paths) paths.push(site.path());
    else variables.set(id, [site.path()]);
    if (site.unit !== undefined) {
      const list = units.get(id) ?? [];
      list.push({ unit: site.unit, setting: site.path().replace(/\.variable$/, '.unit') });
      units.set(id, list);
    }
  });
  return { variables, openEnded, units };
}

/** A mapping whose `unit` is not the unit the organisation's catalog gives its machine variable. */
export interface UnitMismatch {
  variable: string;
  /** The unit the mapping gives, and where (`opcua.servers[0].nodes[3].unit`). */
  unit: string;
  setting: string;
  /** The catalog's unit. */
  catalog: string;
}

/**
 * Mappings whose `unit` differs from the catalog's unit of the variable (`catalogUnit`: the unit,
 * null or empty when the catalog gives none, undefined when it does not know the variable; only a
 * unit on both sides is compared). Units are compared as written (°C is not degC, mA is not MA).
 */
export function unitMismatches(units: ReadonlyMap<string, readonly MappedUnit[]>, catalogUnit: (variable: string) => string | null | undefined): UnitMismatch[] {
  const out: UnitMismatch[] = [];
  for (const [variable, list] of units) {
    const catalog = catalogUnit(variable)?.trim();
    if (!catalog) continue;
    for (const u of list) if (u.unit !== catalog) out.push({ variable, unit: u.unit, setting: u.setting, catalog });
  }
  return out;
}
