import { readFileSync } from 'node:fs';
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

  constructor(value: string, origin: string) {
    this.#value = value;
    this.origin = origin;
    // Known to the redaction of outside text and log lines (core/redact.ts, issue 12 §3).
    registerSecret(value);
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
  z.strictObject({ file: z.string().min(1) }),
]);
export type SecretRef = z.infer<typeof secretRefSchema>;

export type SecretResolution = { ok: true; secret: Secret } | { ok: false; problem: string };

export function resolveSecret(ref: SecretRef, env: NodeJS.ProcessEnv = process.env): SecretResolution {
  if (typeof ref === 'string') return { ok: true, secret: new Secret(ref, 'config file') };
  if ('file' in ref) return readSecretFile(ref.file, `file ${ref.file}`);
  const direct = env[ref.env];
  if (direct !== undefined && direct !== '') return { ok: true, secret: new Secret(direct, `env ${ref.env}`) };
  const fileVar = `${ref.env}_FILE`;
  const path = env[fileVar];
  if (path !== undefined && path !== '') return readSecretFile(path, `file ${path} (from ${fileVar})`);
  return { ok: false, problem: `environment variable ${ref.env} is not set (nor ${fileVar})` };
}

function readSecretFile(path: string, origin: string): SecretResolution {
  try {
    // Trailing newlines are an artefact of `echo secret > file`, never part of the secret.
    const value = readFileSync(path, 'utf8').replace(/[\r\n]+$/, '');
    if (value.length === 0) return { ok: false, problem: `secret file ${path} is empty` };
    return { ok: true, secret: new Secret(value, origin) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return { ok: false, problem: `secret file ${path} cannot be read (${code})` };
  }
}

let secretsRequired = true;

/**
 * Runs `fn` (a config validation) accepting secrets that cannot be resolved here: for commands
 * that only read paths and ports from the gateway's file (annotate, set-aside, backup) and run in a
 * shell without the gateway's secrets. Such a secret is empty and says so in its origin.
 */
export function withoutRequiredSecrets<T>(fn: () => T): T {
  secretsRequired = false;
  try {
    return fn();
  } finally {
    secretsRequired = true;
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
    const r = resolveSecret(ref);
    if (!r.ok && !secretsRequired) return new Secret('', `unresolved (${r.problem})`);
    if (!r.ok) {
      ctx.issues.push({ code: 'custom', message: r.problem, input: '[secret]' });
      return z.NEVER;
    }
    return r.secret;
  });
}
