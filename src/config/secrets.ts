import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { inspect } from 'node:util';
import { z } from 'zod';
import { registerSecret } from '../core/redact.js';

/**
 * A secret value (client secret, API key, password). It prints as `[redacted]` through
 * `String()`, `JSON.stringify`, `util.inspect` and pino, so passing a config object to a logger or
 * to the status endpoint cannot leak it. `reveal()` is the one way to read it, used only where the
 * value goes on the wire.
 */
export class Secret {
  readonly #value: string;
  /** Where it came from, for `check` output: `env GATEWAY_CLIENT_SECRET`, `file /run/secrets/x`, `config file`. */
  readonly origin: string;
  /** How the configuration gave it (`{env: NAME}`, `{file: PATH}`, a literal), when it came from one; the console's Apply compares these. */
  readonly ref: SecretRef | null;

  /**
   * `register: false` keeps the value out of the redaction of log lines: for a configuration that
   * is only being checked, never applied (a dry-run check used to register every
   * literal it saw, for good). An applied configuration registers its secrets (`registerSecretsOf`).
   */
  constructor(value: string, origin: string, options: { ref?: SecretRef; register?: boolean } = {}) {
    this.#value = value;
    this.origin = origin;
    this.ref = options.ref ?? null;
    // Known to the redaction of outside text and log lines (core/redact.ts).
    if (options.register !== false) registerSecret(value);
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return '[redacted]';
  }

  toJSON(): string {
    return '[redacted]';
  }

  [inspect.custom](): string {
    return `Secret([redacted] from ${this.origin})`;
  }
}

/**
 * How a secret is given in the YAML: `{env: NAME}` (the variable NAME, or the file named by
 * NAME_FILE, Docker-secrets style), `{file: PATH}`, or a literal string (allowed for a lab; `check`
 * warns about it). A secret setting with a default env name never needs to appear in the YAML.
 */
export const secretRefSchema = z.union([
  z.string().min(1),
  z.strictObject({ env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: 'must be an environment variable name' }) }),
  z.strictObject({ file: z.string().min(1).max(4_096).refine((p) => !p.includes('\u0000'), { error: 'must be a file path (it holds a NUL character)' }) }),
]);
export type SecretRef = z.infer<typeof secretRefSchema>;

export type SecretResolution = { ok: true; secret: Secret } | { ok: false; problem: string };

/** Largest secret file read: a secret is a few dozen bytes, a PEM passphrase or token a few hundred. */
export const MAX_SECRET_FILE_BYTES = 64 * 1024;
/** Longest a secret file read may take; a regular file on a local disk takes microseconds. */
export const SECRET_READ_TIMEOUT_MS = 2_000;

export function resolveSecret(ref: SecretRef, env: NodeJS.ProcessEnv = process.env, register = true): SecretResolution {
  if (typeof ref === 'string') return { ok: true, secret: new Secret(ref, 'config file', { ref, register }) };
  if ('file' in ref) return readSecretFile(ref.file, `file ${ref.file}`, ref, register);
  const direct = env[ref.env];
  if (direct !== undefined && direct !== '') return { ok: true, secret: new Secret(direct, `env ${ref.env}`, { ref, register }) };
  const fileVar = `${ref.env}_FILE`;
  const path = env[fileVar];
  if (path !== undefined && path !== '') return readSecretFile(path, `file ${path} (from ${fileVar})`, ref, register);
  return { ok: false, problem: `environment variable ${ref.env} is not set (nor ${fileVar})` };
}

/**
 * Reads a secret file, which must be a regular file of at most MAX_SECRET_FILE_BYTES
 * (`{file: /dev/zero}` grew the process by 1 GB/s and `{file: <FIFO>}` froze it). The file is opened
 * non-blocking, so a FIFO without a writer cannot stall the open, and judged by `fstat` of the open
 * descriptor (not of the path, which could be swapped in between). A regular file never waits for
 * a writer, so the bounded read loop ends; its deadline covers a slow disk between reads.
 */
function readSecretFile(path: string, origin: string, ref: SecretRef, register: boolean): SecretResolution {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return { ok: false, problem: `secret file ${path} cannot be read (${code})` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { ok: false, problem: `secret file ${path} is ${kindOf(stat)}, not a regular file; a secret file holds the secret and nothing else` };
    if (stat.size > MAX_SECRET_FILE_BYTES) return { ok: false, problem: `secret file ${path} is ${stat.size} bytes, more than the ${MAX_SECRET_FILE_BYTES / 1024} KiB a secret file may have` };
    const buf = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1);
    const deadline = performance.now() + SECRET_READ_TIMEOUT_MS;
    let length = 0;
    for (;;) {
      const n = readSync(fd, buf, length, buf.length - length, null);
      length += n;
      if (n === 0 || length === buf.length) break;
      if (performance.now() > deadline) return { ok: false, problem: `secret file ${path} took more than ${SECRET_READ_TIMEOUT_MS} ms to read` };
    }
    if (length > MAX_SECRET_FILE_BYTES) return { ok: false, problem: `secret file ${path} is more than the ${MAX_SECRET_FILE_BYTES / 1024} KiB a secret file may have` };
    // Trailing newlines are an artefact of `echo secret > file`, never part of the secret.
    const value = buf.toString('utf8', 0, length).replace(/[\r\n]+$/, '');
    if (value.length === 0) return { ok: false, problem: `secret file ${path} is empty` };
    return { ok: true, secret: new Secret(value, origin, { ref, register }) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return { ok: false, problem: `secret file ${path} cannot be read (${code})` };
  } finally {
    closeSync(fd);
  }
}

function kindOf(stat: Stats): string {
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO (named pipe)';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * How the secret settings of a configuration being validated are treated:
 * - `all` (run, reload, Apply): resolved, and a missing variable or unreadable file is a problem;
 * - `available`: resolved where possible, else empty (commands that need only paths and ports);
 * - `none` (the console's dry-run check): never resolved, no variable read, no file opened: only
 *   the reference's form is validated.
 * `register: false` leaves the values out of the log redaction until the configuration is applied.
 */
interface SecretMode {
  resolve: 'all' | 'available' | 'none';
  register: boolean;
}
let mode: SecretMode = { resolve: 'all', register: true };

function withSecretMode<T>(next: Partial<SecretMode>, fn: () => T): T {
  const saved = mode;
  mode = { ...mode, ...next };
  try {
    return fn();
  } finally {
    mode = saved;
  }
}

/**
 * Runs `fn` (a config validation) accepting secrets that cannot be resolved here: for commands
 * that only read paths and ports from the gateway's file (annotate, set-aside, backup) and run in a
 * shell without the gateway's secrets. Such a secret is empty and says so in its origin.
 */
export function withoutRequiredSecrets<T>(fn: () => T): T {
  return withSecretMode({ resolve: 'available' }, fn);
}

/**
 * Runs `fn` (a dry-run validation) without resolving any secret: no environment variable or file
 * is read, nothing is registered for redaction. Every `{env}`/`{file}` secret is empty
 * (`unresolved ...` origin); a literal keeps its value for checks such as the api_token length.
 */
export function withoutReadingSecrets<T>(fn: () => T): T {
  return withSecretMode({ resolve: 'none', register: false }, fn);
}

/** Runs `fn` (a validation whose result may not be applied) resolving secrets without registering them; see `registerSecretsOf`. */
export function withDeferredRegistration<T>(fn: () => T): T {
  return withSecretMode({ register: false }, fn);
}

/** Registers every Secret in a configuration for the redaction of log lines: when it is applied. */
export function registerSecretsOf(value: unknown, depth = 0): void {
  if (value instanceof Secret) {
    if (!value.origin.startsWith('unresolved')) registerSecret(value.reveal());
  } else if (Array.isArray(value)) {
    for (const v of value) registerSecretsOf(v, depth + 1);
  } else if (value && typeof value === 'object' && depth < 64) {
    for (const v of Object.values(value)) registerSecretsOf(v, depth + 1);
  }
}

/**
 * Schema of a secret setting. The output is a resolved `Secret`; a missing environment variable or
 * unreadable file is a validation issue on the setting's path, so the operator reads
 * `service.auth.client_secret: environment variable GATEWAY_CLIENT_SECRET is not set ...`.
 */
export function secretSchema(defaultEnv?: string) {
  const base = defaultEnv ? secretRefSchema.default({ env: defaultEnv }) : secretRefSchema;
  return base.transform((ref, ctx) => {
    if (mode.resolve === 'none') {
      return typeof ref === 'string' ? new Secret(ref, 'config file', { ref, register: false }) : new Secret('', 'unresolved (not read by a dry-run check)', { ref, register: false });
    }
    const r = resolveSecret(ref, process.env, mode.register);
    if (!r.ok && mode.resolve === 'available') return new Secret('', `unresolved (${r.problem})`, { ref, register: false });
    if (!r.ok) {
      ctx.issues.push({ code: 'custom', message: r.problem, input: '[secret]' });
      return z.NEVER;
    }
    return r.secret;
  });
}
