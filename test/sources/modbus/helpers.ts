import { Writable } from 'node:stream';
import { systemClock } from '../../../src/core/clock.js';
import { createLogger, type Logger } from '../../../src/core/logger.js';
import { createMetrics, type Metrics } from '../../../src/core/metrics.js';
import type { Sample, SampleSink } from '../../../src/core/sample.js';
import { SourceStats } from '../../../src/core/source.js';
import type { SourceContext } from '../../../src/sources/context.js';
import { modbusSectionSchema, type ModbusSectionConfig } from '../../../src/sources/modbus/config.js';
import { createModbusSources, ModbusSource } from '../../../src/sources/modbus/index.js';

/** A logger whose JSON lines are kept for assertions. */
export function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n')) if (line.trim()) lines.push(JSON.parse(line));
      cb();
    },
  });
  return { logger: createLogger({ level: 'debug', format: 'json', destination }), lines };
}

export function memorySink(): { sink: SampleSink; samples: Sample[] } {
  const samples: Sample[] = [];
  return { samples, sink: { append: async (s) => void samples.push(...s) } };
}

export interface StartedModbus {
  source: ModbusSource;
  ctx: SourceContext;
  metrics: Metrics;
  lines: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Validates `raw` through the real schema and builds the source through the real factory. */
export function parseSection(raw: unknown): ModbusSectionConfig {
  const section = modbusSectionSchema.parse(raw);
  if (!section) throw new Error('no section');
  return section;
}

export async function startModbus(raw: unknown, sink: SampleSink): Promise<StartedModbus> {
  const { logger, lines } = capturingLogger();
  const metrics = createMetrics();
  let ctx: SourceContext | undefined;
  const [source] = createModbusSources(parseSection(raw), (name, kind) => {
    ctx = { sink, logger, stats: new SourceStats(name, kind, metrics, systemClock), metrics, clock: systemClock, dataDir: '/nonexistent' };
    return ctx;
  });
  await source.start();
  return { source: source as ModbusSource, ctx: ctx!, metrics, lines, close: () => source.close() };
}

/** Polls `cond` until it is true; fails with `what` after `timeoutMs`. */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000, intervalMs = 25): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function deviceStatus(source: ModbusSource, name: string): Record<string, unknown> {
  const devices = (source.status().detail?.devices ?? []) as Array<Record<string, unknown>>;
  const d = devices.find((x) => x.name === name);
  if (!d) throw new Error(`no device ${name}`);
  return d;
}

export async function metricValue(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const all = await metrics.registry.getMetricsAsJSON();
  const m = all.find((x) => x.name === name);
  const v = (m?.values ?? []).find((x) => Object.entries(labels).every(([k, val]) => (x.labels as Record<string, unknown>)[k] === val));
  return v ? Number(v.value) : 0;
}
