import type { GatewayConfig } from '../config/schema.js';
import { generatorVariables } from './generator/config.js';

/**
 * Every machine variable a configuration refers to, with the setting(s) that name it, so that
 * `edge-gateway check --online` can say "mvr_x is missing, used by opcua.servers[0].nodes[3].variable".
 *
 * Walks every section that maps data or annotations onto machine variables: generator, opcua,
 * modbus, mqtt (every subscription form) and annotations (machines and detectors). A new source
 * kind that maps variables must be added here, or its variables go unchecked.
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

/** A record key as a path segment: `.name` when it is a plain word, else `["Packer1.Rate"]`. */
function keySegment(key: string): string {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
}

/**
 * Where a variable is named: the config section and the index of its entry there (a generator, an
 * OPC UA server, a Modbus device, an MQTT connection; for annotations the machine or detector), and
 * the setting's path, built only when asked for (at 100,000 mapped variables the paths are ~10 MB
 * of strings that a caller wanting one variable's, or none, does not need).
 */
export interface MappingSite {
  section: 'generator' | 'opcua' | 'modbus' | 'mqtt' | 'annotations';
  index: number;
  path(): string;
  /** The mapping's `unit`, when it gives one. */
  unit?: string;
}

/**
 * Calls `visit` for every use of a machine variable in `config`, in config order (the order of
 * mappedVariables). Returns the open-ended settings (see MappedVariables.openEnded).
 */
export function forEachMappedVariable(config: GatewayConfig, visit: (id: string, site: MappingSite) => void): string[] {
  const openEnded: string[] = [];
  const use = (id: string, section: MappingSite['section'], index: number, path: () => string, unit?: string) => visit(id, unit === undefined ? { section, index, path } : { section, index, path, unit });

  config.generator.forEach((g, i) => {
    if (Array.isArray(g.variables)) g.variables.forEach((id, j) => use(id, 'generator', i, () => `generator[${i}].variables[${j}]`));
    // A {prefix, count} range is one setting; every id of it points back to that setting.
    else for (const id of generatorVariables(g)) use(id, 'generator', i, () => `generator[${i}].variables`);
  });

  config.opcua.servers.forEach((s, i) => s.nodes.forEach((n, j) => use(n.variable, 'opcua', i, () => `opcua.servers[${i}].nodes[${j}].variable`, n.unit)));

  config.modbus?.devices.forEach((d, i) => d.registers.forEach((r, j) => use(r.variable, 'modbus', i, () => `modbus.devices[${i}].registers[${j}].variable`, r.unit)));

  config.mqtt?.connections.forEach((c, i) =>
    c.subscriptions.forEach((s, j) => {
      const at = `mqtt.connections[${i}].subscriptions[${j}]`;
      switch (s.format) {
        case 'number':
          if (s.variable) use(s.variable, 'mqtt', i, () => `${at}.variable`, s.unit);
          for (const [key, id] of Object.entries(s.variable_from_topic?.variables ?? {})) use(id, 'mqtt', i, () => `${at}.variable_from_topic.variables${keySegment(key)}`, s.unit);
          break;
        case 'json':
          s.values.forEach((v, k) => use(v.variable, 'mqtt', i, () => `${at}.values[${k}].variable`, v.unit));
          break;
        case 'metrics':
          for (const [name, id] of Object.entries(s.names)) use(id, 'mqtt', i, () => `${at}.names${keySegment(name)}`);
          openEnded.push(at);
          break;
        case 'sparkplug':
          s.metrics.forEach((m, k) => use(m.variable, 'mqtt', i, () => `${at}.metrics[${k}].variable`, m.unit));
          openEnded.push(at);
          break;
      }
    }),
  );

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

export function mappedVariables(config: GatewayConfig): MappedVariables {
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
