import { unitMismatches, type MappedVariables } from '../sources/mapped-variables.js';
import type { CatalogVariable, OrganisationCatalog } from '../uplink/catalog.js';

/**
 * `edge-gateway check --online`: are the credentials accepted, and does every machine variable the
 * configuration maps exist in the organisation? The catalog is read by uplink/catalog.ts, then the
 * configuration's variables are compared with it: ok, missing (with the settings that use them),
 * and the organisation's variables nothing maps (unmapped).
 */

/** Exit codes of `check --online` (0 and 2 as for every command); a catalog that cannot be read exits with its CatalogCheckError's kind. */
export const CATALOG_EXIT = {
  ok: 0,
  /** The service or token endpoint could not be reached, or kept failing (5xx, 429). */
  unreachable: 1,
  /** Some mapped machine variables do not exist in the organisation. */
  missing: 3,
  /** The credentials or the organisation were refused (401, 403). */
  refused: 4,
  /** Every mapped machine variable exists, but some mappings give a unit other than the catalog's. */
  unit_mismatch: 5,
} as const;

export type CatalogRowState = 'ok' | 'missing' | 'unit_mismatch' | 'unmapped';

export interface CatalogRow {
  state: CatalogRowState;
  variable: string;
  /** Machine name (or id when the machine list does not have it); null for missing variables. */
  machine: string | null;
  /** Config settings that map the variable; empty for unmapped ones. */
  usedBy: string[];
  /** The unit the mappings give (the first; null: none), and the catalog's (null: none, or not in the catalog). */
  unit: string | null;
  catalogUnit: string | null;
  /** The mappings whose unit differs from the catalog's, by setting. */
  unitSettings: string[];
}

export interface CatalogComparison {
  /** Missing first (what needs fixing), then ok, then unmapped; config order within each. */
  rows: CatalogRow[];
  counts: { mapped: number; ok: number; missing: number; unit_mismatch: number; unmapped: number; organisation: number };
  openEnded: string[];
}

export function compareCatalog(mapped: MappedVariables, catalog: OrganisationCatalog): CatalogComparison {
  const known = new Map(catalog.variables.map((v) => [v.id, v]));
  const machineOf = (v: CatalogVariable | undefined) => (v?.machineId ? (catalog.machines.get(v.machineId) ?? v.machineId) : null);
  const mismatched = new Map<string, string[]>();
  for (const m of unitMismatches(mapped.units, (id) => known.get(id)?.unit)) mismatched.set(m.variable, [...(mismatched.get(m.variable) ?? []), m.setting]);
  const missing: CatalogRow[] = [];
  const wrongUnit: CatalogRow[] = [];
  const ok: CatalogRow[] = [];
  for (const [id, usedBy] of mapped.variables) {
    const v = known.get(id);
    const unitSettings = mismatched.get(id) ?? [];
    const state: CatalogRowState = !v ? 'missing' : unitSettings.length > 0 ? 'unit_mismatch' : 'ok';
    const row: CatalogRow = { state, variable: id, machine: machineOf(v), usedBy, unit: mapped.units.get(id)?.[0]?.unit ?? null, catalogUnit: v?.unit ?? null, unitSettings };
    (state === 'missing' ? missing : state === 'unit_mismatch' ? wrongUnit : ok).push(row);
  }
  const unmapped: CatalogRow[] = catalog.variables.filter((v) => !mapped.variables.has(v.id)).map((v) => ({ state: 'unmapped', variable: v.id, machine: machineOf(v), usedBy: [], unit: null, catalogUnit: v.unit, unitSettings: [] }));
  return {
    rows: [...missing, ...wrongUnit, ...ok, ...unmapped],
    counts: { mapped: mapped.variables.size, ok: ok.length, missing: missing.length, unit_mismatch: wrongUnit.length, unmapped: unmapped.length, organisation: catalog.variables.length },
    openEnded: mapped.openEnded,
  };
}

/** The exit code of a comparison: missing variables first, then units that differ. */
export function catalogExit(cmp: CatalogComparison): number {
  return cmp.counts.missing > 0 ? CATALOG_EXIT.missing : cmp.counts.unit_mismatch > 0 ? CATALOG_EXIT.unit_mismatch : CATALOG_EXIT.ok;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/** The table and summary `check --online` prints. */
export function renderCatalogReport(cmp: CatalogComparison): string {
  // The UNIT column only when a mapping gives a unit: the mapping's, and the catalog's where they differ.
  const units = cmp.rows.some((r) => r.unit !== null);
  const header = { state: 'STATE', variable: 'MACHINE VARIABLE', machine: 'MACHINE', unit: units ? 'UNIT' : '', usedBy: 'USED BY' };
  const unitCell = (r: CatalogRow) => (!units ? '' : r.state === 'unit_mismatch' ? `${r.unit} (catalog: ${r.catalogUnit})` : (r.unit ?? '-'));
  const cells = cmp.rows.map((r) => ({ state: r.state, variable: r.variable, machine: r.machine ?? '-', unit: unitCell(r), usedBy: r.usedBy.length > 0 ? r.usedBy.join(', ') : '-' }));
  const width = (k: 'state' | 'variable' | 'machine' | 'unit') => Math.max(header[k].length, ...cells.map((c) => c[k].length));
  const w = { state: width('state'), variable: width('variable'), machine: width('machine'), unit: width('unit') };
  const line = (c: typeof header) => `${c.state.padEnd(w.state)}  ${c.variable.padEnd(w.variable)}  ${c.machine.padEnd(w.machine)}  ${units ? `${c.unit.padEnd(w.unit)}  ` : ''}${c.usedBy}`.trimEnd();
  const out = [line(header), ...cells.map(line), ''];
  const { mapped, ok, missing, unit_mismatch, unmapped, organisation } = cmp.counts;
  out.push(
    `mapped ${plural(mapped, 'machine variable')}: ${(ok + unit_mismatch).toLocaleString('en-US')} found, ${missing === 0 ? 'none missing' : `${missing.toLocaleString('en-US')} MISSING in the organisation`}` +
      `${unit_mismatch > 0 ? `, ${unit_mismatch.toLocaleString('en-US')} with a UNIT other than the catalog's` : ''}; ` +
      `${unmapped.toLocaleString('en-US')} of the organisation's ${plural(organisation, 'machine variable')} not mapped`,
  );
  for (const at of cmp.openEnded) {
    out.push(`note: ${at} also stores metrics named like a machine variable id (mvr_...) without a mapping entry; those can only be checked when data arrives`);
  }
  if (missing > 0) {
    out.push('Samples of a missing machine variable are refused by the service and set aside (edge-gateway set-aside list).');
    out.push('Fix the id in the setting named under USED BY, or create the variable in the tracking service.');
  }
  for (const r of cmp.rows) {
    if (r.state !== 'unit_mismatch') continue;
    out.push(`${r.unitSettings.join(', ')}: "${r.unit}", but the organisation's catalog gives ${r.variable} the unit "${r.catalogUnit}": check the mapping's scale and offset, then its unit (or the catalog)`);
  }
  return `${out.join('\n')}\n`;
}
