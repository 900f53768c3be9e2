import type { GatewayConfig } from '../config/schema.js';
import { mappedVariables } from '../sources/mapped-variables.js';

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

/** Source of a setting path: the config entry two levels down (`opcua.servers[0]`) names it. */
function sourceOf(config: GatewayConfig, setting: string): { source: string | null; kind: string | null } {
  const m = /^(opcua\.servers|modbus\.devices|mqtt\.connections|generator)\[(\d+)\]/.exec(setting);
  if (!m) return { source: null, kind: null };
  const entry = at(config, `${m[1]}[${m[2]}]`) as { name?: string } | undefined;
  return { source: entry?.name ?? null, kind: m[1].split('.')[0] };
}

export function variableIndex(config: GatewayConfig): Map<string, VariableInfo> {
  const machines = new Map<string, string>();
  for (const m of config.annotations?.machines ?? []) for (const v of m.machine_variables ?? []) if (!machines.has(v)) machines.set(v, m.name ?? m.key);
  const out = new Map<string, VariableInfo>();
  for (const [id, settings] of mappedVariables(config).variables) {
    const sourceSetting = settings.find((s) => !s.startsWith('annotations')) ?? settings[0];
    const { source, kind } = sourceOf(config, sourceSetting);
    // The mapping entry is the object holding the `variable` setting.
    const entryPath = sourceSetting.replace(/\.variable$/, '');
    const entry = at(config, entryPath);
    const onChange = kind === 'mqtt' || (kind === 'opcua' && (at(config, /^opcua\.servers\[\d+\]/.exec(sourceSetting)![0]) as { mode?: string } | undefined)?.mode !== 'polling');
    out.set(id, { id, source, kind, onChange, machine: machines.get(id) ?? null, settings, config: entry !== undefined && typeof entry === 'object' ? entry : null });
  }
  return out;
}
