import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';
import pretty from 'pino-pretty';
import { redact } from './redact.js';

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
    // arrive inside outside text (an upstream error echoing request headers), issue 12 §3.
    hooks: { streamWrite: redact },
  };
  const format = settings.format ?? 'auto';
  const wantPretty = format === 'pretty' || (format === 'auto' && !settings.destination && process.stdout.isTTY === true);
  if (wantPretty) {
    return pino(options, pretty({ colorize: true, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
  }
  return settings.destination ? pino(options, settings.destination) : pino(options);
}

/** A logger that writes nothing; for tests and tools that do not want output. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
