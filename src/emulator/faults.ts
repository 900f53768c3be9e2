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
  /** Path prefixes the faults apply to (full, or relative to /tracking/v1); null = every path. */
  paths: string[] | null;
}

const rate = z.number().min(0).max(1);
export const faultsSchema = z.strictObject({
  error_rate: rate.optional(),
  status: z.number().int().min(400).max(599).optional(),
  latency_ms: z.number().min(0).max(600_000).optional(),
  drop_connection_rate: rate.optional(),
  outage_seconds: z.number().min(0).max(86_400).optional(),
  force_429_seconds: z.number().min(0).max(86_400).optional(),
  job_failure_rate: rate.optional(),
  paths: z.array(z.string().startsWith('/')).nullable().optional(),
});

/** Validates a fault setting (HTTP body or in-process call); throws an Error naming the field. */
export function parseFaults(input: unknown): Partial<Faults> {
  const r = faultsSchema.safeParse(input);
  if (!r.success) throw new Error(formatIssues(r.error.issues, [], faultsSchema).join('; '));
  return r.data as Partial<Faults>;
}

export type FaultAction =
  | { kind: 'none' }
  | { kind: 'destroy' }
  | { kind: 'status'; status: number }
  | { kind: 'force429'; retryAfterMs: number };

export class FaultState {
  private errorRate = 0;
  private status = 500;
  private latencyMs = 0;
  private dropRate = 0;
  private outageUntil = 0;
  private force429Until = 0;
  private jobFailureRate = 0;
  private paths: string[] | null = null;

  constructor(
    private readonly now: () => number,
    private readonly random: () => number,
  ) {}

  set(f: Partial<Faults>): void {
    const t = this.now();
    if (f.error_rate !== undefined) this.errorRate = f.error_rate;
    if (f.status !== undefined) this.status = f.status;
    if (f.latency_ms !== undefined) this.latencyMs = f.latency_ms;
    if (f.drop_connection_rate !== undefined) this.dropRate = f.drop_connection_rate;
    if (f.outage_seconds !== undefined) this.outageUntil = f.outage_seconds > 0 ? t + f.outage_seconds * 1000 : 0;
    if (f.force_429_seconds !== undefined) this.force429Until = f.force_429_seconds > 0 ? t + f.force_429_seconds * 1000 : 0;
    if (f.job_failure_rate !== undefined) this.jobFailureRate = f.job_failure_rate;
    if (f.paths !== undefined) this.paths = f.paths === null ? null : [...f.paths];
  }

  clear(): void {
    this.errorRate = 0;
    this.status = 500;
    this.latencyMs = 0;
    this.dropRate = 0;
    this.outageUntil = 0;
    this.force429Until = 0;
    this.jobFailureRate = 0;
    this.paths = null;
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
      paths: this.paths === null ? null : [...this.paths],
    };
  }

  /** Cheap test for the hot path: is any request fault set at all? */
  private anyRequestFault(t: number): boolean {
    return this.errorRate > 0 || this.latencyMs > 0 || this.dropRate > 0 || this.outageUntil > t || this.force429Until > t;
  }

  private applies(path: string): boolean {
    if (this.paths === null) return true;
    const relative = path.startsWith(BASE_PATH) ? path.slice(BASE_PATH.length) : undefined;
    return this.paths.some((p) => path.startsWith(p) || (relative !== undefined && relative.startsWith(p)));
  }

  /** Latency to add before handling a request on `path` (0 when none). */
  latencyFor(path: string): number {
    return this.latencyMs > 0 && this.applies(path) ? this.latencyMs : 0;
  }

  /**
   * What to do with a request on `path` (called after the added latency). Order: outage, dropped
   * connection, forced 429, injected error status.
   */
  decide(path: string): FaultAction {
    const t = this.now();
    if (!this.anyRequestFault(t) || !this.applies(path)) return { kind: 'none' };
    if (this.outageUntil > t) return { kind: 'destroy' };
    if (this.dropRate > 0 && this.random() < this.dropRate) return { kind: 'destroy' };
    if (this.force429Until > t) return { kind: 'force429', retryAfterMs: this.force429Until - t };
    if (this.errorRate > 0 && this.random() < this.errorRate) return { kind: 'status', status: this.status };
    return { kind: 'none' };
  }

  /** Decided when an import job is accepted. */
  jobShouldFail(): boolean {
    return this.jobFailureRate > 0 && this.random() < this.jobFailureRate;
  }
}
