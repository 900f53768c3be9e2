import type { Sample } from '../../core/sample.js';
import type { Source, SourceKind, SourceStatus } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import { describeError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import { Q_GOOD } from '../../core/quality.js';
import { generatorVariables, type GeneratorSourceConfig } from './config.js';

/**
 * Synthetic samples: every `interval`, one sample per configured variable. Used by the demo and
 * the end-to-end tests until (and beside) the protocol sources. Timestamps are the tick's wall
 * time, so every (variable, timestamp) pair is unique and a test can count exactly-once storage.
 */
export class GeneratorSource implements Source {
  readonly kind = 'generator' as const;
  readonly name: string;
  private readonly variables: string[];
  private timer: NodeJS.Timeout | null = null;
  private tick = 0;
  private lastTs = 0;
  private readonly walk: number[];
  private stopped = false;
  private readonly inflight = new Set<Promise<void>>();
  private readonly throttle: LogThrottle;

  constructor(private readonly cfg: GeneratorSourceConfig, private readonly ctx: SourceContext) {
    this.name = cfg.name;
    this.throttle = new LogThrottle(ctx.logger, 60_000, () => ctx.clock.monotonic());
    this.variables = generatorVariables(cfg);
    this.walk = this.variables.map(() => 50);
    // Slot i is variable i; read every interval.
    ctx.stats.quality.reserve(this.variables.length);
    for (const v of this.variables) ctx.stats.quality.add(v);
    ctx.stats.quality.setPeriod(cfg.interval);
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.ctx.stats.setState('connected');
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => this.emit(), this.cfg.interval);
  }

  private emit(): void {
    // Strictly increasing timestamps even when two ticks land in the same millisecond.
    const ts = Math.max(this.ctx.clock.now(), this.lastTs + 1);
    this.lastTs = ts;
    const t = this.tick++;
    const samples: Sample[] = this.variables.map((variable, i) => ({ variable, ts, value: this.valueFor(i, t) }));
    const quality = this.ctx.stats.quality;
    for (let i = 0; i < samples.length; i++) quality.set(i, Q_GOOD, ts);
    const p = this.ctx.sink
      .append(samples)
      .then(() => this.ctx.stats.samplesRead(samples.length))
      .catch((err) => {
        this.ctx.stats.bufferRefused(err, samples.length);
        this.throttle.warn('buffer-refused', { source: this.name, err: describeError(err), samples: samples.length }, 'generator samples not buffered');
      })
      .finally(() => this.inflight.delete(p));
    this.inflight.add(p);
    this.schedule();
  }

  private valueFor(i: number, t: number): number {
    switch (this.cfg.shape) {
      case 'counter':
        return t;
      case 'square':
        return Math.floor(t / 10 + i) % 2;
      case 'random_walk':
        this.walk[i] = Math.min(100, Math.max(0, this.walk[i] + (Math.random() - 0.5) * 2));
        return Math.round(this.walk[i] * 1000) / 1000;
      case 'sine':
      default:
        return Math.round((50 + 40 * Math.sin((t / 30) * Math.PI + i)) * 1000) / 1000;
    }
  }

  async close(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await Promise.allSettled([...this.inflight]);
    this.ctx.stats.setState('stopped');
  }

  status(): SourceStatus {
    return this.ctx.stats.snapshot({ variables: this.variables.length, interval_ms: this.cfg.interval });
  }
}

export function createGeneratorSources(section: GeneratorSourceConfig[], makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  return section.map((cfg) => new GeneratorSource(cfg, makeContext(cfg.name, 'generator')));
}
