import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { AlarmRow, AlarmStore } from './alarm-store.js';
import { noteTime } from './alarm-rules.js';
import type { DowntimeDetector } from './detector.js';
import { OPERATOR_ORIGINS, type OutboxEntry } from './model.js';
import { manualKey, type AnnotationService } from './service.js';
import type { AnnotationStore } from './store.js';

/**
 * Reconciliation of what the operator says with what the machine says.
 *
 * Links. When an operator's downtime of a machine (a range from the panel, the API, MQTT or the
 * CLI, with a machine) and one of the machine's conditions (an alarm range) overlap, both
 * annotations are kept and linked (annotation_links):
 * - the operator's text comes first and stays theirs; when the downtime is stopped on the panel
 *   (or start/stop through the API, MQTT, CLI), the machine's times are added after it:
 *   `Tool change: die swap. Machine: alarm "Jam" (JAM) 08:14:03Z–08:31:10Z`;
 * - the condition's annotation, queued when the condition ends, names the operator's downtime it
 *   overlaps in a note (`Operator recorded "Tool change: die swap" 08:15Z–08:40Z`);
 * - a full annotation posted by a caller keeps its text exactly (its external_id makes repeats
 *   safe, so it cannot change), and is linked all the same.
 *
 * Contradiction. An operator's downtime is flagged `contradicted_by_machine_state` when a downtime
 * detector of the same machine saw its state variable say "running" (its condition not holding)
 * from before the downtime's start until its end without a single "down" sample. Only what this
 * gateway process saw counts: a downtime that began before the process started, or a machine with
 * no detector, is never flagged. The flag is local (the console shows it); the annotation sent
 * upstream is the operator's.
 */

export const CONTRADICTED = 'contradicted_by_machine_state';

export interface OperatorOverlap {
  externalId: string;
  text: string;
  startedAt: number;
  /** null: still open on the panel. */
  endedAt: number | null;
}

export interface ReconcilerOptions {
  alarms: AlarmStore;
  store: AnnotationStore;
  service: AnnotationService;
  detector: DowntimeDetector;
  logger: Logger;
  clock: Clock;
}

export class Reconciler {
  flagged = 0;
  linked = 0;

  constructor(private readonly o: ReconcilerOptions) {}

  /**
   * The machine's side of an operator's downtime being stopped: its conditions overlapping
   * [from, to], as a sentence for the end of the operator's text; null when there are none.
   */
  machineEvidence(machine: string, from: number, to: number): string | null {
    try {
      const rows = this.o.alarms.overlapping(machine, from, to);
      if (rows.length === 0) return null;
      return `Machine: ${rows.map(describeRow).join('; ')}`;
    } catch (err) {
      this.o.logger.warn({ machine, err: describeError(err) }, 'the machine\'s conditions could not be read for the operator\'s downtime; the text has the operator\'s part only');
      return null;
    }
  }

  /** After an operator's range annotation of a machine was queued: links to the machine's conditions, and the contradiction flag. */
  operatorQueued(entry: OutboxEntry): void {
    if (entry.type !== 'range' || !entry.machine || !OPERATOR_ORIGINS.includes(entry.origin)) return;
    const from = entry.startedAt!;
    const to = entry.endedAt!;
    try {
      const now = this.o.clock.now();
      for (const row of this.o.alarms.overlapping(entry.machine, from, to)) {
        this.o.alarms.link(entry.externalId, row.externalId, now);
        this.linked += 1;
      }
      const witness = this.o.detector.runningThroughout(entry.machine, from, to);
      if (witness) {
        const detail = `${witness.variable} said the machine was running (${witness.variable} ${witness.condition} did not hold) from before ${noteTime(from)} until after ${noteTime(to)}`;
        this.o.alarms.flag(entry.externalId, CONTRADICTED, detail, now);
        this.flagged += 1;
        this.o.logger.warn({ machine: entry.machine, external_id: entry.externalId, variable: witness.variable }, `operator downtime contradicted by the machine's state: ${detail}`);
      }
    } catch (err) {
      this.o.logger.warn({ external_id: entry.externalId, err: describeError(err) }, 'the operator\'s downtime could not be reconciled with the machine\'s state; it was queued as entered');
    }
  }

  /** Operator downtimes (queued, or open on the panel) overlapping a condition that is being closed. */
  alarmClosing(row: AlarmRow, from: number, to: number): OperatorOverlap[] {
    const machine = row.machine!;
    const out: OperatorOverlap[] = this.o.store.operatorOverlapping(machine, from, to);
    const open = this.o.store.downtime(manualKey(machine));
    if (open && open.startedAt < to) {
      // Still open on the panel: linked under the id its annotation will have when stopped.
      out.push({ externalId: open.externalId, text: [open.reason, open.text].filter(Boolean).join(': ') || 'downtime', startedAt: open.startedAt, endedAt: null });
    }
    this.linked += out.length;
    return out;
  }
}

function describeRow(r: AlarmRow): string {
  const what = `alarm "${r.conditionName ?? r.eventTypeName ?? 'event'}"${r.reasonCode ? ` (${r.reasonCode})` : ''}`;
  if (r.state === 'open' || r.endedAt === null) return `${what} active since ${noteTime(r.startedAt)}`;
  return `${what} ${noteTime(r.startedAt)}–${noteTime(r.endedAt)}${r.endInferred ? ' (end inferred)' : ''}`;
}
