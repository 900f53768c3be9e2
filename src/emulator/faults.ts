import { z } from 'zod';
import { formatIssues } from '../config/issues.js';
import { BASE_PATH } from './contract.js';

/**
 * Fault injection [A, emulator only]: makes the emulator misbehave the ways CONTRACT.md's error
 * table says the gateway must survive (5xx, timeouts, resets, 429, failed import jobs). Faults never
 * apply to `/_emulator/*`. Settings merge: setting some fields leaves the others as they are.
 */
export interface Faults {
  /** Fraction (0-1) of requests answered with `status` instead of being processed. */
  error_rate: number;
  /** Status of the injected errors (default 500). */
  status: number;
  /** Delay added before every request is handled. */
  latency_ms: number;
  /** Fraction (0-1) of requests whose socket is destroyed without an answer. */
  drop_connection_rate: number;
  /** For this many seconds (from when it is set) every request's socket is destroyed. Read back: seconds left. */
  outage_seconds: number;
  /** For this many seconds every request is answered 429 with Retry-After. Read back: seconds left. */
  force_429_seconds: number;
  /** Fraction (0-1) of import jobs that end `failed` even with a good file. */
  job_failure_rate: number;
  /**
   * Another client behind the same address (a second gateway, a script on the same NAT): it spends
   * this many requests per minute of every client address's rate limit, paced evenly, admitted
   * when its window has room like any request (§8: the limit is per IP, all clients together).
   */
  neighbour_per_minute: number;
  /**
   * How a refused batch item is worded: `detailed` names the item and the reason
   * (`items[17].machine_variable_id: unknown machine variable "mvr_x"`, the emulator's [A] form);
   * `terse` gives only what §7 promises, `{code: "bad_request", message}` with a message that names
   * neither the item nor the reason, as another implementation of the interface may.
   */
  refusal_wording: 'detailed' | 'terse';
  /** Path prefixes the faults apply to (full, or relative to /tracking/v1); null = every path. */
  paths: string[] | null;
  /**
   * "Fail the next N requests": one counter per path prefix (null = any path), each answered with
   * its own status or with a dropped connection. Read back: what is left of each counter.
   */
  fail_next: FailNext[];
}

/** One "fail the next N requests" counter. */
export interface FailNext {
  /** Requests still to fail. */
  count: number;
  /** Path prefix (full, or relative to /tracking/v1); null = any path. */
  path: string | null;
  /** Status of the answer (400-599), or "drop" to destroy the socket without an answer. */
  status: number | 'drop';
}

const rate = z.number().min(0).max(1);
const failNextSchema = z.strictObject({
  count: z.number().int().min(0).max(1_000_000),
  path: z.string().startsWith('/').nullable().optional(),
  status: z.union([z.number().int().min(400).max(599), z.literal('drop')]).optional(),
});
export const faultsSchema = z.strictObject({
  error_rate: rate.optional(),
  status: z.number().int().min(400).max(599).optional(),
  latency_ms: z.number().min(0).max(600_000).optional(),
  drop_connection_rate: rate.optional(),
  outage_seconds: z.number().min(0).max(86_400).optional(),
  force_429_seconds: z.number().min(0).max(86_400).optional(),
  job_failure_rate: rate.optional(),
  neighbour_per_minute: z.number().min(0).max(1_000_000).optional(),
  refusal_wording: z.enum(['detailed', 'terse']).optional(),
  paths: z.array(z.string().startsWith('/')).nullable().optional(),
  fail_next: z.union([failNextSchema, z.array(failNextSchema)]).optional(),
});

/** Validates a fault setting (HTTP body or in-process call); throws an Error naming the field. */
export type FaultSetting = Omit<Partial<Faults>, 'fail_next'> & { fail_next?: Array<{ count: number; path?: string | null; status?: number | 'drop' }> };

export function parseFaults(input: unknown): FaultSetting {
  const r = faultsSchema.safeParse(input);
  if (!r.success) throw new Error(formatIssues(r.error.issues, [], faultsSchema).join('; '));
  const { fail_next, ...rest } = r.data;
  return fail_next === undefined ? rest : { ...rest, fail_next: Array.isArray(fail_next) ? fail_next : [fail_next] };
}

/**
 * The command-line form of a fault setting (`--fault error_rate=0.2`, repeatable), the same fields
 * and rules as POST /_emulator/faults:
 *   error_rate, drop_connection_rate, job_failure_rate  a fraction 0-1
 *   status, latency_ms, outage_seconds, force_429_seconds, neighbour_per_minute  a number
 *   refusal_wording=detailed|terse
 *   paths=/machine-data/batch,/oauth2/token  comma-separated path prefixes
 *   fail_next=COUNT[:STATUS|:drop][@PATH]  e.g. fail_next=3:503@/machine-data/batch
 * Throws an Error naming the flag and the value.
 */
export function parseFaultFlags(flags: string[]): FaultSetting {
  const raw: Record<string, unknown> = {};
  const failNext: unknown[] = [];
  for (const flag of flags) {
    const eq = flag.indexOf('=');
    if (eq <= 0) throw new Error(`--fault ${flag}: expected NAME=VALUE (for example --fault error_rate=0.2)`);
    const name = flag.slice(0, eq).trim();
    const value = flag.slice(eq + 1).trim();
    if (name === 'paths') raw.paths = value === '' ? null : value.split(',').map((p) => p.trim());
    else if (name === 'refusal_wording') raw.refusal_wording = value;
    else if (name === 'fail_next') {
      const m = /^(\d+)(?::(\d+|drop))?(?:@(\/\S*))?$/.exec(value);
      if (!m) throw new Error(`--fault fail_next=${value}: expected COUNT[:STATUS|:drop][@PATH] (for example fail_next=3:503@/machine-data/batch)`);
      failNext.push({ count: Number(m[1]), ...(m[2] ? { status: m[2] === 'drop' ? 'drop' : Number(m[2]) } : {}), ...(m[3] ? { path: m[3] } : {}) });
    } else if (name in faultsSchema.shape) {
      if (value === '' || !Number.isFinite(Number(value))) throw new Error(`--fault ${name}=${value}: "${value}" is not a number`);
      raw[name] = Number(value);
    } else {
      throw new Error(`--fault ${name}: unknown fault (known: ${Object.keys(faultsSchema.shape).join(', ')})`);
    }
  }
  if (failNext.length) raw.fail_next = failNext;
  try {
    return parseFaults(raw);
  } catch (err) {
    throw new Error(`--fault: ${(err as Error).message}`);
  }
}

/** What a request meets; `cause` names the fault (request journal, logs). */
export type FaultAction =
  | { kind: 'none' }
  | { kind: 'destroy'; cause: string }
  | { kind: 'status'; status: number; cause: string }
  | { kind: 'force429'; retryAfterMs: number; cause: string };

/** A path prefix given in full or relative to /tracking/v1. */
function matches(path: string, prefix: string): boolean {
  return path.startsWith(prefix) || (path.startsWith(BASE_PATH) && path.slice(BASE_PATH.length).startsWith(prefix));
}

export class FaultState {
  private errorRate = 0;
  private status = 500;
  private latencyMs = 0;
  private dropRate = 0;
  private outageUntil = 0;
  private force429Until = 0;
  private jobFailureRate = 0;
  private neighbour = 0;
  private wording: Faults['refusal_wording'] = 'detailed';
  private paths: string[] | null = null;
  /** One counter per path (null key = any path); a counter at 0 is removed. */
  private failNext = new Map<string | null, { count: number; status: number | 'drop' }>();

  constructor(
    private readonly now: () => number,
    private readonly random: () => number,
  ) {}

  set(f: FaultSetting): void {
    const t = this.now();
    if (f.error_rate !== undefined) this.errorRate = f.error_rate;
    if (f.status !== undefined) this.status = f.status;
    if (f.latency_ms !== undefined) this.latencyMs = f.latency_ms;
    if (f.drop_connection_rate !== undefined) this.dropRate = f.drop_connection_rate;
    if (f.outage_seconds !== undefined) this.outageUntil = f.outage_seconds > 0 ? t + f.outage_seconds * 1000 : 0;
    if (f.force_429_seconds !== undefined) this.force429Until = f.force_429_seconds > 0 ? t + f.force_429_seconds * 1000 : 0;
    if (f.job_failure_rate !== undefined) this.jobFailureRate = f.job_failure_rate;
    if (f.neighbour_per_minute !== undefined) this.neighbour = f.neighbour_per_minute;
    if (f.refusal_wording !== undefined) this.wording = f.refusal_wording;
    if (f.paths !== undefined) this.paths = f.paths === null ? null : [...f.paths];
    for (const n of f.fail_next ?? []) {
      const key = n.path ?? null;
      if (n.count === 0) this.failNext.delete(key);
      else this.failNext.set(key, { count: n.count, status: n.status ?? f.status ?? this.status });
    }
  }

  clear(): void {
    this.errorRate = 0;
    this.status = 500;
    this.latencyMs = 0;
    this.dropRate = 0;
    this.outageUntil = 0;
    this.force429Until = 0;
    this.jobFailureRate = 0;
    this.neighbour = 0;
    this.wording = 'detailed';
    this.paths = null;
    this.failNext.clear();
  }

  get(): Faults {
    const t = this.now();
    const left = (until: number) => (until > t ? Math.round(until - t) / 1000 : 0);
    return {
      error_rate: this.errorRate,
      status: this.status,
      latency_ms: this.latencyMs,
      drop_connection_rate: this.dropRate,
      outage_seconds: left(this.outageUntil),
      force_429_seconds: left(this.force429Until),
      job_failure_rate: this.jobFailureRate,
      neighbour_per_minute: this.neighbour,
      refusal_wording: this.wording,
      paths: this.paths === null ? null : [...this.paths],
      fail_next: [...this.failNext].map(([path, n]) => ({ count: n.count, path, status: n.status })),
    };
  }

  /** Cheap test for the hot path: is any request fault set at all? */
  private anyRequestFault(t: number): boolean {
    return this.errorRate > 0 || this.latencyMs > 0 || this.dropRate > 0 || this.outageUntil > t || this.force429Until > t;
  }

  private applies(path: string): boolean {
    return this.paths === null || this.paths.some((p) => matches(path, p));
  }

  /** The first fail_next counter for `path` (a path's own counter before the any-path one), counted down. */
  private takeFailNext(path: string): FaultAction {
    if (this.failNext.size === 0) return { kind: 'none' };
    let key: string | null | undefined;
    for (const k of this.failNext.keys()) if (k !== null && matches(path, k)) key = k;
    if (key === undefined && this.failNext.has(null)) key = null;
    if (key === undefined) return { kind: 'none' };
    const n = this.failNext.get(key)!;
    if (--n.count <= 0) this.failNext.delete(key);
    return n.status === 'drop' ? { kind: 'destroy', cause: 'fail_next' } : { kind: 'status', status: n.status, cause: 'fail_next' };
  }

  /** Latency to add before handling a request on `path` (0 when none). */
  latencyFor(path: string): number {
    return this.latencyMs > 0 && this.applies(path) ? this.latencyMs : 0;
  }

  /**
   * What to do with a request on `path` (called after the added latency). Order: fail_next (its
   * own paths, not `paths`), outage, dropped connection, forced 429, injected error status.
   */
  decide(path: string): FaultAction {
    const next = this.takeFailNext(path);
    if (next.kind !== 'none') return next;
    const t = this.now();
    if (!this.anyRequestFault(t) || !this.applies(path)) return { kind: 'none' };
    if (this.outageUntil > t) return { kind: 'destroy', cause: 'outage_seconds' };
    if (this.dropRate > 0 && this.random() < this.dropRate) return { kind: 'destroy', cause: 'drop_connection_rate' };
    if (this.force429Until > t) return { kind: 'force429', retryAfterMs: this.force429Until - t, cause: 'force_429_seconds' };
    if (this.errorRate > 0 && this.random() < this.errorRate) return { kind: 'status', status: this.status, cause: 'error_rate' };
    return { kind: 'none' };
  }

  /** Requests per minute another client behind every address spends (neighbour_per_minute). */
  get neighbourPerMinute(): number {
    return this.neighbour;
  }

  /** How a refused batch item is worded (refusal_wording). */
  get refusalWording(): Faults['refusal_wording'] {
    return this.wording;
  }

  /** Decided when an import job is accepted. */
  jobShouldFail(): boolean {
    return this.jobFailureRate > 0 && this.random() < this.jobFailureRate;
  }
}
