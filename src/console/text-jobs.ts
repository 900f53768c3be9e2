import { Document } from 'yaml';
import { parseYamlDocument, parseYamlDocumentSliced } from '../config/load.js';
import { lineDiff } from '../config/text-diff.js';
import { LEAN_READER_MIN_CHARS, readYamlLean } from '../config/yaml-lean.js';
import { ConfigError } from '../core/errors.js';
import type { Catalog, ImportCsvResponse, MappingsResponse, MergeRequest, MergeResponse } from './api/build.js';
import type { CheckProblem, ConfigCheckResponse, SecretChange } from './api/config.js';
import { catalogFlags } from './catalog-flags.js';
import { checkConfigText, MAX_CHECK_BYTES, problemsFor } from './config-check.js';
import { configDiff, confirmationOf, maskSecrets, maskSecretsByLines, secretChanges, unmaskSecrets } from './config-edit.js';
import { ConfigMerge, fedVariables, MergeError, type ModbusDeviceAddition, type ModbusRegisterAddition, type MergeResult } from './config-merge.js';
import { digestOf } from './config-history.js';
import { mappingsCsvOf } from './mapping-csv.js';
import { importMappingsCsv } from './mapping-import.js';
import { bodyOf, importSchema, mappingsSchema, mergeJobOf, mergeSchema } from './text-bodies.js';
import { HttpError } from '../http/server.js';

/**
 * The console's work on configuration texts and CSV files (check, the editor's read and Apply's
 * preview, the mappings export, the CSV import, "Add to configuration"): what a text or a request
 * body of several MB costs. They run on the console's text worker (text-worker.ts), off the
 * gateway's event loop; each takes and answers plain data.
 */
export type TextJob =
  | { job: 'check'; yaml: string }
  /** `catalog`: the console's copy of the organisation's catalog, null when not read yet (catalog-flags.ts). */
  | { job: 'prepare'; posted: string; current: string | null; catalog: Catalog | null }
  | { job: 'locate'; yaml: string; messages: string[] }
  | { job: 'read'; file: string }
  | { job: 'mappings'; yaml: string }
  | { job: 'mappings-file'; file: string }
  | { job: 'import'; yaml: string; csv: string; update: boolean; catalog: Catalog | null }
  | { job: 'merge'; request: MergeJob }
  | { job: 'diff'; before: string | null; after: string }
  /** A route's JSON body, read, checked and worked on here (text-bodies.ts); `catalog` for the import. */
  | { job: 'request'; route: 'mappings' | 'import' | 'merge'; body: Uint8Array; catalog?: Catalog | null };

/** "Add to configuration": the editor's text and one selection, its Modbus device resolved (build-routes.ts). */
export interface MergeJob {
  yaml: string;
  opcua?: MergeRequest['opcua'];
  modbus?: { device: ModbusDeviceAddition; registers: ModbusRegisterAddition[] };
}

/** What Apply's preview found: the posted text with its secrets put back, checked and compared with the file. */
export type Prepared =
  | { ok: false; problems: CheckProblem[]; more: number }
  | {
      ok: true;
      text: string;
      value: unknown;
      diff: string;
      confirm: string;
      changes: SecretChange[];
      warnings: string[];
      currentDigest: string | null;
      /** Against the catalog the job was given: mapped variables it lacks, units other than its own; and when that copy was read. */
      catalogFlags: string[];
      catalogReadAt: number | null;
    };

/** A job's refusal, carried across the thread as data. */
export type JobFailure = { kind: 'merge'; message: string } | { kind: 'config'; problems: string[] } | { kind: 'http'; status: number; code: string; message: string; field?: string } | { kind: 'error'; message: string };

/** The answer of each job. */
export interface JobResults {
  check: ConfigCheckResponse;
  prepare: Prepared;
  locate: { problems: CheckProblem[]; more: number };
  read: { yaml: string; too_large: boolean };
  mappings: MappingsResponse;
  'mappings-file': { csv: string; rows: number };
  import: ImportCsvResponse;
  merge: MergeResponse;
  diff: { diff: string };
  request: MappingsResponse | ImportCsvResponse | MergeResponse;
}

/** In the worker, the work needs no turns of its own event loop: nothing else runs there. */
const noPause = (): Promise<void> => Promise.resolve();

/**
 * Runs a job. `pause` is awaited between its slices: nothing in the worker; a turn of the event
 * loop when a small text is worked on in the gateway's own thread (text-worker.ts).
 */
export async function runTextJob(j: TextJob, pause: () => Promise<void> = noPause): Promise<JobResults[keyof JobResults]> {
  switch (j.job) {
    case 'check': {
      const r = await checkConfigText(j.yaml);
      return { ok: r.ok, problems: r.problems, more_problems: r.more_problems, warnings: r.warnings, sources: r.sources } satisfies ConfigCheckResponse;
    }
    case 'prepare':
      return prepare(j.posted, j.current, j.catalog);
    case 'locate': {
      const parsed = await parseYamlDocumentSliced(j.yaml, 'config', pause).catch(() => null);
      return problemsFor(j.messages, parsed);
    }
    case 'read':
      return readForEditor(j.file);
    case 'mappings':
      return mappingsOf(j.yaml, pause);
    case 'mappings-file':
      return mappingsOfFile(j.file);
    case 'import': {
      const r = await importMappingsCsv(j.yaml, j.csv, { update: j.update, catalog: j.catalog ? new Map(j.catalog.variables.map((v) => [v.id, v.unit])) : null, pause });
      return { ...r, diff: r.yaml === j.yaml ? '' : lineDiff(j.yaml, r.yaml) } satisfies ImportCsvResponse;
    }
    case 'merge':
      return merge(j.request, pause);
    case 'diff':
      return { diff: configDiff(j.before, j.after) };
    case 'request':
      return request(j, pause);
  }
}

/** A route's body worked on as the route would: a text or CSV that cannot be read is the route's 400, naming the field. */
async function request(j: Extract<TextJob, { job: 'request' }>, pause: () => Promise<void>): Promise<JobResults['request']> {
  try {
    if (j.route === 'mappings') return await mappingsOf(bodyOf(j.body, mappingsSchema).yaml, pause);
    if (j.route === 'merge') return await merge(mergeJobOf(bodyOf(j.body, mergeSchema)), pause);
    const input = bodyOf(j.body, importSchema);
    return (await runTextJob({ job: 'import', yaml: input.yaml, csv: input.csv, update: input.update === true, catalog: j.catalog ?? null }, pause)) as ImportCsvResponse;
  } catch (err) {
    if (err instanceof MergeError) throw new HttpError(400, 'bad_request', err.message, j.route === 'import' && /^CSV|the CSV/.test(err.message) ? 'csv' : 'yaml');
    throw err;
  }
}

/** The file for the editor, every secret written in it hidden; a file above what the console checks is masked by its lines (no document). */
function readForEditor(file: string): JobResults['read'] {
  if (Buffer.byteLength(file) > MAX_CHECK_BYTES) return { yaml: maskSecretsByLines(file), too_large: true };
  return { yaml: maskSecrets(file), too_large: false };
}

async function prepare(posted: string, current: string | null, catalog: Catalog | null): Promise<Prepared> {
  if (current !== null && Buffer.byteLength(current) > MAX_CHECK_BYTES) {
    const problem = `the configuration file is ${Buffer.byteLength(current).toLocaleString('en-US')} bytes, more than the ${MAX_CHECK_BYTES / 1024} KiB the console edits; edit it on the gateway and check it with edge-gateway check --config FILE`;
    return { ok: false, problems: [{ path: null, line: null, message: problem }], more: 0 };
  }
  const unmasked = unmaskSecrets(posted, current);
  if (unmasked.problems.length > 0) return { ok: false, problems: unmasked.problems, more: 0 };
  const next = await checkConfigText(unmasked.text);
  if (!next.ok || !next.config) return { ok: false, problems: next.problems, more: next.more_problems };
  const before = current === null ? null : ((await checkConfigText(current)).config ?? null);
  const diff = configDiff(current, unmasked.text);
  return { ok: true, text: unmasked.text, value: next.parsed?.value ?? {}, diff, confirm: confirmationOf(diff), changes: secretChanges(before, next.config), warnings: next.warnings, currentDigest: current === null ? null : digestOf(current), catalogFlags: catalogFlags(next.config, catalog), catalogReadAt: catalog?.read_at ?? null };
}

async function mappingsOf(yaml: string, pause: () => Promise<void>): Promise<MappingsResponse> {
  let parsed;
  try {
    parsed = await parseYamlDocumentSliced(yaml, 'the configuration', pause);
  } catch (err) {
    if (err instanceof ConfigError) throw new MergeError(`the configuration is not valid YAML (${err.problems[0]?.replace(/^the configuration: /, '')}); fix it in the editor first`);
    throw err;
  }
  const doc = parsed.doc ?? new Document();
  const { csv, rows } = mappingsCsvOf(doc, parsed.value);
  return { csv, rows, mapped: Object.fromEntries(fedVariables(doc, parsed.value)) };
}

/**
 * The configuration file's mappings as CSV. A plant-sized file (above the lean reader's threshold)
 * is read by the lean reader, without a document: its rows come without the comments written after
 * the entries (reading 8 MB into a document takes seconds and ~450 MB).
 */
function mappingsOfFile(file: string): { csv: string; rows: number } {
  try {
    if (file.length >= LEAN_READER_MIN_CHARS) {
      const lean = readYamlLean(file, 'the configuration');
      if (lean) return mappingsCsvOf(new Document(), lean.value);
    }
    const parsed = parseYamlDocument(file, 'the configuration');
    return mappingsCsvOf(parsed.doc ?? new Document(), parsed.value);
  } catch (err) {
    if (err instanceof ConfigError) throw new MergeError(`the configuration is not valid YAML (${err.problems[0]?.replace(/^the configuration: /, '')}); fix it in the editor first`);
    throw err;
  }
}

async function merge(input: MergeJob, pause: () => Promise<void>): Promise<MergeResponse> {
  const m = await ConfigMerge.open(input.yaml, pause);
  const step = input.opcua ? m.opcua(input.opcua.server, input.opcua.nodes) : m.modbus(input.modbus!.device, input.modbus!.registers);
  const r: MergeResult = { ...step, yaml: await m.resultSliced(pause) };
  return { ...r, diff: r.yaml === input.yaml ? '' : lineDiff(input.yaml, r.yaml) };
}

/** Characters (or bytes) of text a job works on: what decides whether it runs on the worker. */
export function jobSize(j: TextJob): number {
  switch (j.job) {
    case 'check':
    case 'locate':
    case 'mappings':
      return j.yaml.length;
    case 'prepare':
      return j.posted.length + (j.current?.length ?? 0);
    case 'read':
    case 'mappings-file':
      return j.file.length;
    case 'import':
      return j.yaml.length + j.csv.length;
    case 'merge':
      return j.request.yaml.length;
    case 'diff':
      return (j.before?.length ?? 0) + j.after.length;
    case 'request':
      return j.body.byteLength;
  }
}

/** A thrown error as data for the other thread. */
export function failureOf(err: unknown): JobFailure {
  if (err instanceof HttpError) return { kind: 'http', status: err.status, code: err.code, message: err.message, field: err.field };
  if (err instanceof MergeError) return { kind: 'merge', message: err.message };
  if (err instanceof ConfigError) return { kind: 'config', problems: err.problems };
  return { kind: 'error', message: err instanceof Error ? err.message : String(err) };
}

