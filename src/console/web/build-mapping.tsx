import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import type { Catalog, MappingsResponse } from '../api/build.js';
import { api, messageOf } from './lib.js';

/**
 * What the Build page's mapping lines share ("flag a machine-variable id that is not
 * in the catalog, and one mapped twice, inline"): the organisation's catalog, the variables the
 * editor's text already feeds, and the flags of one typed id.
 */

export type CatalogVariable = Catalog['variables'][number];

/** The catalog as a tab holds it: read, or why it could not be read. */
export type CatalogState = Catalog | { error: string; variables: CatalogVariable[] };

/** GET /console/api/catalog once, when the tab mounts. */
export function useCatalog(): CatalogState | null {
  const [catalog, setCatalog] = useState<CatalogState | null>(null);
  useEffect(() => {
    api<Catalog>('/console/api/catalog').then(setCatalog, (e: unknown) => setCatalog({ error: messageOf(e), variables: [] }));
  }, []);
  return catalog;
}

/**
 * The variables the editor's text feeds, with the setting that feeds each
 * (POST /console/api/config/mappings), read again a moment after the text changes.
 */
export function useMapped(text: string): Record<string, string> {
  const [mapped, setMapped] = useState<Record<string, string>>({});
  useEffect(() => {
    if (!text.trim()) {
      setMapped({});
      return;
    }
    const t = setTimeout(() => api<MappingsResponse>('/console/api/config/mappings', { method: 'POST', body: { yaml: text } }).then((r) => setMapped(r.mapped), () => undefined), 500);
    return () => clearTimeout(t);
  }, [text]);
  return mapped;
}

const MVR = /^mvr_[A-Za-z0-9_]+$/;

export interface VariableFlag {
  /** bad: the line cannot be added as it is; warn: it can, but look again. */
  level: 'bad' | 'warn';
  text: string;
}

/** What is wrong with a typed machine-variable id: empty, not an id, not in the catalog, already fed, chosen twice. */
export function variableFlags(id: string, o: { catalog: CatalogState | null; mapped: Record<string, string>; chosenTwice: boolean }): VariableFlag[] {
  const v = id.trim();
  if (!v) return [{ level: 'bad', text: 'type the machine variable (mvr_…)' }];
  if (!MVR.test(v)) return [{ level: 'bad', text: 'not a machine variable id (mvr_ followed by letters, digits, _)' }];
  const flags: VariableFlag[] = [];
  if (o.catalog && !('error' in o.catalog) && !o.catalog.variables.some((c) => c.id === v)) flags.push({ level: 'warn', text: "not in the organisation's catalog: the service will refuse its samples" });
  if (o.mapped[v]) flags.push({ level: 'warn', text: `already mapped (${o.mapped[v]}): it would be left out` });
  if (o.chosenTwice) flags.push({ level: 'warn', text: 'chosen for another line here too' });
  return flags;
}

/** The catalog as a datalist for the id inputs (`list={id}`). */
export function CatalogList({ id, catalog }: { id: string; catalog: CatalogState | null }) {
  return (
    <datalist id={id}>
      {(catalog?.variables ?? []).map((v) => (
        <option value={v.id}>
          {v.name}
          {v.unit ? ` (${v.unit})` : ''}
          {v.machine ? ` · ${v.machine}` : ''}
        </option>
      ))}
    </datalist>
  );
}

/** The flags of one line, under its input. */
export function Flags({ flags, testid }: { flags: VariableFlag[]; testid: string }) {
  if (!flags.length) return null;
  return (
    <span class="flags" data-testid={testid}>
      {flags.map((f) => (
        <span class={`flag ${f.level}`}>{f.text}</span>
      ))}
    </span>
  );
}
