import { setImmediate as nextTurn } from 'node:timers/promises';
import { isMap, isScalar, isSeq, type Document, type LineCounter, type Node } from 'yaml';
import { parseYamlDocumentSliced, validateConfig, type ParsedYaml } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { pathText } from '../config/secret-fields.js';
import { withoutReadingSecrets } from '../config/secrets.js';
import { systemClock } from '../core/clock.js';
import { ConfigError, describeError } from '../core/errors.js';
import { silentLogger } from '../core/logger.js';
import { createMetrics } from '../core/metrics.js';
import { SourceStats, type Source, type SourceKind } from '../core/source.js';
import { assertUniqueNames, buildSourceSection, SOURCE_SECTIONS } from '../sources/registry.js';
import type { CheckProblem } from './api/config.js';

/**
 * The console's dry-run check of a configuration text: what `edge-gateway check`
 * does, bounded so that no text a browser can post costs the gateway more than a moment.
 *
 * - at most MAX_CHECK_BYTES of text;
 * - parsed once, in slices with a turn of the event loop between them (the line of every problem
 *   comes from one index of the parsed document: it used to be parsed again per problem, so 60 kB
 *   with hundreds of problems kept the gateway busy for minutes);
 * - at most MAX_PROBLEMS problems reported (and how many more there are);
 * - secrets are never resolved: no environment variable read, no secret file opened, nothing
 *   registered for log redaction; a `{file: PATH}` is checked for its form only;
 * - sources are built as `check` builds them (cross-field problems), without I/O, except OPC UA.
 */

/** Largest text checked: a configuration of 3,000 OPC UA nodes is about 250 kB; larger files are edited on the machine and checked with `edge-gateway check`. */
export const MAX_CHECK_BYTES = 256 * 1024;
/** Problems listed at most; the rest are counted. A person fixes the first few and checks again. */
export const MAX_PROBLEMS = 100;

/** A problem of a checked text: the shared model of the console's API (api/config.ts). */
export type { CheckProblem };

export interface CheckResult {
  ok: boolean;
  problems: CheckProblem[];
  /** Problems found beyond the MAX_PROBLEMS listed. */
  more_problems: number;
  warnings: string[];
  sources: string[];
  /** The validated configuration (secrets not resolved: only for comparing settings, never to run). */
  config?: GatewayConfig;
  /** The parsed document, for callers that need the settings' positions. */
  parsed?: ParsedYaml;
}

/** Yields to the event loop: timers, I/O and other requests run between two slices of the check. */
const pause = (): Promise<void> => nextTurn().then(() => undefined);

export async function checkConfigText(text: string): Promise<CheckResult> {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_CHECK_BYTES) {
    return failed([{ path: null, line: null, message: `the configuration is ${bytes.toLocaleString('en-US')} bytes, more than the ${MAX_CHECK_BYTES / 1024} KiB the console checks; edit the file on the gateway and run edge-gateway check --config FILE` }], 0, []);
  }
  let parsed: ParsedYaml;
  try {
    parsed = await parseYamlDocumentSliced(text, 'config', pause);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return failedWith(err.problems, null, []);
  }
  let loaded;
  try {
    loaded = withoutReadingSecrets(() => validateConfig(parsed.value));
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    await pause();
    return failedWith(err.problems, parsed, []);
  }
  await pause();
  const metrics = createMetrics();
  try {
    const makeContext = (name: string, kind: SourceKind) => ({ sink: { append: async () => undefined }, logger: silentLogger(), stats: new SourceStats(name, kind, metrics, systemClock), metrics, clock: systemClock, dataDir: '/nonexistent' });
    // OPC UA sources are named, not built: their construction checks nothing the schema has not
    // (sources/opcua/index.ts) and loading node-opcua for it held the event loop for 1.3 s in a
    // gateway that runs no OPC UA. Apply builds them (the reload) before anything changes.
    const sources: Array<Pick<Source, 'name' | 'kind'>> = [];
    for (const section of SOURCE_SECTIONS) {
      if (section === 'opcua') sources.push(...(loaded.config.opcua?.servers ?? []).map((s) => ({ kind: 'opcua' as const, name: s.name })));
      else sources.push(...(await buildSourceSection(section, loaded.config, makeContext)));
    }
    assertUniqueNames(sources);
    return { ok: true, problems: [], more_problems: 0, warnings: loaded.warnings, sources: sources.map((s) => `${s.kind}:${s.name}`), config: loaded.config, parsed };
  } catch (err) {
    return failedWith(err instanceof ConfigError ? err.problems : [describeError(err)], parsed, loaded.warnings);
  }
}

function failed(problems: CheckProblem[], more: number, warnings: string[]): CheckResult {
  return { ok: false, problems, more_problems: more, warnings, sources: [] };
}

function failedWith(messages: readonly string[], parsed: ParsedYaml | null, warnings: string[]): CheckResult {
  const { problems, more } = problemsFor(messages, parsed);
  return { ...failed(problems, more, warnings), parsed: parsed ?? undefined };
}

/** Messages naming settings → problems with the settings' lines in the parsed text (at most MAX_PROBLEMS, and how many more). */
export function problemsFor(messages: readonly string[], parsed: ParsedYaml | null | undefined): { problems: CheckProblem[]; more: number } {
  const lines = parsed?.doc ? settingLines(parsed.doc, parsed.lines) : new Map<string, number>();
  return { problems: messages.slice(0, MAX_PROBLEMS).map((m) => problemOf(m, lines)), more: Math.max(0, messages.length - MAX_PROBLEMS) };
}

/**
 * The line of every setting of a document, by its path (`opcua.servers[0].nodes[3].variable`): the
 * line of its key, or of the list item. One walk of the document serves every problem.
 */
export function settingLines(doc: Document.Parsed, lines: LineCounter): Map<string, number> {
  const out = new Map<string, number>();
  const walk = (node: unknown, path: Array<string | number>, depth: number): void => {
    if (depth > 70) return;
    if (isMap(node)) {
      for (const pair of node.items) {
        if (!isScalar(pair.key)) continue;
        const here = [...path, String(pair.key.value)];
        const at = pair.key.range?.[0];
        if (at !== undefined) out.set(pathText(here), lines.linePos(at).line);
        walk(pair.value, here, depth + 1);
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => {
        const here = [...path, i];
        const at = (item as Node | null)?.range?.[0];
        if (at !== undefined) out.set(pathText(here), lines.linePos(at).line);
        walk(item, here, depth + 1);
      });
    }
  };
  walk(doc.contents, [], 0);
  return out;
}

function problemOf(message: string, lines: ReadonlyMap<string, number>): CheckProblem {
  const syntax = /YAML syntax error at line (\d+)|^config: line (\d+):/.exec(message);
  if (syntax) return { path: null, line: Number(syntax[1] ?? syntax[2]), message };
  const m = /^([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*|\[\d+\]|\["(?:[^"\\]|\\.)*"\])*)(?::| )/.exec(message);
  if (!m) return { path: null, line: null, message };
  const keys: Array<string | number> = [];
  for (const k of m[1].matchAll(/\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g)) keys.push(k[1] ?? (k[2] !== undefined ? Number(k[2]) : (JSON.parse(k[3]) as string)));
  // The deepest setting of the path that is in the text: a missing setting points at its parent.
  for (let n = keys.length; n > 0; n--) {
    const line = lines.get(pathText(keys.slice(0, n)));
    if (line !== undefined) return { path: m[1], line, message };
  }
  return { path: m[1], line: null, message };
}
