import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { ConditionEventSink } from '../core/condition-event.js';
import type { Metrics } from '../core/metrics.js';
import type { SampleSink } from '../core/sample.js';
import type { Source, SourceKind, SourceStats } from '../core/source.js';
import type { HistoryContext } from './opcua/history.js';

/**
 * What the runtime hands a source factory. It lives with the sources, not in core/source.ts: the
 * OPC UA history backfill's part names the buffer's gap ledger, and core sits below the buffer.
 */
export interface SourceContext {
  sink: SampleSink;
  logger: Logger;
  stats: SourceStats;
  metrics: Metrics;
  clock: Clock;
  /** Directory for the source's own files (OPC UA certificates, ...). Exists. */
  dataDir: string;
  /** Buffer state for the OPC UA historical backfill; absent in tests that build a source alone. */
  history?: HistoryContext;
  /** Where condition events (OPC UA Alarms & Conditions) go; absent when nothing consumes them. */
  conditions?: ConditionEventSink;
}

/** Makes the context of one source as a section is built (the runtime's sources stage, `check`, the console). */
export type MakeContext = (name: string, kind: SourceKind) => SourceContext;

/** A source factory: validated config section in, sources out, no I/O. */
export type SourceFactory<Section> = (section: Section, makeContext: MakeContext) => Source[];
