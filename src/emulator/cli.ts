import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { createLogger } from '../core/logger.js';
import { describeError } from '../core/errors.js';
import { DEFAULT_JOB_PROCESSING_DELAY_MS, DEFAULT_RATE_LIMIT_PER_MINUTE, DEFAULT_TOKEN_TTL_SECONDS } from './contract.js';
import { DEMO_API_KEY, DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, DEMO_ORGANISATION_ID } from './demo-fixture.js';
import { DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT } from './connections.js';
import { startEmulator, type EmulatorOptions } from './emulator.js';
import { parseFaultFlags } from './faults.js';
import { DEFAULT_JOURNAL_SIZE } from './contract.js';

/** Default port of `edge-gateway emulator` when --port is not given [A]. */
export const DEFAULT_CLI_PORT = 8780;

export const EMULATOR_USAGE = `Usage: edge-gateway emulator [--port N] [--host H] [--fixture FILE] [--token-ttl SECONDS]
                             [--rate-limit PER_MIN] [--job-delay MS] [--fault NAME=VALUE ...]
                             [--cors ORIGIN ...] [--journal-size N] [--max-connections N]
                             [--max-connections-per-client N] [--log-level LEVEL]

Runs the tracking-service emulator: the slice of the tracking service the gateway uses
(token endpoint, machine-data batch and import jobs, annotations, machines and machine
variables), plus an inspection and fault API under /_emulator/. Stops on Ctrl-C (SIGINT) or SIGTERM.

Options:
  --port N              port to listen on; 0 picks a free port (default ${DEFAULT_CLI_PORT})
  --host H              interface to listen on (default 127.0.0.1)
  --fixture FILE        organisations, sites, machines, variables and credentials (JSON or YAML);
                        default: the built-in demo fixture
  --token-ttl SECONDS   lifetime of issued tokens (default ${DEFAULT_TOKEN_TTL_SECONDS})
  --rate-limit PER_MIN  requests per minute per client IP, all endpoints together
                        (default ${DEFAULT_RATE_LIMIT_PER_MINUTE}; 0 disables the limit)
  --job-delay MS        time an import job stays accepted, and at least processing (default ${DEFAULT_JOB_PROCESSING_DELAY_MS})
  --fault NAME=VALUE    a fault from the start, as POST /_emulator/faults sets it (repeatable):
                        error_rate=0.2  status=503  latency_ms=200  drop_connection_rate=0.1
                        outage_seconds=30  force_429_seconds=10  job_failure_rate=0.5
                        paths=/machine-data/batch,/oauth2/token
                        fail_next=COUNT[:STATUS|:drop][@PATH]  e.g. fail_next=3:503@/machine-data/batch
  --cors ORIGIN         answer browser requests from ORIGIN (repeatable; * for any origin)
  --journal-size N      requests kept in the journal, GET /_emulator/requests (default ${DEFAULT_JOURNAL_SIZE}; 0 keeps none)
  --max-connections N   most open connections at once (default ${DEFAULT_MAX_CONNECTIONS}, lowered to what the open-file
                        limit leaves); beyond it the oldest idle or half-sent connection of the client
                        address holding the most is closed for a newcomer
  --max-connections-per-client N
                        most open connections at once from one client address (default ${DEFAULT_MAX_CONNECTIONS_PER_CLIENT};
                        raise it when many gateways on one machine share an address)
  --log-level LEVEL     JSON log lines on stderr: info (default, or $LOG_LEVEL), debug (one line per request),
                        warn, error, silent
  -h, --help            show this text

The start-up text goes to stdout; log lines (JSON) go to stderr.

Guide: src/emulator/README.md`;

export interface CliIo {
  stdout?: (line: string) => void;
  stderr?: (line: string) => void;
  /** Stops the emulator like SIGINT (tests). */
  signal?: AbortSignal;
  /** Listen for SIGINT/SIGTERM (default true). */
  handleSignals?: boolean;
}

class UsageError extends Error {}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

function integer(flag: string, raw: string | undefined, min: number, max: number, what: string): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw.trim())) throw new UsageError(`--${flag}: "${raw}" is not ${what}`);
  const n = Number(raw);
  if (n < min || n > max) throw new UsageError(`--${flag}: ${raw} is not ${what}`);
  return n;
}

/** Rewrites node:util parseArgs errors so they name the flag (and the value). */
function usageFromParseError(err: unknown): UsageError {
  const e = err as { code?: string; message?: string };
  const msg = e.message ?? String(err);
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const flag = /'([^']+)'/.exec(msg)?.[1] ?? msg;
    return new UsageError(`unknown flag ${flag}`);
  }
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const flag = /--([a-z-]+)/.exec(msg)?.[1];
    if (!flag) return new UsageError(msg);
    // parseArgs calls a value starting with "-" ambiguous (`--port -1`).
    const hint = msg.includes('ambiguous') ? ` (to give a value starting with "-", write --${flag}=VALUE)` : '';
    return new UsageError(`--${flag}: a value is required${hint}`);
  }
  if (e.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    const arg = /'([^']+)'/.exec(msg)?.[1] ?? msg;
    return new UsageError(`unexpected argument "${arg}"`);
  }
  return new UsageError(msg);
}

/**
 * `edge-gateway emulator ...`; `argv` is what follows the command name. Returns the exit code:
 * 0 after a clean stop (or --help), 2 for bad flags or a bad fixture, 1 when it cannot start.
 */
export async function runEmulatorCli(argv: string[], io: CliIo = {}): Promise<number> {
  const out = io.stdout ?? ((s: string) => process.stdout.write(`${s}\n`));
  const err = io.stderr ?? ((s: string) => process.stderr.write(`${s}\n`));

  let opts: EmulatorOptions;
  let logLevel = 'info';
  try {
    let values;
    try {
      ({ values } = parseArgs({
        args: argv,
        strict: true,
        allowPositionals: false,
        options: {
          port: { type: 'string' },
          host: { type: 'string' },
          fixture: { type: 'string' },
          'token-ttl': { type: 'string' },
          'rate-limit': { type: 'string' },
          'job-delay': { type: 'string' },
          fault: { type: 'string', multiple: true },
          cors: { type: 'string', multiple: true },
          'journal-size': { type: 'string' },
          'max-connections': { type: 'string' },
          'max-connections-per-client': { type: 'string' },
          'log-level': { type: 'string' },
          help: { type: 'boolean', short: 'h' },
        },
      }));
    } catch (e) {
      throw usageFromParseError(e);
    }
    if (values.help) {
      out(EMULATOR_USAGE);
      return 0;
    }
    if (values.host !== undefined && values.host.trim() === '') throw new UsageError('--host: must not be empty');
    if (values.fixture !== undefined && values.fixture.trim() === '') throw new UsageError('--fixture: must not be empty');
    const level = values['log-level'] ?? process.env.LOG_LEVEL ?? 'info';
    if (!LOG_LEVELS.includes(level)) throw new UsageError(`--log-level: "${level}"${values['log-level'] === undefined ? ' (from $LOG_LEVEL)' : ''} is not one of ${LOG_LEVELS.join(', ')}`);
    logLevel = level;
    let faults;
    try {
      faults = values.fault?.length ? parseFaultFlags(values.fault) : undefined;
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    for (const origin of values.cors ?? []) {
      if (origin !== '*' && !/^https?:\/\/[^/\s]+$/.test(origin)) throw new UsageError(`--cors: "${origin}" is not an origin (scheme://host[:port], no path) or *`);
    }
    opts = {
      faults,
      corsOrigins: values.cors,
      journalSize: integer('journal-size', values['journal-size'], 0, 100_000, 'a number of requests (0 to 100000)'),
      port: integer('port', values.port, 0, 65_535, 'a port number (0 to 65535)') ?? DEFAULT_CLI_PORT,
      host: values.host,
      fixture: values.fixture,
      tokenTtlSeconds: integer('token-ttl', values['token-ttl'], 1, 31_536_000, 'a number of seconds (1 or more)'),
      rateLimitPerMinute: integer('rate-limit', values['rate-limit'], 0, 1_000_000_000, 'a number of requests per minute (0 disables the limit)'),
      jobProcessingDelayMs: integer('job-delay', values['job-delay'], 0, 3_600_000, 'a number of milliseconds (0 or more)'),
      maxConnections: integer('max-connections', values['max-connections'], 8, 1_000_000, 'a number of connections (8 to 1000000)'),
      maxConnectionsPerClient: integer('max-connections-per-client', values['max-connections-per-client'], 1, 1_000_000, 'a number of connections (1 to 1000000)'),
    };
  } catch (e) {
    if (e instanceof UsageError) {
      err(`edge-gateway emulator: ${e.message}`);
      err('Run "edge-gateway emulator --help" for the flags.');
      return 2;
    }
    throw e;
  }

  // Log lines go to stderr so that stdout carries only the human start-up text (and a script can
  // read the URLs from it); one JSON line per request at debug.
  const logger = createLogger({ name: 'emulator', level: logLevel, format: 'json', destination: pino.destination({ fd: 2, sync: true }) });
  let emulator;
  try {
    emulator = await startEmulator({ ...opts, logger });
  } catch (e) {
    const code = (e as { code?: string }).code;
    err(`edge-gateway emulator: ${describeError(e)}`);
    return code === 'CONFIG_INVALID' ? 2 : 1;
  }

  out('Tracking-service emulator running');
  out(`  base URL:   ${emulator.baseUrl}`);
  out(`  auth URL:   ${emulator.authUrl}`);
  out(`  token URL:  ${emulator.tokenUrl}`);
  out(`  inspection: ${emulator.inspectUrl}/stats  (requests: ${emulator.inspectUrl}/requests, faults: ${emulator.inspectUrl}/faults)`);
  const faultsNow = emulator.faults();
  if (opts.faults) out(`Faults set: ${JSON.stringify(faultsNow)}`);
  if (opts.corsOrigins?.length) out(`CORS: browser requests allowed from ${opts.corsOrigins.join(', ')}`);
  if (opts.fixture === undefined) {
    out('Demo fixture credentials:');
    out(`  organisation (Service-Organisation-Id): ${DEMO_ORGANISATION_ID}`);
    out(`  client_id: ${DEMO_CLIENT_ID}   client_secret: ${DEMO_CLIENT_SECRET}`);
    out(`  API key:   ${DEMO_API_KEY}`);
  }
  out('Press Ctrl-C to stop.');

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      io.signal?.removeEventListener('abort', stop);
      resolve();
    };
    if (io.handleSignals !== false) {
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    }
    if (io.signal?.aborted) stop();
    else io.signal?.addEventListener('abort', stop, { once: true });
  });
  await emulator.close();
  out('Tracking-service emulator stopped');
  return 0;
}
