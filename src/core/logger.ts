import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';
import { createRequire } from 'node:module';
import type pinoPretty from 'pino-pretty';
import { redactJsonLine } from './redact.js';

export type { Logger };

/**
 * Field names whose values never reach a log line, whatever object they sit in. Secrets are also
 * wrapped in `Secret` (config/secrets.ts), which prints as `[redacted]`; this list is the second
 * line of defence for raw values (headers, error bodies echoed by a peer).
 */
export const REDACTED_KEYS = [
  'password',
  'client_secret',
  'clientSecret',
  'secret',
  'api_key',
  'apiKey',
  'secondary_api_key',
  'api_token',
  'apiToken',
  'token',
  'access_token',
  'refresh_token',
  'cookie',
  'authorization',
  'Authorization',
  'passphrase',
  'private_key',
];

export interface LoggerSettings {
  level?: string;
  /** `json` always, `pretty` always, or `auto`: pretty when stdout is a terminal. */
  format?: 'json' | 'pretty' | 'auto';
  name?: string;
  /** Where lines go; defaults to stdout. Tests pass a stream to capture and grep. */
  destination?: DestinationStream;
}

export function createLogger(settings: LoggerSettings = {}): Logger {
  const options: LoggerOptions = {
    level: settings.level ?? process.env.LOG_LEVEL ?? 'info',
    base: settings.name ? { name: settings.name } : undefined,
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [...REDACTED_KEYS, ...REDACTED_KEYS.map((k) => `*.${k}`), ...REDACTED_KEYS.map((k) => `*.*.${k}`)],
      censor: '[redacted]',
    },
    formatters: { level: (label) => ({ level: label }) },
    // Value-based redaction of the finished line: configured secrets and Bearer credentials that
    // arrive inside outside text (an upstream error echoing request headers), issue 12 §3; only
    // inside the line's strings, so the line stays JSON whatever a secret looks like (issue 21 §3).
    hooks: { streamWrite: redactJsonLine },
  };
  const format = settings.format ?? 'auto';
  const wantPretty = format === 'pretty' || (format === 'auto' && !settings.destination && process.stdout.isTTY === true);
  if (wantPretty) {
    // Loaded only for a terminal: a gateway logging JSON in its container does not carry it (31 modules).
    const pretty = createRequire(import.meta.url)('pino-pretty') as typeof pinoPretty;
    return pino(options, pretty({ colorize: true, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
  }
  // Synchronous writes to stdout: pino's default destination writes asynchronously and keeps what
  // arrives meanwhile in memory, so a SIGKILL, an OOM kill or a power cut loses the last lines: the
  // ones that explain the crash, and the drop_oldest announcements that are written inside the
  // transaction before it commits (the crash harness counts on them; with the async default its
  // drop mode reported samples as lost that had been dropped and logged). Log volume is small (every
  // repeated line is throttled), so the cost is negligible.
  return settings.destination ? pino(options, settings.destination) : pino(options, pino.destination({ dest: 1, sync: true }));
}

/** A logger that writes nothing; for tests and tools that do not want output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
