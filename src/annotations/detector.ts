import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Sample, SampleColumns, SampleTap } from '../core/sample.js';
import { toIsoUtc } from '../core/time.js';
import type { MachineStateView } from './api-model.js';
import { holds, type Condition } from './condition.js';
import type { DetectorConfig } from './config.js';
import { detectorExternalId } from './external-id.js';
import type { AnnotationService, Machine } from './service.js';
import type { AnnotationStore } from './store.js';
import { StateTimeline } from './state-timeline.js';

/**
 * Downtime detection from a machine-state variable. A rule says: while `variable` satisfies
 * `condition` (for example `== 0`, stopped) the machine is down; when that lasted at least
 * `min_duration`, the episode becomes a range annotation (started_at = the first sample meeting
 * the condition, ended_at = the first sample that no longer does) with the rule's text and
 * machine variables. Shorter stops are ignored.
 *
 * Time is the samples' own timestamps, not the time they arrive, so a burst of buffered MQTT
 * messages or a late poll gives the same ranges. Samples older than the last one seen for the
 * variable are ignored (out of order).
 *
 * An episode in progress is stored in the `downtimes` table when it begins, so it survives a
 * restart: after the restart the first sample either continues it or ends it. While the gateway
 * is stopped nothing is known about the machine; the episode ends at the first sample after the
 * restart that no longer meets the condition.
 *
 * Runs inside the TappedSink's `onSamples`, after the samples were committed: cheap, and it
 * never throws.
 */

export interface Rule {
  index: number;
  key: string;
  fingerprint: string;
  machine: Machine;
  variable: string;
  condition: Condition;
  minDurationMs: number;
  text: string;
  machineVariables: string[];
  /** The variable's values in the operator's words (annotations.detectors[].states). */
  states: ReadonlyMap<number, string>;
}

interface RuleState {
  rule: Rule;
  /** Start of the episode in progress (sample timestamp), or null. */
  since: number | null;
  externalId: string | null;
  lastTs: number;
  /** The last sample's value (null before the first one). */
  lastValue: number | null;
  episodes: number;
  ignoredShort: number;
  /** What the variable said since this process started (issue 26 §3: operator downtimes it contradicts). */
  timeline: StateTimeline;
}

export interface DetectorOptions {
  rules: DetectorConfig[];
  service: AnnotationService;
  store: AnnotationStore;
  gatewayName: string;
  logger: Logger;
  clock: Clock;
}

export function ruleFingerprint(d: Pick<DetectorConfig, 'machine' | 'variable'> & { condition: Condition }): string {
  return `${d.machine}|${d.variable}|${d.condition.text}`;
}

export function formatMs(ms: number): string {
  if (ms % 3_600_000 === 0 && ms > 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000} min`;
  if (ms % 1_000 === 0) return `${ms / 1_000} s`;
  return `${ms} ms`;
}

export class DowntimeDetector implements SampleTap {
  private readonly byVariable = new Map<string, RuleState[]>();
  private readonly states: RuleState[] = [];
  private readonly throttle: LogThrottle;

  constructor(private readonly o: DetectorOptions) {
    this.throttle = new LogThrottle(o.logger, 60_000, () => o.clock.monotonic());
    o.rules.forEach((d, index) => {
      const machine = o.service.machine(d.machine);
      const fingerprint = ruleFingerprint(d);
      const rule: Rule = {
        index,
        key: `rule:${fingerprint}`,
        fingerprint,
        machine,
        variable: d.variable,
        condition: d.condition,
        minDurationMs: d.min_duration,
        text: d.text ?? `Downtime detected: ${d.variable} ${d.condition.text} for at least ${formatMs(d.min_duration)}`,
        machineVariables: d.machine_variables ?? machine.machineVariables,
        states: new Map(d.states ?? []),
      };
      const state: RuleState = { rule, since: null, externalId: null, lastTs: -Infinity, lastValue: null, episodes: 0, ignoredShort: 0, timeline: new StateTimeline() };
      this.states.push(state);
      const list = this.byVariable.get(d.variable) ?? [];
      list.push(state);
      this.byVariable.set(d.variable, list);
    });
  }

  /** Picks up episodes that were in progress when the gateway stopped. */
  restore(): void {
    const byKey = new Map(this.states.map((s) => [s.rule.key, s]));
    for (const row of this.o.store.downtimes()) {
      if (row.kind !== 'detector') continue;
      const s = byKey.get(row.key);
      if (!s) {
        // The rule was removed or changed (machine, variable or condition): its meaning may differ,
        // so the half-observed episode is not turned into an annotation.
        this.o.store.discardDowntime(row.key);
        this.o.logger.warn({ rule: row.key.slice(5), started_at: toIsoUtc(row.startedAt) }, 'a downtime episode in progress belongs to a detector rule that is no longer configured; discarded');
        continue;
      }
      s.since = row.startedAt;
      s.externalId = row.externalId;
      s.lastTs = row.startedAt;
      this.o.logger.info({ machine: s.rule.machine.key, variable: s.rule.variable, since: toIsoUtc(row.startedAt) }, 'detector resumes a downtime episode in progress before the restart');
    }
  }

  get ruleCount(): number {
    return this.states.length;
  }

  onSamples(samples: readonly Sample[]): void {
    if (this.byVariable.size === 0) return;
    for (const s of samples) this.see(s.variable, s.ts, s.value);
  }

  onColumns(c: SampleColumns): void {
    if (this.byVariable.size === 0) return;
    for (let i = 0; i < c.count; i++) this.see(c.variables[i], c.ts[i], c.values[i]);
  }

  private see(variable: string, ts: number, value: number): void {
    const rules = this.byVariable.get(variable);
    if (!rules) return;
    for (const state of rules) {
      try {
        this.observe(state, ts, value);
      } catch (err) {
        this.throttle.error(`observe:${state.rule.key}`, { rule: state.rule.fingerprint, err: describeError(err) }, 'downtime detector failed on a sample; it keeps watching');
      }
    }
  }

  private observe(s: RuleState, ts: number, value: number): void {
    if (ts < s.lastTs) return;
    s.lastTs = ts;
    s.lastValue = value;
    const { rule } = s;
    const down = holds(rule.condition, value);
    s.timeline.record(ts, down);
    if (down) {
      if (s.since !== null) return;
      const externalId = detectorExternalId(this.o.gatewayName, rule.fingerprint, ts);
      // Stored before anything else happens, so a restart resumes the same episode (same start, same id).
      this.o.store.discardDowntime(rule.key);
      this.o.store.openDowntime({
        key: rule.key,
        kind: 'detector',
        machine: rule.machine.key,
        externalId,
        startedAt: ts,
        reason: null,
        text: rule.text,
        machineVariables: rule.machineVariables,
        origin: 'detector',
        createdAt: this.o.clock.now(),
      });
      s.since = ts;
      s.externalId = externalId;
      return;
    }
    if (s.since === null) return;
    const duration = ts - s.since;
    if (duration >= rule.minDurationMs && duration > 0) {
      const entry = this.o.service.closeDetected(rule.key, rule.machine.key, s.externalId!, {
        type: 'range',
        started_at: s.since,
        ended_at: ts,
        text: rule.text,
        machine_variables: rule.machineVariables,
      });
      s.episodes += 1;
      this.o.logger.info(
        { machine: rule.machine.key, variable: rule.variable, started_at: toIsoUtc(s.since), ended_at: toIsoUtc(ts), external_id: entry?.externalId },
        'downtime detected; range annotation queued',
      );
    } else {
      this.o.store.discardDowntime(rule.key);
      s.ignoredShort += 1;
    }
    s.since = null;
    s.externalId = null;
  }

  /**
   * Whether a machine's state variables said "running" for the whole of [from, to] (issue 26 §3):
   * the first rule of the machine that saw it, with its variable; null when no rule of the machine
   * saw the state at `from`, or one saw it down during the interval.
   */
  runningThroughout(machine: string, from: number, to: number): { variable: string; condition: string } | null {
    let witness: { variable: string; condition: string } | null = null;
    for (const s of this.states) {
      if (s.rule.machine.key !== machine) continue;
      const r = s.timeline.runningThroughout(from, to);
      if (r === false) return null;
      if (r === true && !witness) witness = { variable: s.rule.variable, condition: s.rule.condition.text };
    }
    return witness;
  }

  /**
   * What the machine's state signal says now, in the operator's words: the first rule of the
   * machine that has seen a sample; null when none has (the state is not known).
   */
  machineState(machine: string): MachineStateView | null {
    const s = this.states.find((x) => x.rule.machine.key === machine && x.lastValue !== null);
    if (!s) return null;
    const value = s.lastValue!;
    const down = s.since !== null;
    const now = this.o.clock.now();
    return {
      words: s.rule.states.get(value) ?? (down ? 'Stopped' : 'Running'),
      down,
      value,
      at: s.lastTs,
      since: s.since,
      recorded: down && now - s.since! >= s.rule.minDurationMs,
      min_duration_ms: s.rule.minDurationMs,
    };
  }

  /** Episodes in progress: `open` once they lasted min_duration by the wall clock. */
  active(): Array<{ machine: string; variable: string; condition: string; since: number; open: boolean; text: string; min_duration_ms: number }> {
    const now = this.o.clock.now();
    return this.states
      .filter((s) => s.since !== null)
      .map((s) => ({
        machine: s.rule.machine.key,
        variable: s.rule.variable,
        condition: s.rule.condition.text,
        since: s.since!,
        open: now - s.since! >= s.rule.minDurationMs,
        text: s.rule.text,
        min_duration_ms: s.rule.minDurationMs,
      }));
  }

  status(): Array<Record<string, unknown>> {
    const now = this.o.clock.now();
    return this.states.map((s) => ({
      machine: s.rule.machine.key,
      variable: s.rule.variable,
      condition: s.rule.condition.text,
      min_duration_ms: s.rule.minDurationMs,
      state: s.since === null ? 'idle' : now - s.since >= s.rule.minDurationMs ? 'down' : 'pending',
      since: s.since === null ? null : toIsoUtc(s.since),
      last_sample: Number.isFinite(s.lastTs) ? toIsoUtc(s.lastTs) : null,
      episodes: s.episodes,
      ignored_short: s.ignoredShort,
    }));
  }
}
