import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Composer, LineCounter, Parser, type CST, type Document, type YAMLError } from 'yaml';
import { ConfigError } from '../core/errors.js';
import { formatIssues } from './issues.js';
import { documentProblems } from './yaml-checks.js';
import { LEAN_READER_MIN_CHARS, readYamlLean, refuseAliasBomb } from './yaml-lean.js';
import { withoutRequiredSecrets } from './secrets.js';
import { isLoopbackHost } from '../core/loopback.js';
import { gatewaySchema, type GatewayConfig } from './schema.js';

export interface LoadedConfig {
  config: GatewayConfig;
  /** Absolute path of the file it came from, or null for an in-memory config. */
  path: string | null;
  /** Things that are allowed but probably wrong (a secret written in the file, a budget above the service limit). */
  warnings: string[];
}

/**
 * Reads, parses and validates a YAML (or JSON) config file. Throws `ConfigError` naming every problem.
 * With `requireSecrets: false`, secrets that cannot be resolved (variable not set) are accepted as
 * empty: for commands that only need paths and ports from the file.
 */
export function loadConfigFile(file: string, options: { requireSecrets?: boolean } = {}): LoadedConfig {
  if (options.requireSecrets === false) return withoutRequiredSecrets(() => loadConfigFile(file));
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new ConfigError([`config file ${path} cannot be read (${code})`], { cause: err });
  }
  try {
    return { ...parseConfigText(text, path), path };
  } catch (err) {
    if (err instanceof ConfigError && !err.file) err.file = path;
    throw err;
  }
}

/** Deepest nesting a configuration may have; real ones stay below 10 (issue 12 §4: 5,000 levels overflowed the stack). */
export const MAX_NESTING = 64;

export function parseConfigText(text: string, origin = 'config'): Omit<LoadedConfig, 'path'> {
  return validateConfig(parseYamlConfig(text, origin));
}

/**
 * YAML text → plain object, refusing what the YAML library would otherwise report as a crash or a
 * bare library message (issue 12 §4): nesting deeper than MAX_NESTING, several documents, aliases
 * without an anchor, and alias bombs. Every message names the file, the setting and the value.
 */
export function parseYamlConfig(text: string, origin = 'config'): unknown {
  refuseDeepNesting(text, origin);
  // A generated variable list (100,000 variables: 7.4 MB) is read without the full reader's
  // syntax tree and document (yaml-lean.ts); anything it leaves aside, and every error, is the
  // full reader's.
  const lean = text.length >= LEAN_READER_MIN_CHARS ? readYamlLean(text, origin) : undefined;
  if (lean) return lean.value;
  return parseCheckedYamlDocument(text, origin).value;
}

/** A configuration's YAML read into a document (null when the text is empty) and the plain value. */
export interface ParsedYaml {
  value: unknown;
  doc: Document.Parsed | null;
  lines: LineCounter;
}

/** `parseYamlConfig`, also returning the document, so a caller can find settings' lines without parsing again. */
export function parseYamlDocument(text: string, origin = 'config'): ParsedYaml {
  refuseDeepNesting(text, origin);
  refuseAliasBomb(text, origin);
  return parseCheckedYamlDocument(text, origin);
}

/** `parseYamlDocument` after the nesting check. */
function parseCheckedYamlDocument(text: string, origin: string): ParsedYaml {
  const lines = new LineCounter();
  const tokens = [...new Parser(lines.addNewLine).parse(text)];
  return composeConfig(text, origin, tokens, lines);
}

/** Text fed to the YAML parser between two pauses of `parseYamlDocumentSliced` (a few ms of work). */
const PARSE_SLICE_CHARS = 8_192;

/**
 * `parseYamlDocument` that awaits `pause()` after each slice of about 8 kB of text (cut at line
 * ends; the YAML parser takes its input in pieces), so reading a large text does not hold the event
 * loop in one block (issue 21 §3: the console's dry-run check of 60 kB). Composing the document
 * stays one step, a fraction of the parse.
 */
export async function parseYamlDocumentSliced(text: string, origin: string, pause: () => Promise<void>): Promise<ParsedYaml> {
  refuseDeepNesting(text, origin);
  await pause();
  refuseAliasBomb(text, origin);
  await pause();
  const lines = new LineCounter();
  const parser = new Parser(lines.addNewLine);
  const tokens: CST.Token[] = [];
  let at = 0;
  do {
    const newline = text.indexOf('\n', Math.min(text.length, at + PARSE_SLICE_CHARS));
    const end = newline < 0 ? text.length : newline + 1;
    for (const token of parser.parse(text.slice(at, end), end < text.length)) tokens.push(token);
    at = end;
    await pause();
  } while (at < text.length);
  return composeConfig(text, origin, tokens, lines);
}

function refuseDeepNesting(text: string, origin: string): void {
  const deep = nestingBeyond(text, MAX_NESTING);
  if (deep) throw new ConfigError([`${origin}: line ${deep.line}: nesting deeper than ${MAX_NESTING} levels (${deep.what}); a configuration is a few levels deep, so this file is not one`]);
}

/**
 * Parser tokens → document → plain object, refusing what the YAML library would otherwise report as
 * a crash or a bare library message (issue 12 §4): several documents, keys written twice, aliases
 * without an anchor, and alias bombs (yaml-checks.ts, one walk linear in the document's size: the
 * library's own duplicate-key check is quadratic in a mapping's keys). Every message names the
 * file, the line and the setting.
 */
function composeConfig(text: string, origin: string, tokens: readonly CST.Token[], lines: LineCounter): ParsedYaml {
  let docs: Document.Parsed[];
  try {
    docs = [...new Composer({ uniqueKeys: false }).compose(tokens, false, text.length)] as Document.Parsed[];
  } catch (err) {
    throw new ConfigError([`${origin}: the YAML cannot be read: ${(err as Error).message.split('\n')[0]}`], { cause: err });
  }
  const at = (offset: number | undefined) => (offset === undefined ? '?' : String(lines.linePos(offset).line));
  const real = docs.filter((d) => d.contents !== null || d.errors.length > 0);
  if (real.length > 1) {
    throw new ConfigError([`${origin}: line ${at(real[1].range[0])}: a second YAML document starts here (after "---"); the configuration is one document: remove the "---" line or merge the two parts`]);
  }
  const doc = real[0] ?? docs[0];
  if (!doc) return { value: {}, doc: null, lines };
  if (doc.errors.length > 0) {
    throw new ConfigError(doc.errors.slice(0, MAX_SYNTAX_PROBLEMS).map((e: YAMLError) => {
      const pos = e.pos[0] >= 0 ? lines.linePos(e.pos[0]) : null;
      return `${origin}: YAML syntax error at line ${pos?.line ?? '?'}, column ${pos?.col ?? '?'}: ${e.message.split('\n')[0]}${pos ? ` at line ${pos.line}, column ${pos.col}` : ''}`;
    }));
  }
  const problems = documentProblems(doc, lines, origin);
  if (problems.length > 0) throw new ConfigError(problems);
  try {
    // The aliases are bounded by documentProblems; the library's own count (per anchor, with a
    // scan of every earlier anchor per alias) would only refuse differently.
    return { value: doc.toJS({ maxAliasCount: -1 }) ?? {}, doc, lines };
  } catch (err) {
    throw new ConfigError([`${origin}: the YAML cannot be read: ${(err as Error).message.split('\n')[0]}`], { cause: err });
  }
}

/** Syntax errors listed; a file that is not YAML at all has one per line. */
const MAX_SYNTAX_PROBLEMS = 100;

/**
 * A cheap scan before parsing: flow brackets outside quotes, and block indentation levels. Returns
 * where nesting first passes `max`, or null. (The YAML parser recurses per level; thousands of
 * levels overflow the stack with "Maximum call stack size exceeded".)
 */
function nestingBeyond(text: string, max: number): { line: number; what: string } | null {
  const indents: number[] = [];
  let flow = 0;
  let lineNo = 0;
  let top = '';
  for (const line of text.split('\n')) {
    lineNo += 1;
    const trimmed = line.trimStart();
    const key = /^([^\s#:][^:]{0,40}):/.exec(line);
    if (key) top = key[1];
    const under = top ? ` under "${top}"` : '';
    if (flow === 0 && trimmed !== '' && !trimmed.startsWith('#')) {
      const indent = line.length - trimmed.length + (/^(- )+/.exec(trimmed)?.[0].length ?? 0);
      while (indents.length > 0 && indents[indents.length - 1] >= indent) indents.pop();
      indents.push(indent);
      if (indents.length > max) return { line: lineNo, what: `${indents.length} indentation levels${under}` };
    }
    let quote: string | null = null;
    for (let i = 0; i < line.length; i++) {
      const c = line[i];
      if (quote) {
        if (c === quote) quote = null;
        else if (c === '\\' && quote === '"') i += 1;
        continue;
      }
      if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) break;
      if (c === '"' || c === "'") quote = c;
      else if (c === '[' || c === '{') {
        flow += 1;
        if (flow + indents.length > max) return { line: lineNo, what: `${flow + indents.length} levels of brackets${under}` };
      } else if ((c === ']' || c === '}') && flow > 0) flow -= 1;
    }
  }
  return null;
}

/** Validates an already-parsed config object (tests build configs in code and use this). */
export function validateConfig(raw: unknown): Omit<LoadedConfig, 'path'> {
  const result = gatewaySchema.safeParse(raw, { reportInput: true });
  if (!result.success) throw new ConfigError(formatIssues(result.error.issues, [], gatewaySchema));
  if (result.data.uplink.budget_sharing.mode === 'fleet' && !result.data.fleet?.mqtt) {
    throw new ConfigError(['uplink.budget_sharing.mode: "fleet" needs the plant broker: set fleet.mqtt.url (the gateways exchange their demand there)']);
  }
  return { config: result.data, warnings: warningsFor(result.data) };
}

function warningsFor(config: GatewayConfig): string[] {
  const warnings: string[] = [];
  const auth = config.service.auth;
  const secret = auth.mode === 'client_credentials' ? auth.client_secret : auth.api_key;
  if (secret.origin === 'config file') {
    warnings.push(`service.auth: the ${auth.mode === 'client_credentials' ? 'client_secret' : 'api_key'} is written in the config file; prefer {env: NAME} or {file: PATH}`);
  }
  if (config.uplink.requests_per_minute > 1_500) {
    warnings.push(`uplink.requests_per_minute: ${config.uplink.requests_per_minute} is above the service limit of 1,500 per minute per IP (§8); expect 429 responses`);
  }
  // Issue 12 §3: credentials and data in clear text across the plant network.
  for (const [setting, url] of [['service.base_url', config.service.base_url], ['service.auth_url', config.service.auth_url]] as const) {
    if (!url) continue;
    const u = new URL(url);
    const host = u.hostname.replace(/^\[|\]$/g, '');
    if (u.protocol === 'http:' && !isLoopback(host)) warnings.push(`${setting}: ${url} is plain http:// to ${host}, which is not this machine: credentials and data cross the network unencrypted; use https://`);
  }
  if (config.http.enabled && !isLoopback(config.http.host) && !config.http.api_token) {
    warnings.push(`http.host: ${config.http.host} is reachable from the network but http.api_token is not set; writes to the local API, and the console's reads of the configuration and variable values, will be refused`);
  }
  return warnings;
}

export function isLoopback(host: string): boolean {
  // A literal address, not a prefix: "127.evil.example" is a name that resolves anywhere.
  return isLoopbackHost(host);
}
