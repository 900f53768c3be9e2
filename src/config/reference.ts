import type { z } from 'zod';

/**
 * Renders the configuration reference from the schema itself, so the documentation cannot drift
 * from what the gateway accepts (scripts/gen-docs.ts writes docs/configuration.md; a test fails
 * when the file is stale).
 */
export interface SettingDoc {
  path: string;
  type: string;
  default?: string;
  required: boolean;
  description: string;
  example?: string;
  /** Set for settings inside one variant of a discriminated union: `mode: api_key`. */
  when?: string;
}

type Def = {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  out?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  discriminator?: string;
  defaultValue?: unknown;
  values?: unknown[];
  entries?: Record<string, unknown>;
  valueType?: z.ZodType;
  getter?: () => z.ZodType;
};

function defOf(s: z.ZodType): Def {
  return (s as unknown as { _zod: { def: Def } })._zod.def;
}

function metaOf(s: z.ZodType): { description?: string; examples?: unknown[]; 'x-kind'?: string } {
  const m = (s as unknown as { meta?: () => unknown }).meta?.();
  return (m && typeof m === 'object' ? m : {}) as { description?: string; examples?: unknown[] };
}

interface Unwrapped {
  core: z.ZodType;
  optional: boolean;
  default?: unknown;
  description?: string;
  examples?: unknown[];
  kind?: string;
}

/** Peels optional/default/pipe wrappers, keeping the first description, example and default found. */
function unwrap(schema: z.ZodType): Unwrapped {
  let s = schema;
  const u: Unwrapped = { core: s, optional: false };
  for (let i = 0; i < 32; i++) {
    const meta = metaOf(s);
    u.description ??= meta.description;
    u.examples ??= meta.examples;
    u.kind ??= meta['x-kind'];
    const d = defOf(s);
    if (d.type === 'optional' || d.type === 'nullable') {
      u.optional = true;
      s = d.innerType!;
    } else if (d.type === 'default' || d.type === 'prefault') {
      if (u.default === undefined) u.default = typeof d.defaultValue === 'function' ? (d.defaultValue as () => unknown)() : d.defaultValue;
      u.optional = true;
      s = d.innerType!;
    } else if (d.type === 'pipe') {
      s = defOf(d.in!).type === 'transform' ? d.out! : d.in!;
      if (defOf(s).type === 'transform') s = d.in!;
    } else if (d.type === 'readonly' || d.type === 'catch' || d.type === 'nonoptional') {
      s = d.innerType!;
    } else if (d.type === 'lazy') {
      s = d.getter!();
    } else break;
  }
  u.core = s;
  return u;
}

function isSecret(s: z.ZodType): boolean {
  const d = defOf(s);
  if (d.type !== 'union') return false;
  return (d.options ?? []).some((o) => {
    const od = defOf(o);
    return od.type === 'object' && Object.keys(od.shape ?? {}).join() === 'env';
  });
}

function typeName(s: z.ZodType, kind?: string): string {
  if (kind) return kind;
  const d = defOf(s);
  switch (d.type) {
    case 'string':
      return 'string';
    case 'number':
      return 'number';
    case 'int':
      return 'integer';
    case 'boolean':
      return 'boolean';
    case 'enum':
      return Object.values(d.entries ?? {}).map((v) => JSON.stringify(v)).join(' | ');
    case 'literal':
      return (d.values ?? []).map((v) => JSON.stringify(v)).join(' | ');
    case 'array': {
      const el = unwrap(d.element!);
      return defOf(el.core).type === 'object' ? 'list of mappings' : `list of ${typeName(el.core, el.kind)}`;
    }
    case 'object':
      return 'mapping';
    case 'record':
      return 'mapping';
    case 'union':
      if (isSecret(s)) return 'secret';
      if (d.discriminator) return `one of ${(d.options ?? []).length} variants, by \`${d.discriminator}\``;
      return (d.options ?? []).map((o) => typeName(unwrap(o).core, unwrap(o).kind)).join(' or ');
    default:
      return d.type;
  }
}

function show(v: unknown, kind?: string): string {
  if (v === undefined) return '';
  if (kind === 'duration' && typeof v === 'number') return `\`${v}\` ms`;
  if (kind === 'size' && typeof v === 'number') return `\`${v.toLocaleString('en-US')}\` bytes`;
  if (typeof v === 'string') return `\`${v}\``;
  return `\`${JSON.stringify(v)}\``;
}

/** Every setting of `schema`, depth first, with paths like `modbus.devices[].registers[].type`. */
export function settingsOf(schema: z.ZodType, prefix = '', when?: string): SettingDoc[] {
  const out: SettingDoc[] = [];
  const u = unwrap(schema);
  const d = defOf(u.core);
  if (d.type === 'object') {
    for (const [key, child] of Object.entries(d.shape ?? {})) {
      const path = prefix ? `${prefix}.${key}` : key;
      const cu = unwrap(child);
      const cd = defOf(cu.core);
      const doc: SettingDoc = {
        path,
        type: typeName(cu.core, cu.kind),
        required: !cu.optional,
        description: cu.description ?? '',
        ...(cu.default !== undefined && !(typeof cu.default === 'object' && cu.default !== null && Object.keys(cu.default).length === 0 && !('env' in (cu.default as object))) ? { default: show(cu.default, cu.kind) } : {}),
        ...(cu.examples?.length ? { example: show(cu.examples[0]) } : {}),
        ...(when ? { when } : {}),
      };
      out.push(doc);
      if (cd.type === 'object' || (cd.type === 'union' && !isSecret(cu.core)) || cd.type === 'array') out.push(...settingsOf(child, path, when));
    }
  } else if (d.type === 'array') {
    const el = unwrap(d.element!);
    const ed = defOf(el.core);
    if (ed.type === 'object' || ed.type === 'union') out.push(...settingsOf(d.element!, `${prefix}[]`, when));
  } else if (d.type === 'union' && !isSecret(u.core)) {
    const disc = d.discriminator;
    for (const option of d.options ?? []) {
      const od = defOf(unwrap(option).core);
      if (od.type !== 'object') continue;
      let label = when;
      if (disc) {
        const lit = unwrap(od.shape![disc]).core;
        const v = defOf(lit).values?.[0];
        label = `${disc}: ${String(v)}`;
      }
      out.push(...settingsOf(option, prefix, label).filter((s) => !disc || s.path !== `${prefix}.${disc}`));
    }
  }
  return out;
}

const esc = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** Markdown: one section per top-level key, one table row per setting. */
export function renderReference(schema: z.ZodType, intro: string): string {
  const all = settingsOf(schema);
  const top = all.filter((s) => !s.path.includes('.') && !s.path.includes('['));
  const parts = [intro.trim(), ''];
  for (const section of top) {
    parts.push(`## \`${section.path}\``, '', section.description ? `${section.description}.` : '', '');
    const rows = all.filter((s) => s.path.startsWith(`${section.path}.`) || s.path.startsWith(`${section.path}[]`));
    if (rows.length === 0) {
      parts.push(`Type: ${section.type}${section.default ? `, default ${section.default}` : ''}.`, '');
      continue;
    }
    parts.push('| Setting | Type | Default | Description | Example |', '|---|---|---|---|---|');
    for (const r of rows) {
      const req = r.required && !r.default ? ' **(required)**' : '';
      const when = r.when ? ` _(when ${r.when})_` : '';
      parts.push(`| \`${r.path}\`${req} | ${esc(r.type)} | ${r.default ? esc(r.default) : ''} | ${esc(r.description)}${when} | ${r.example ? esc(r.example) : ''} |`);
    }
    parts.push('');
  }
  return `${parts.join('\n').replace(/\n{3,}/g, '\n\n').trim()}\n`;
}
