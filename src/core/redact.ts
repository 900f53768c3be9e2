import { createRequire } from 'node:module';
import { formatWithOptions } from 'node:util';

/**
 * One redaction mechanism for text that crosses a boundary (issue 12 §3): every configured secret
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
const secrets = new Set<string>();
let needles: string[] = [];

/** Secrets shorter than 4 characters are not registered: replacing "ab" everywhere would garble text. */
export function registerSecret(value: string): void {
  if (value.length < MIN_SECRET_LENGTH || secrets.has(value)) return;
  secrets.add(value);
  const forms = new Set([value, JSON.stringify(value).slice(1, -1), encodeURIComponent(value), Buffer.from(value).toString('base64')]);
  // Longest first, so a secret that contains another is replaced whole.
  needles = [...new Set([...needles, ...[...forms].filter((f) => f.length >= MIN_SECRET_LENGTH)])].sort((a, b) => b.length - a.length);
}

const CREDENTIAL = /\b(Bearer|Basic)(\s+|%20)[A-Za-z0-9\-._~+/=%]{4,}/gi;

export function redact(text: string): string {
  if (text.length === 0) return text;
  let out = text.replace(CREDENTIAL, (_m, scheme: string, sp: string) => `${scheme}${sp}[redacted]`);
  for (const n of needles) if (out.includes(n)) out = out.split(n).join('[redacted]');
  return out;
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
