import type { GatewayConfig } from '../config/schema.js';
import { mappedVariables, unitMismatches } from '../sources/mapped-variables.js';
import type { Catalog } from './api/build.js';

/** Flags listed at most; the rest are counted. */
const MAX_FLAGS = 20;

/**
 * What Apply's preview says about a configuration against the organisation's catalog (the
 * console's copy, console/catalog.ts): machine variables the catalog does not have (the service
 * refuses their samples; they are set aside) and mapping units other than the catalog's. Nothing
 * when there is no copy yet: the preview never waits for the service.
 */
export function catalogFlags(config: GatewayConfig, catalog: Catalog | null): string[] {
  if (!catalog) return [];
  const known = new Map(catalog.variables.map((v) => [v.id, v]));
  const mapped = mappedVariables(config);
  const out: string[] = [];
  for (const [id, settings] of mapped.variables) {
    if (known.has(id)) continue;
    out.push(`${settings[0]}: ${id} is not in the organisation's catalog: the service will refuse its samples (they are set aside)`);
  }
  for (const m of unitMismatches(mapped.units, (id) => known.get(id)?.unit)) {
    out.push(`${m.setting}: "${m.unit}", but the organisation's catalog gives ${m.variable} the unit "${m.catalog}": check the mapping's scale and offset, then its unit`);
  }
  return out.length > MAX_FLAGS ? [...out.slice(0, MAX_FLAGS), `… and ${out.length - MAX_FLAGS} more`] : out;
}
