import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { formatIssues } from '../config/issues.js';
import { ConfigError } from '../core/errors.js';
import { DEMO_FIXTURE } from './demo-fixture.js';

/**
 * The emulator's world: who may log in, the organisations, their sites, machines and machine
 * variables. Loaded from JSON or YAML (or given as an object), validated with zod, then indexed so
 * that every lookup on the request path is a Map hit (tests and benchmarks use fixtures with
 * thousands of variables).
 */

const id = (prefix: string) => z.string().min(1).meta({ description: `id, conventionally ${prefix}_...` });

const clientSchema = z.strictObject({
  client_id: z.string().min(1),
  client_secret: z.string().min(1),
  /** Organisations the client may name in Service-Organisation-Id (§5.6). */
  organisations: z.array(z.string().min(1)),
});

const apiKeySchema = z.strictObject({
  key: z.string().min(1),
  /** An API key is scoped to one organisation and a set of sites (§5.8). */
  organisation: z.string().min(1),
  sites: z.array(z.string().min(1)),
});

export const fixtureSchema = z.strictObject({
  clients: z.array(clientSchema).default([]),
  api_keys: z.array(apiKeySchema).default([]),
  organisations: z.array(z.strictObject({ id: id('org'), name: z.string() })).min(1),
  sites: z.array(z.strictObject({ id: id('ste'), external_id: z.string().min(1).nullable().default(null), organisation: z.string().min(1) })).default([]),
  machines: z.array(z.strictObject({ id: id('mch'), name: z.string(), site: z.string().min(1) })).default([]),
  machine_variables: z
    .array(z.strictObject({ id: id('mvr'), name: z.string(), machine: z.string().min(1), unit: z.string().default('') }))
    .default([]),
  // Seeds [A, emulator only]: data the emulated service already holds at start and after a reset
  // (seed.ts checks them with the same rules as the endpoints that would have stored them).
  values: z
    .array(z.strictObject({ machine_variable_id: z.string().min(1), timestamp: z.string().min(1), value: z.number() }))
    .default([])
    .meta({ description: 'stored values, as if sent in a batch' }),
  annotations: z
    .array(z.looseObject({ organisation: z.string().min(1) }))
    .default([])
    .meta({ description: 'annotations: `organisation` plus a POST /machine-data-annotations body (an external_id makes a retry answer 409)' }),
  import_jobs: z
    .array(
      z.strictObject({
        organisation: z.string().min(1),
        job_id: z.string().regex(/^job_[A-Za-z0-9_-]+$/).optional(),
        status: z.enum(['accepted', 'processing', 'finished', 'failed']).default('finished'),
        items_received: z.number().int().min(0).default(0),
        items_accepted: z.number().int().min(0).nullable().optional(),
        items_rejected: z.number().int().min(0).nullable().optional(),
        errors: z.array(z.strictObject({ index: z.number().int().min(0).nullable(), code: z.string(), message: z.string() })).nullable().optional(),
        created_at: z.string().optional(),
        finished_at: z.string().nullable().optional(),
      }),
    )
    .default([])
    .meta({ description: 'import jobs as GET .../import-jobs/{job_id} shows them; they keep their status (a job left accepted never finishes)' }),
});

/** A fixture as written in a file (defaults not yet applied). */
export type FixtureInput = z.input<typeof fixtureSchema>;
/** A validated fixture. */
export type Fixture = z.output<typeof fixtureSchema>;

export interface SiteRecord {
  id: string;
  external_id: string | null;
  organisationId: string;
}
export interface MachineRecord {
  id: string;
  name: string;
  siteId: string;
  organisationId: string;
}
export interface VariableRecord {
  id: string;
  name: string;
  unit: string;
  machineId: string;
  siteId: string;
  organisationId: string;
  /** Position in `FixtureIndex.variableList`; lets import jobs stage items in typed arrays. */
  ordinal: number;
}
export interface OrganisationRecord {
  id: string;
  name: string;
  /** Sorted by id (the stable list order, §8 cursors are ids). */
  machines: MachineRecord[];
  variables: VariableRecord[];
  machinesBySite: Map<string, MachineRecord[]>;
  variablesBySite: Map<string, VariableRecord[]>;
  sitesByExternalId: Map<string, SiteRecord>;
}
export interface ClientRecord {
  clientId: string;
  secret: string;
  organisations: Set<string>;
}
export interface ApiKeyRecord {
  organisationId: string;
  sites: Set<string>;
}

/** The fixture with every lookup the request path needs as a Map. */
export class FixtureIndex {
  readonly clients = new Map<string, ClientRecord>();
  readonly apiKeys = new Map<string, ApiKeyRecord>();
  readonly organisations = new Map<string, OrganisationRecord>();
  readonly sites = new Map<string, SiteRecord>();
  readonly machines = new Map<string, MachineRecord>();
  readonly variables = new Map<string, VariableRecord>();
  readonly variableList: VariableRecord[] = [];

  constructor(readonly fixture: Fixture) {
    for (const o of fixture.organisations) {
      this.organisations.set(o.id, { id: o.id, name: o.name, machines: [], variables: [], machinesBySite: new Map(), variablesBySite: new Map(), sitesByExternalId: new Map() });
    }
    for (const s of fixture.sites) {
      const site: SiteRecord = { id: s.id, external_id: s.external_id, organisationId: s.organisation };
      this.sites.set(s.id, site);
      const org = this.organisations.get(s.organisation)!;
      if (s.external_id !== null) org.sitesByExternalId.set(s.external_id, site);
      org.machinesBySite.set(s.id, []);
      org.variablesBySite.set(s.id, []);
    }
    for (const m of fixture.machines) {
      const site = this.sites.get(m.site)!;
      const machine: MachineRecord = { id: m.id, name: m.name, siteId: site.id, organisationId: site.organisationId };
      this.machines.set(m.id, machine);
      const org = this.organisations.get(site.organisationId)!;
      org.machines.push(machine);
      org.machinesBySite.get(site.id)!.push(machine);
    }
    for (const v of fixture.machine_variables) this.indexVariable(v);
    const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    for (const org of this.organisations.values()) {
      org.machines.sort(byId);
      org.variables.sort(byId);
      for (const list of org.machinesBySite.values()) list.sort(byId);
      for (const list of org.variablesBySite.values()) list.sort(byId);
    }
    for (const c of fixture.clients) this.clients.set(c.client_id, { clientId: c.client_id, secret: c.client_secret, organisations: new Set(c.organisations) });
    for (const k of fixture.api_keys) this.apiKeys.set(k.key, { organisationId: k.organisation, sites: new Set(k.sites) });
  }

  /**
   * A machine variable created while the emulator runs (POST /_emulator/machine-variables), as an
   * operator creates one in the service: listed and accepted from now on. Throws naming the field
   * when the id is taken or the machine is unknown.
   */
  addVariable(v: { id: string; name: string; unit: string; machine: string }): VariableRecord {
    if (this.variables.has(v.id)) throw new Error(`id: machine variable "${v.id}" already exists`);
    if (!this.machines.has(v.machine)) throw new Error(`machine: unknown machine "${v.machine}"`);
    const variable = this.indexVariable(v);
    const org = this.organisations.get(variable.organisationId)!;
    const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    org.variables.sort(byId);
    org.variablesBySite.get(variable.siteId)!.sort(byId);
    return variable;
  }

  private indexVariable(v: { id: string; name: string; unit: string; machine: string }): VariableRecord {
    const machine = this.machines.get(v.machine)!;
    const variable: VariableRecord = {
      id: v.id,
      name: v.name,
      unit: v.unit,
      machineId: machine.id,
      siteId: machine.siteId,
      organisationId: machine.organisationId,
      ordinal: this.variableList.length,
    };
    this.variables.set(v.id, variable);
    this.variableList.push(variable);
    const org = this.organisations.get(machine.organisationId)!;
    org.variables.push(variable);
    org.variablesBySite.get(machine.siteId)!.push(variable);
    return variable;
  }
}

/**
 * Validates a fixture object: shape by zod, then references and uniqueness. Every problem names its
 * path and value (`machines[3].site: unknown site "ste_x"`). Throws ConfigError listing them all.
 */
export function validateFixture(input: unknown, source = 'fixture'): Fixture {
  const parsed = fixtureSchema.safeParse(input);
  if (!parsed.success) throw new ConfigError(formatIssues(parsed.error.issues, [], fixtureSchema).map((p) => `${source}: ${p}`));
  const f = parsed.data;
  const problems: string[] = [];
  const unique = (list: Array<{ id: string }>, name: string) => {
    const seen = new Set<string>();
    list.forEach((x, i) => {
      if (seen.has(x.id)) problems.push(`${name}[${i}].id: duplicate id "${x.id}"`);
      seen.add(x.id);
    });
    return seen;
  };
  const orgs = unique(f.organisations, 'organisations');
  const sites = new Map<string, string>(); // site -> organisation
  unique(f.sites, 'sites');
  const siteExternal = new Set<string>();
  f.sites.forEach((s, i) => {
    if (!orgs.has(s.organisation)) problems.push(`sites[${i}].organisation: unknown organisation "${s.organisation}"`);
    sites.set(s.id, s.organisation);
    if (s.external_id !== null) {
      // external_id is unique within the organisation (§2.1).
      const key = `${s.organisation}\u0000${s.external_id}`;
      if (siteExternal.has(key)) problems.push(`sites[${i}].external_id: "${s.external_id}" is already used in organisation "${s.organisation}"`);
      siteExternal.add(key);
    }
  });
  // Machine and variable ids must be unique across the whole fixture: stored values are keyed by
  // the variable id alone, and a variable belongs to exactly one organisation through its machine.
  const machines = unique(f.machines, 'machines');
  f.machines.forEach((m, i) => {
    if (!sites.has(m.site)) problems.push(`machines[${i}].site: unknown site "${m.site}"`);
  });
  unique(f.machine_variables, 'machine_variables');
  f.machine_variables.forEach((v, i) => {
    if (!machines.has(v.machine)) problems.push(`machine_variables[${i}].machine: unknown machine "${v.machine}"`);
  });
  const clientIds = new Set<string>();
  f.clients.forEach((c, i) => {
    if (clientIds.has(c.client_id)) problems.push(`clients[${i}].client_id: duplicate client id "${c.client_id}"`);
    clientIds.add(c.client_id);
    c.organisations.forEach((o, j) => {
      if (!orgs.has(o)) problems.push(`clients[${i}].organisations[${j}]: unknown organisation "${o}"`);
    });
  });
  const keys = new Set<string>();
  f.api_keys.forEach((k, i) => {
    if (keys.has(k.key)) problems.push(`api_keys[${i}].key: duplicate key`);
    keys.add(k.key);
    if (!orgs.has(k.organisation)) problems.push(`api_keys[${i}].organisation: unknown organisation "${k.organisation}"`);
    k.sites.forEach((s, j) => {
      const owner = sites.get(s);
      if (owner === undefined) problems.push(`api_keys[${i}].sites[${j}]: unknown site "${s}"`);
      else if (owner !== k.organisation) problems.push(`api_keys[${i}].sites[${j}]: site "${s}" belongs to organisation "${owner}", not "${k.organisation}"`);
    });
  });
  if (problems.length > 0) throw new ConfigError(problems.map((p) => `${source}: ${p}`));
  return f;
}

/** Reads a fixture file: `.json` as JSON, `.yaml`/`.yml` as YAML, anything else JSON then YAML. */
export function readFixtureFile(path: string): Fixture {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError([`fixture ${path}: cannot be read (${(err as Error).message})`], { cause: err });
  }
  const ext = extname(path).toLowerCase();
  let data: unknown;
  try {
    data = ext === '.json' ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigError([`fixture ${path}: not valid ${ext === '.json' ? 'JSON' : 'YAML'} (${(err as Error).message.split('\n')[0]})`], { cause: err });
  }
  return validateFixture(data, `fixture ${path}`);
}

/** Object, file path, or (nothing) the built-in demo fixture (src/emulator/demo-fixture.ts). */
export function loadFixture(fixture?: FixtureInput | Fixture | string): FixtureIndex {
  if (fixture === undefined) return new FixtureIndex(validateFixture(DEMO_FIXTURE, 'demo fixture'));
  if (typeof fixture === 'string') return new FixtureIndex(readFixtureFile(fixture));
  return new FixtureIndex(validateFixture(fixture));
}

export interface GeneratedFixtureOptions {
  /** Organisations `org_1`.. (default 1). */
  organisations?: number;
  sitesPerOrganisation?: number;
  machinesPerSite?: number;
  variablesPerMachine?: number;
  /** One client per organisation: `client-<org>` / `secret-<org>`, or these for the first. */
  clientId?: string;
  clientSecret?: string;
}

/**
 * A programmatic fixture for tests and benchmarks. Numbers are zero-padded so the id order (the
 * list order, §8) matches the numeric order: `org_1`, `ste_1_01`, `mch_1_01_01`, `mvr_1_01_01_0001`.
 * Each organisation also gets an API key `key-<org>` covering all its sites.
 */
export function generateFixture(opts: GeneratedFixtureOptions = {}): Fixture {
  const nOrg = opts.organisations ?? 1;
  const nSite = opts.sitesPerOrganisation ?? 1;
  const nMachine = opts.machinesPerSite ?? 1;
  const nVar = opts.variablesPerMachine ?? 10;
  const pad = (n: number, of: number) => String(n).padStart(String(of).length, '0');
  const f: FixtureInput = { clients: [], api_keys: [], organisations: [], sites: [], machines: [], machine_variables: [] };
  for (let o = 1; o <= nOrg; o++) {
    const org = `org_${pad(o, nOrg)}`;
    f.organisations.push({ id: org, name: `Organisation ${o}` });
    f.clients!.push({ client_id: o === 1 && opts.clientId ? opts.clientId : `client-${org}`, client_secret: o === 1 && opts.clientSecret ? opts.clientSecret : `secret-${org}`, organisations: [org] });
    const siteIds: string[] = [];
    for (let s = 1; s <= nSite; s++) {
      const site = `ste_${pad(o, nOrg)}_${pad(s, nSite)}`;
      siteIds.push(site);
      f.sites!.push({ id: site, external_id: `site-${pad(o, nOrg)}-${pad(s, nSite)}`, organisation: org });
      for (let m = 1; m <= nMachine; m++) {
        const suffix = `${pad(o, nOrg)}_${pad(s, nSite)}_${pad(m, nMachine)}`;
        f.machines!.push({ id: `mch_${suffix}`, name: `Machine ${suffix}`, site });
        for (let v = 1; v <= nVar; v++) f.machine_variables!.push({ id: `mvr_${suffix}_${pad(v, nVar)}`, name: `variable ${v}`, machine: `mch_${suffix}`, unit: '' });
      }
    }
    f.api_keys!.push({ key: `key-${org}`, organisation: org, sites: siteIds });
  }
  return validateFixture(f, 'generated fixture');
}
