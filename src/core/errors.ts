/**
 * Errors with a stable `code` and an optional `cause` (habit taken from undici's
 * lib/core/errors.js): the code is what tests, metrics and operators key on; the message is for
 * people and may change.
 */
export class GatewayError extends Error {
  readonly code: string;
  readonly details?: Record<string, unknown>;

  constructor(code: string, message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.code = code;
    if (options.details) this.details = options.details;
  }
}

/** A configuration problem found at load or start-up. The message names the setting and value. */
export class ConfigError extends GatewayError {
  readonly problems: string[];
  /** The configuration file the problems are in, when they come from one (name the file). */
  file?: string;

  constructor(problems: string[], options: { cause?: unknown; file?: string } = {}) {
    super('CONFIG_INVALID', problems.length === 1 ? problems[0] : `${problems.length} problems:\n  ${problems.join('\n  ')}`, options);
    this.name = 'ConfigError';
    this.problems = problems;
    if (options.file) this.file = options.file;
  }
}

/** Best-effort one-line description of anything thrown, without stack. */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const prefix = typeof code === 'string' && !err.message.includes(code) ? `${code}: ` : '';
    return prefix + err.message;
  }
  return String(err);
}

/** The `code` of an error if it has a string one, else a fallback. */
export function errorCode(err: unknown, fallback = 'UNKNOWN'): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length > 0 ? code : fallback;
}
