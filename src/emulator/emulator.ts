import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock, type Clock } from '../core/clock.js';
import { silentLogger, type Logger } from '../core/logger.js';
import { Auth } from './auth.js';
import { BASE_PATH, DEFAULT_JOB_PROCESSING_DELAY_MS, DEFAULT_JOURNAL_SIZE, DEFAULT_RATE_LIMIT_PER_MINUTE, DEFAULT_TOKEN_TTL_SECONDS, TOKEN_PATH } from './contract.js';
import { FaultState, parseFaults, type Faults, type FaultSetting } from './faults.js';
import { RequestJournal, type JournalEntry, type JournalQuery } from './journal.js';
import { publicFixture, seedStore } from './seed.js';
import { loadFixture, type Fixture, type FixtureIndex, type FixtureInput } from './fixture.js';
import { ImportJobs } from './import-jobs.js';
import { Inspector } from './inspect.js';
import { SlidingWindowRateLimiter } from './rate-limit.js';
import { tokenHandler, trackingRoutes } from './routes.js';
import { guardEmulatorConnections } from './connections.js';
import { createEmulatorServer } from './server.js';
import { Store, type AnnotationResponse, type EmulatorStats, type ImportJobView, type StoredValue, type ValueView } from './store.js';

/**
 * startEmulator: wires fixture, store, auth, rate limit, faults and import jobs into one HTTP
 * server and returns the handle tests and benchmarks drive it with.
 */

export interface EmulatorOptions {
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** Port; 0 (the default) picks a free one. */
  port?: number;
  /** Fixture object or path to a JSON/YAML file; default the demo fixture (demo-fixture.ts). */
  fixture?: Fixture | FixtureInput | string;
  /** Token lifetime, `expires_in` (default 3600). */
  tokenTtlSeconds?: number;
  /** Requests per minute per client IP, all endpoints (default 1500, §8); 0 disables the limit. */
  rateLimitPerMinute?: number;
  /** Time an import job stays `accepted`, and at least `processing` (default 500 ms). */
  jobProcessingDelayMs?: number;
  /** Logs start/stop at info and failures at error; nothing per request above debug. Default: silent. */
  logger?: Logger;
  /** Time source (tests): `now` for timestamps, `monotonic` for expiry, windows and outages. */
  clock?: Clock;
  /** Random source in [0, 1) for the fractional faults (tests make it deterministic). */
  random?: () => number;
  /** Largest number of error objects listed in a job's `errors` (default 1000). */
  maxJobErrors?: number;
  /** Faults set from the start (same fields as POST /_emulator/faults; `--fault` on the command line). */
  faults?: FaultSetting;
  /** Origins whose browser requests are answered with CORS headers (`*` = any); default none. */
  corsOrigins?: string[];
  /** Requests kept by the journal, GET /_emulator/requests (default 500; 0 keeps none). */
  journalSize?: number;
  /**
   * Most open connections at once (default 1024, lowered to what the open-file limit leaves):
   * beyond it the oldest idle or half-sent connection of the client address holding the most is
   * closed for a newcomer (http/connection-guard.ts).
   */
  maxConnections?: number;
  /** Most open connections at once from one client address (default 256: many gateways on one test machine share 127.0.0.1). */
  maxConnectionsPerClient?: number;
  /** A request's headers must be complete this long after its connection opened, else 408 (default 30 s). */
  headerTimeoutMs?: number;
}

/** What POST /_emulator/reset clears besides the stored data (which goes back to the fixture's seeds). */
export interface ResetOptions {
  /** Forget every issued token (they answer 401 afterwards). */
  tokens?: boolean;
  /** Clear every fault, as DELETE /_emulator/faults. */
  faults?: boolean;
}

export interface EmulatorHandle {
  /** `http://127.0.0.1:PORT/tracking/v1` */
  baseUrl: string;
  /** `http://127.0.0.1:PORT`; the token endpoint is authUrl + '/oauth2/token'. */
  authUrl: string;
  tokenUrl: string;
  /** `http://127.0.0.1:PORT/_emulator` */
  inspectUrl: string;
  port: number;
  /** Folder holding uploaded import-job files while their jobs run (removed on close). */
  tempDir: string;
  /** The validated, indexed fixture. */
  fixture: FixtureIndex;
  /** Merges a fault setting (same fields and rules as POST /_emulator/faults); throws on a bad value. */
  setFaults(f: FaultSetting | Record<string, unknown>): void;
  clearFaults(): void;
  faults(): Faults;
  stats(): EmulatorStats;
  /**
   * Clears stored values, annotations, import jobs, counters, the request journal and rate-limit
   * windows, then puts the fixture's seeds back; tokens and faults too when asked.
   */
  reset(opts?: ResetOptions): Promise<void>;
  /** Expires every issued token now (POST /_emulator/tokens/expire); returns how many were valid. */
  expireTokens(): number;
  /** The request journal (GET /_emulator/requests), oldest first. */
  requests(q?: JournalQuery): JournalEntry[];
  /** Stored values of one variable, sorted by timestamp. */
  values(machineVariableId: string): ValueView[];
  /** One stored value by variable and timestamp (ISO with offset, or epoch ms). */
  value(machineVariableId: string, timestamp: string | number): StoredValue | undefined;
  /** Number of stored values per variable. */
  valueCounts(): Record<string, number>;
  annotations(): Array<AnnotationResponse & { organisation_id: string }>;
  importJobs(): Array<ImportJobView & { organisation_id: string }>;
  importJob(jobId: string): ImportJobView | undefined;
  /** Resolves when the job is `finished` or `failed` (rejects after `timeoutMs`, default 30 s). */
  waitForJob(jobId: string, timeoutMs?: number): Promise<ImportJobView>;
  /** Connections refused or closed by the connection limits, by reason (as gateway_http_connections_refused_total). */
  connectionsRefused(): Record<string, number>;
  close(): Promise<void>;
}

export async function startEmulator(opts: EmulatorOptions = {}): Promise<EmulatorHandle> {
  const fixture = loadFixture(opts.fixture);
  const clock = opts.clock ?? systemClock;
  const logger = opts.logger ?? silentLogger();
  const random = opts.random ?? Math.random;
  const host = opts.host ?? '127.0.0.1';
  const ttl = opts.tokenTtlSeconds ?? DEFAULT_TOKEN_TTL_SECONDS;
  if (!(Number.isInteger(ttl) && ttl >= 1)) throw new RangeError(`tokenTtlSeconds: ${ttl} is not a whole number of seconds >= 1`);
  const rate = opts.rateLimitPerMinute ?? DEFAULT_RATE_LIMIT_PER_MINUTE;
  if (!(Number.isInteger(rate) && rate >= 0)) throw new RangeError(`rateLimitPerMinute: ${rate} is not a whole number >= 0`);
  const delay = opts.jobProcessingDelayMs ?? DEFAULT_JOB_PROCESSING_DELAY_MS;
  if (!(Number.isFinite(delay) && delay >= 0)) throw new RangeError(`jobProcessingDelayMs: ${delay} is not a number of ms >= 0`);

  const tmpDir = await mkdtemp(join(tmpdir(), 'edge-gateway-emulator-'));
  const now = () => clock.now();
  const monotonic = () => clock.monotonic();
  const store = new Store();
  seedStore(fixture, store, now);
  const faults = new FaultState(monotonic, random);
  if (opts.faults) faults.set(parseFaults(opts.faults));
  const journal = new RequestJournal(opts.journalSize ?? DEFAULT_JOURNAL_SIZE);
  const limiter = new SlidingWindowRateLimiter(rate, monotonic, undefined, () => faults.neighbourPerMinute);
  const auth = new Auth(fixture, ttl, monotonic);
  const jobs = new ImportJobs({ store, faults, now, delayMs: delay, tmpDir, logger, maxErrors: opts.maxJobErrors });
  const reset = async (r: ResetOptions = {}) => {
    await jobs.cancelAll();
    store.reset();
    limiter.reset();
    journal.clear();
    seedStore(fixture, store, now);
    if (r.tokens) auth.clear();
    if (r.faults) faults.clear();
  };
  const stats = (): EmulatorStats => ({ ...store.stats(), neighbour: { admitted: limiter.neighbourAdmitted, rate_limited: limiter.neighbourRefused } });
  const inspector = new Inspector({
    stats,
    fixture,
    store,
    faults,
    reset,
    journal,
    expireTokens: () => auth.expireAll(),
    publicFixture: () => publicFixture(fixture),
  });
  const server = createEmulatorServer({
    store,
    auth,
    limiter,
    faults,
    jobs,
    inspector,
    trackingRoutes: trackingRoutes({ fixture, store, jobs, now, wording: () => faults.refusalWording }),
    tokenHandler: tokenHandler(auth, store),
    logger,
    journal,
    corsOrigins: opts.corsOrigins ?? [],
    now,
    headerTimeoutMs: opts.headerTimeoutMs,
  });
  const connectionsRefused = guardEmulatorConnections(server, { maxConnections: opts.maxConnections, maxConnectionsPerClient: opts.maxConnectionsPerClient, logger });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch(async (err) => {
    await rm(tmpDir, { recursive: true, force: true });
    throw err;
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  const authUrl = `http://${urlHost}:${port}`;
  const baseUrl = authUrl + BASE_PATH;
  logger.info({ baseUrl, tokenUrl: authUrl + TOKEN_PATH, organisations: fixture.organisations.size, machine_variables: fixture.variables.size }, 'tracking-service emulator listening');

  let closed: Promise<void> | null = null;
  const toEpoch = (t: string | number) => (typeof t === 'number' ? t : Date.parse(t));

  return {
    baseUrl,
    authUrl,
    tokenUrl: authUrl + TOKEN_PATH,
    inspectUrl: `${authUrl}/_emulator`,
    port,
    tempDir: tmpDir,
    fixture,
    setFaults: (f) => faults.set(parseFaults(f)),
    clearFaults: () => faults.clear(),
    faults: () => faults.get(),
    stats,
    reset,
    expireTokens: () => auth.expireAll(),
    requests: (q) => journal.list(q, BASE_PATH).requests,
    values: (id) => store.valuesOf(id),
    value: (id, t) => {
      const v = store.get(id, toEpoch(t));
      return v && { ...v };
    },
    valueCounts: () => store.valueCounts(),
    connectionsRefused,
    annotations: () => store.annotations.map((a) => ({ organisation_id: a.organisation_id, ...a.annotation })),
    importJobs: () => [...store.jobs.values()].map((j) => ({ organisation_id: j.organisationId, ...j.view })),
    importJob: (id) => {
      const j = store.jobs.get(id);
      return j && { ...j.view };
    },
    waitForJob: async (id, timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const j = store.jobs.get(id);
        if (!j) throw new Error(`unknown import job "${id}"`);
        if (j.view.status === 'finished' || j.view.status === 'failed') return { ...j.view };
        if (Date.now() > deadline) throw new Error(`import job "${id}" still ${j.view.status} after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    close: () =>
      (closed ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await jobs.cancelAll();
        await rm(tmpDir, { recursive: true, force: true });
        logger.info({ baseUrl }, 'tracking-service emulator stopped');
      })()),
  };
}
