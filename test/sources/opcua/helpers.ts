import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import type { Clock } from '../../../src/core/clock.js';
import { systemClock } from '../../../src/core/clock.js';
import { createMetrics, type Metrics } from '../../../src/core/metrics.js';
import type { Sample, SampleSink } from '../../../src/core/sample.js';
import { SourceStats } from '../../../src/core/source.js';
import type { SourceContext } from '../../../src/sources/context.js';
import { opcuaServerSchema, type OpcuaServerConfig } from '../../../src/sources/opcua/config.js';
import { OpcuaSource } from '../../../src/sources/opcua/source.js';
import type { HistoryContext } from '../../../src/sources/opcua/history.js';

/** A logger whose JSON lines are kept in memory, so tests can assert on what the operator reads. */
export function captureLogger(level = 'debug'): { logger: Logger; lines: Array<Record<string, unknown>>; text(): string } {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) {
        if (l.trim()) {
          try {
            lines.push(JSON.parse(l));
          } catch {
            lines.push({ msg: l });
          }
        }
      }
      cb();
    },
  });
  const logger = pino({ level }, stream);
  return { logger, lines, text: () => lines.map((l) => JSON.stringify(l)).join('\n') };
}

/** A sink that keeps samples in memory (the real SQLite buffer is used by the e2e test). */
export class MemorySink implements SampleSink {
  readonly samples: Sample[] = [];
  async append(samples: readonly Sample[]): Promise<void> {
    this.samples.push(...samples);
  }
  of(variable: string): Sample[] {
    return this.samples.filter((s) => s.variable === variable);
  }
}

export interface Harness {
  source: OpcuaSource;
  sink: MemorySink;
  metrics: Metrics;
  stats: SourceStats;
  log: ReturnType<typeof captureLogger>;
  close(): Promise<void>;
}

export function serverConfig(raw: Record<string, unknown>): OpcuaServerConfig {
  return opcuaServerSchema.parse({ name: 'press1', ...raw });
}

/** A real OpcuaSource with an in-memory sink and its own metrics. */
export function makeSource(raw: Record<string, unknown>, opts: { pkiDir: string; clock?: Clock; sink?: SampleSink & { samples?: Sample[] }; history?: HistoryContext } = { pkiDir: tmpPki() }): Harness {
  const cfg = serverConfig(raw);
  const metrics = createMetrics();
  const clock = opts.clock ?? systemClock;
  const stats = new SourceStats(cfg.name, 'opcua', metrics, clock);
  const log = captureLogger();
  const sink = (opts.sink as MemorySink | undefined) ?? new MemorySink();
  const ctx: SourceContext = { sink, logger: log.logger, stats, metrics, clock, dataDir: mkdtempSync(join(tmpdir(), 'opcua-src-')), ...(opts.history ? { history: opts.history } : {}) };
  const source = new OpcuaSource(cfg, ctx, { path: 'opcua.servers[0]', pkiDir: opts.pkiDir });
  return { source, sink, metrics, stats, log, close: () => source.close() };
}

export function tmpPki(prefix = 'opcua-pki-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export async function metricValue(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  const all = await metrics.registry.getMetricsAsJSON();
  const m = all.find((x) => x.name === name);
  if (!m) return 0;
  return (m.values as Array<{ value: number; labels: Record<string, string | number> }>)
    .filter((v) => Object.entries(labels).every(([k, val]) => String(v.labels[k]) === val))
    .reduce((n, v) => n + v.value, 0);
}
