import { createRequire } from 'node:module';
import { formatWithOptions } from 'node:util';

/**
 * One redaction mechanism for text that crosses a boundary: every configured secret
 * (registered when its `Secret` is created, config/secrets.ts) and any `Bearer …`/`Basic …`
 * credential is replaced by `[redacted]`, as is, JSON-escaped, URL-encoded and base64-encoded.
 *
 * Applied where outside text enters or leaves, not scattered:
 * - error text from the tracking service (uplink/client.ts, before it becomes a set-aside reason,
 *   an annotation outbox error, a status field, a log line, a panel or CLI line);
 * - every log line written by pino (logger.ts `hooks.streamWrite`);
 * - the `debug` package's output (mqtt.js under DEBUG=mqttjs* prints its connect options,
 *   password included), patched below when this module loads.
 */

const MIN_SECRET_LENGTH = 4;
/** Up to this many needles a line is searched needle by needle; above, by one pass over the line. */
const NEEDLE_LOOP_MAX = 16;
const secrets = new Set<string>();
let needles: string[] = [];
/** For the one-pass search: the needles, their first MIN_SECRET_LENGTH characters, and their lengths (longest first). */
let needleSet = new Set<string>();
let prefixes = new Set<string>();
let lengths: number[] = [];

/** Secrets shorter than 4 characters are not registered: replacing "ab" everywhere would garble text. */
export function registerSecret(value: string): void {
  if (value.length < MIN_SECRET_LENGTH || secrets.has(value)) return;
  secrets.add(value);
  stale = true;
}

/** The search structures are rebuilt at the next `redact` after registrations, once for many of them. */
let stale = false;
function rebuild(): void {
  stale = false;
  const all = new Set<string>();
  for (const value of secrets) {
    for (const form of [value, JSON.stringify(value).slice(1, -1), encodeURIComponent(value), Buffer.from(value).toString('base64')]) if (form.length >= MIN_SECRET_LENGTH) all.add(form);
  }
  // Longest first, so a secret that contains another is replaced whole.
  needles = [...all].sort((a, b) => b.length - a.length);
  needleSet = all;
  prefixes = new Set(needles.map((n) => n.slice(0, MIN_SECRET_LENGTH)));
  lengths = [...new Set(needles.map((n) => n.length))].sort((a, b) => b - a);
}

/** How many secrets are registered (for tests: a dry-run check registers none). */
export function registeredSecretCount(): number {
  return secrets.size;
}

const CREDENTIAL = /\b(Bearer|Basic)(\s+|%20)[A-Za-z0-9\-._~+/=%]{4,}/gi;

export function redact(text: string): string {
  if (text.length === 0) return text;
  if (stale) rebuild();
  let out = text.replace(CREDENTIAL, (_m, scheme: string, sp: string) => `${scheme}${sp}[redacted]`);
  if (needles.length <= NEEDLE_LOOP_MAX) {
    for (const n of needles) if (out.includes(n)) out = out.split(n).join('[redacted]');
    return out;
  }
  // Many secrets (10,000 of them made every log line slow): one pass; a position
  // whose first characters start no secret costs one set lookup, whatever their number.
  let result = '';
  let from = 0;
  for (let i = 0; i + MIN_SECRET_LENGTH <= out.length; ) {
    let hit = 0;
    if (prefixes.has(out.slice(i, i + MIN_SECRET_LENGTH))) hit = lengths.find((l) => i + l <= out.length && needleSet.has(out.slice(i, i + l))) ?? 0;
    if (hit === 0) {
      i += 1;
      continue;
    }
    result += `${out.slice(from, i)}[redacted]`;
    i += hit;
    from = i;
  }
  return from === 0 ? out : result + out.slice(from);
}

/** A JSON string literal in a JSON text (outside strings there are no quotes). */
const JSON_STRING = /"(?:[^"\\]|\\.)*"/g;

/**
 * `redact` for one JSON log line that keeps it JSON (a secret `"msg":"` replaced in the
 * raw line corrupted every later line; one that looks like a number broke numbers). Secrets are
 * replaced only inside string values and keys, decoded and encoded again.
 */
export function redactJsonLine(line: string): string {
  if (redact(line) === line) return line;
  return line.replace(JSON_STRING, (token) => {
    let value: string;
    try {
      value = JSON.parse(token) as string;
    } catch {
      return token;
    }
    const clean = redact(value);
    return clean === value ? token : JSON.stringify(clean);
  });
}

/** `redact` for values that may not be strings (an error message field typed unknown). */
export function redactValue<T>(v: T): T {
  return (typeof v === 'string' ? redact(v) : v) as T;
}

// The `debug` package formats its arguments and then calls `createDebug.log` (debug/src/node.js),
// looked up at every call, so one replacement covers every library that uses it. It is resolved
// from mqtt.js' own location so that it is the very instance mqtt.js logs through.
type DebugLib = { log: (...args: unknown[]) => void; inspectOpts?: object };
function patchDebug(): void {
  let debugLib: DebugLib;
  try {
    const fromMqtt = createRequire(createRequire(import.meta.url).resolve('mqtt'));
    debugLib = fromMqtt('debug') as DebugLib;
  } catch {
    return; // no mqtt.js, no debug output to guard
  }
  debugLib.log = (...args: unknown[]) => {
    process.stderr.write(`${redact(formatWithOptions(debugLib.inspectOpts ?? {}, ...args))}\n`);
  };
}
patchDebug();
