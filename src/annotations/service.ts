import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError, errorCode } from '../core/errors.js';
import { StoreFullError } from '../store/store.js';
import type { Metrics } from '../core/metrics.js';
import { toIsoUtc } from '../core/time.js';
import type { AnnotationsConfig, MachineConfig } from './config.js';
import { newExternalId } from './external-id.js';
import { MAX_TEXT_CHARS, sameContent, type NewAnnotation, type Origin, type OutboxEntry, type SiteRef } from './model.js';
import type { AnnotationStore, DowntimeRow } from './store.js';
import { checkPlausible, checkText, isObject, isProblem, parseDateTime, show, validateAnnotationInput, type Problem, type ValidationContext } from './validate.js';
import type { DowntimeView } from './api-model.js';

/**
 * What every entry point (local API, HMI page, MQTT trigger, CLI) calls: create an annotation,
 * start / stop / cancel a machine's downtime. Validates locally (validate.ts), assigns the
 * external_id and writes the outbox in one transaction (store.ts), then wakes the sender.
 *
 * Errors are `AnnotationError`s with an HTTP status, a stable code and the field at fault; the
 * local API returns them as JSON, the MQTT trigger logs them.
 */
export class AnnotationError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    readonly problems?: Problem[],
    readonly detail?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'AnnotationError';
  }
}

export interface ServiceOptions {
  config: AnnotationsConfig;
  gatewayName: string;
  store: AnnotationStore;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  /** Called after something was queued (wakes the sender, refreshes gauges). */
  onQueued: () => void;
}

/**
 * Reconciliation with the machine's own account (reconcile.ts): set after
 * construction, because it needs the detectors, which need this service.
 */
export interface OperatorReconciler {
  /** The machine's conditions overlapping a downtime being stopped, as text for after the operator's; null if none. */
  machineEvidence(machine: string, from: number, to: number): string | null;
  /** An operator's annotation was queued: link it, flag it when the machine's state contradicts it. */
  operatorQueued(entry: OutboxEntry): void;
}

export interface Machine {
  key: string;
  name: string;
  machineVariables: string[];
  reasons: string[];
}

/** Body of start / stop / cancel (API, MQTT, CLI): all optional. */
interface DowntimeInput {
  reason: string | null;
  text: string | null;
  at: number | null;
}

const MAX_REASON_CHARS = 200;
export const manualKey = (machine: string) => `manual:${machine}`;

export class AnnotationService {
  readonly machines: Map<string, Machine>;
  readonly site: SiteRef;
  private readonly validation: ValidationContext;
  createdTotal = 0;
  invalidTotal = 0;
  reconciler: OperatorReconciler | null = null;

  constructor(private readonly o: ServiceOptions) {
    this.site = o.config.site;
    this.machines = new Map(o.config.machines.map((m: MachineConfig) => [m.key, { key: m.key, name: m.name ?? m.key, machineVariables: m.machine_variables, reasons: m.reasons ?? o.config.reasons }]));
    this.validation = { defaultSite: this.site, machines: this.machines, plausible: { now: () => o.clock.now(), maxAgeMs: o.config.max_age, maxAheadMs: o.config.max_ahead } };
  }

  /** Creates an instant or range annotation from a §2.3 body (API, MQTT, CLI). */
  create(raw: unknown, origin: Origin, options: { externalId?: string } = {}): { entry: OutboxEntry; created: boolean } {
    const v = validateAnnotationInput(raw, this.validation);
    if (!v.ok) throw this.invalid(v.problems, origin);
    const externalId = v.value.externalId ?? options.externalId ?? newExternalId(this.o.gatewayName);
    const annotation: NewAnnotation = { ...v.value, externalId, origin };
    const result = this.write(() => this.o.store.insert(annotation, this.o.clock.now()));
    if (!result.created && !sameContent(result.entry, annotation)) {
      throw new AnnotationError(409, 'external_id_conflict', `external_id: "${externalId}" is already used by a different annotation in this gateway's outbox`, 'external_id', undefined, {
        existing: result.entry.externalId,
      });
    }
    if (result.created) {
      this.queued(result.entry);
      this.reconciler?.operatorQueued(result.entry);
    }
    return result;
  }

  /** The open manual downtime of a machine, or undefined. */
  openDowntime(machine: string): DowntimeRow | undefined {
    return this.o.store.downtime(manualKey(machine));
  }

  startDowntime(machineKey: unknown, raw: unknown, origin: Origin): DowntimeRow {
    const machine = this.machine(machineKey);
    const input = this.downtimeInput(raw, origin);
    const startedAt = input.at ?? this.o.clock.now();
    const row: DowntimeRow = {
      key: manualKey(machine.key),
      kind: 'manual',
      machine: machine.key,
      externalId: newExternalId(this.o.gatewayName),
      startedAt,
      reason: input.reason,
      text: input.text,
      machineVariables: null,
      origin,
      createdAt: this.o.clock.now(),
    };
    const opened = this.write(() => this.o.store.openDowntime(row));
    if (!opened) {
      const open = this.openDowntime(machine.key)!;
      throw new AnnotationError(409, 'downtime_open', `machine: "${machine.key}" already has a downtime open since ${toIsoUtc(open.startedAt)}; stop it first`, 'machine', undefined, { downtime: downtimeView(open) });
    }
    this.o.logger.info({ machine: machine.key, started_at: toIsoUtc(startedAt), origin }, 'downtime started');
    this.o.onQueued();
    return row;
  }

  /**
   * Stops a machine's downtime: the range annotation (started_at = start, ended_at = now or `at`,
   * text = "<reason>: <free text>", the machine's configured variables) is queued in the same
   * transaction that closes the downtime (A3).
   */
  stopDowntime(machineKey: unknown, raw: unknown, origin: Origin): OutboxEntry {
    const machine = this.machine(machineKey);
    const input = this.downtimeInput(raw, origin);
    const open = this.openDowntime(machine.key);
    if (!open) throw new AnnotationError(409, 'no_open_downtime', `machine: "${machine.key}" has no open downtime; start one first`, 'machine');
    const reason = input.reason ?? open.reason;
    const free = input.text ?? open.text;
    const text = composeText(reason, free);
    if (text.length === 0) {
      throw this.invalid([{ field: 'reason', message: 'pick a reason or write a text: the annotation text must not be blank (§2.3)' }], origin);
    }
    let endedAt = input.at ?? this.o.clock.now();
    if (endedAt <= open.startedAt) {
      if (input.at !== null) throw this.invalid([{ field: 'ended_at', message: `${toIsoUtc(endedAt)} must be after the downtime's start ${toIsoUtc(open.startedAt)}` }], origin);
      // The wall clock stepped back (NTP) since the start: keep the range valid rather than lose it.
      this.o.logger.warn({ machine: machine.key, started_at: toIsoUtc(open.startedAt), now: toIsoUtc(endedAt) }, 'the clock is behind the downtime start; ending it 1 ms after its start');
      endedAt = open.startedAt + 1;
    }
    const body = { type: 'range', started_at: open.startedAt, ended_at: endedAt, text: withEvidence(text, this.reconciler?.machineEvidence(machine.key, open.startedAt, endedAt) ?? null), machine_variables: machine.machineVariables };
    const v = validateAnnotationInput(body, this.validation);
    if (!v.ok) throw this.invalid(v.problems.map((p) => (p.field === 'text' ? { ...p, field: input.text !== null ? 'text' : 'reason' } : p)), origin);
    const annotation: NewAnnotation = { ...v.value, machine: machine.key, externalId: open.externalId, origin };
    const closed = this.write(() => this.o.store.closeDowntime(open.key, annotation, this.o.clock.now()));
    if (!closed) throw new AnnotationError(409, 'no_open_downtime', `machine: "${machine.key}" has no open downtime (it was just stopped)`, 'machine');
    this.o.logger.info({ machine: machine.key, external_id: annotation.externalId, started_at: toIsoUtc(open.startedAt), ended_at: toIsoUtc(endedAt), origin }, 'downtime stopped; range annotation queued');
    this.queued(closed.entry);
    this.reconciler?.operatorQueued(closed.entry);
    return closed.entry;
  }

  /** Forgets a downtime started by mistake, without an annotation. */
  cancelDowntime(machineKey: unknown, origin: Origin): DowntimeRow {
    const machine = this.machine(machineKey);
    const open = this.openDowntime(machine.key);
    if (!open || !this.write(() => this.o.store.discardDowntime(open.key))) {
      throw new AnnotationError(409, 'no_open_downtime', `machine: "${machine.key}" has no open downtime`, 'machine');
    }
    this.o.logger.info({ machine: machine.key, started_at: toIsoUtc(open.startedAt), origin }, 'downtime cancelled (no annotation)');
    this.o.onQueued();
    return open;
  }

  /**
   * Closes a detector's episode into its range annotation (A3). Throws AnnotationError when the
   * annotation breaks §2.3 (it cannot with a valid config) or the outbox cannot be written.
   */
  closeDetected(key: string, machine: string, externalId: string, body: Record<string, unknown>): OutboxEntry | null {
    const v = validateAnnotationInput(body, this.validation);
    if (!v.ok) throw this.invalid(v.problems, 'detector');
    const annotation: NewAnnotation = { ...v.value, machine, externalId, origin: 'detector' };
    const closed = this.write(() => this.o.store.closeDowntime(key, annotation, this.o.clock.now()));
    if (closed?.created) this.queued(closed.entry);
    return closed?.entry ?? null;
  }

  machine(key: unknown): Machine {
    const m = typeof key === 'string' ? this.machines.get(key) : undefined;
    if (!m) {
      const known = [...this.machines.keys()];
      throw new AnnotationError(404, 'unknown_machine', `machine: ${show(key)} is not a configured machine (${known.length ? known.join(', ') : 'annotations.machines is empty'})`, 'machine');
    }
    return m;
  }

  private downtimeInput(raw: unknown, origin: Origin): DowntimeInput {
    const body = raw === undefined || raw === null ? {} : raw;
    if (!isObject(body)) throw this.invalid([{ field: '(body)', message: `${show(body)} is not a JSON object` }], origin);
    const problems: Problem[] = [];
    for (const k of Object.keys(body)) {
      if (!['reason', 'text', 'at', 'machine', 'action'].includes(k)) problems.push({ field: k, message: 'unknown field (allowed: reason, text, at)' });
    }
    let reason: string | null = null;
    if (body.reason !== undefined && body.reason !== null) {
      if (typeof body.reason !== 'string') problems.push({ field: 'reason', message: `${show(body.reason)} is not a string` });
      else if (body.reason.trim().length > MAX_REASON_CHARS) problems.push({ field: 'reason', message: `${body.reason.trim().length} characters is more than the maximum of ${MAX_REASON_CHARS}` });
      else reason = body.reason.trim() || null;
    }
    let text: string | null = null;
    if (body.text !== undefined && body.text !== null) {
      if (typeof body.text !== 'string') problems.push({ field: 'text', message: `${show(body.text)} is not a string` });
      else if (body.text.trim().length > 0) {
        const t = checkText(body.text);
        if (isProblem(t)) problems.push(t);
        else text = t;
      }
    }
    let at: number | null = null;
    if (body.at !== undefined && body.at !== null) {
      const t = parseDateTime(body.at, 'at');
      const implausible = isProblem(t) ? t : checkPlausible(t, body.at, 'at', this.validation);
      if (implausible) problems.push(implausible);
      else at = t as number;
    }
    if (problems.length > 0) throw this.invalid(problems, origin);
    return { reason, text, at };
  }

  private invalid(problems: Problem[], origin: Origin): AnnotationError {
    this.invalidTotal += 1;
    this.o.metrics.annotationsRefused.inc({ origin });
    const first = problems[0];
    return new AnnotationError(400, 'invalid_annotation', `${first.field}: ${first.message}`, first.field, problems);
  }

  private queued(entry: OutboxEntry): void {
    this.createdTotal += 1;
    this.o.metrics.annotationsCreated.inc({ origin: entry.origin });
    this.o.onQueued();
  }

  /**
   * Runs an outbox write. The outbox at its bound (store.annotations_max_bytes, A4 of store.ts)
   * becomes a 507 naming the bound; a storage failure (disk full, I/O error) a 503.
   */
  private write<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      if (err instanceof AnnotationError) throw err;
      // Refused, not failed: the sender is told (507); the MQTT trigger logs it at most once a minute.
      if (err instanceof StoreFullError) {
        throw new AnnotationError(507, 'outbox_full', `the annotation was NOT saved: ${err.message}. Queued annotations are delivered once the tracking service is reachable, which makes room`, undefined, undefined, { bytes: err.bytes, max_bytes: err.maxBytes });
      }
      const code = errorCode(err, 'STORAGE_ERROR');
      this.o.logger.error({ err: describeError(err), code }, 'annotation outbox write failed; nothing was saved');
      throw new AnnotationError(503, 'storage_unavailable', `the annotation was NOT saved: the gateway cannot write its database (${code}); try again, and check the disk`);
    }
  }
}

/** "<reason>: <free text>", either part alone, or '' when both are blank. */
export function composeText(reason: string | null, free: string | null): string {
  const parts = [reason?.trim(), free?.trim()].filter((p): p is string => !!p && p.length > 0);
  return parts.join(': ');
}

/**
 * The operator's text, then the machine's account after it (the operator's reason
 * wins); the machine's part is cut, never the operator's, to keep §2.3's 5000 characters.
 */
export function withEvidence(text: string, evidence: string | null): string {
  if (!evidence || text.length === 0) return text;
  const room = MAX_TEXT_CHARS - text.length - 2;
  if (room < 20) return text;
  return `${text}. ${evidence.length > room ? `${evidence.slice(0, room - 1)}…` : evidence}`;
}

export function downtimeView(d: DowntimeRow): DowntimeView {
  return {
    machine: d.machine,
    kind: d.kind,
    external_id: d.externalId,
    started_at: toIsoUtc(d.startedAt),
    started_ms: d.startedAt,
    reason: d.reason,
    text: d.text,
    origin: d.origin,
  };
}
