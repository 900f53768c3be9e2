import type { GatewayConfig } from '../config/schema.js';
import { ConfigError, describeError } from '../core/errors.js';
import type { ConfigStatus } from '../status/model.js';
import { appliedConfig, planReload, type ReloadPlan } from './reload-plan.js';
import type { RuntimeServices } from './stages/stage.js';
import type { SourceChange, SourcesStage } from './stages/sources.js';

export interface ReloadResult extends ReloadPlan {
  /** Source names stopped and started again. */
  restartedSources: string[];
}

/** A configuration file written by the console (Apply, rollback) and applied from it: the file watcher's reload that follows says so. */
export interface WrittenFile {
  /** SHA-256 of the text written. */
  digest: string;
  /** What wrote it (`console apply`, `console rollback`) and the history's version. */
  by: string;
  version: number | null;
}

/** A later stage's part of a reload: rebuilds what it owns from the applied configuration (the annotations). */
export type ReloadStep = (plan: ReloadPlan, next: GatewayConfig) => Promise<void>;

/**
 * Hot reload (SIGHUP, a change of the file, the console's Apply): applies a new, already validated
 * configuration without a restart. reload-plan.ts says what is reloaded in place; buffered samples
 * are untouched, only the changed source sections and the annotations are rebuilt. Reloads run one
 * at a time. It keeps the configuration in effect and the `config` part of the status.
 */
export class ConfigReloads {
  private current: GatewayConfig;
  private readonly record: ConfigStatus;
  private readonly steps = new Set<ReloadStep>();
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  private written: { file: WrittenFile; result: Promise<ReloadResult> } | null = null;

  constructor(
    config: GatewayConfig,
    private readonly o: RuntimeServices & { sources: SourcesStage; configPath: string | null; startedAt: number },
  ) {
    this.current = config;
    this.record = { path: o.configPath, loaded_at: new Date(o.startedAt).toISOString(), reloads_applied: 0, reloads_refused: 0, last_reload: null };
  }

  /** The configuration in effect: after reloads, the reloadable parts of the newest one. */
  get config(): GatewayConfig {
    return this.current;
  }

  /** The configuration file and its reloads, for the status. */
  status(): { config: ConfigStatus } {
    return { config: structuredClone(this.record) };
  }

  /** Adds a later stage's part of every reload; returns the function that removes it. */
  onReload(step: ReloadStep): () => void {
    this.steps.add(step);
    return () => this.steps.delete(step);
  }

  /**
   * Throws ConfigError, leaving everything as it was, when the new sources cannot be built.
   * `written`: the configuration is that of a file the console just wrote (writtenFile()).
   */
  apply(next: GatewayConfig, written?: WrittenFile): Promise<ReloadResult> {
    const run = this.queue.then(() => this.applyNow(next));
    this.queue = run.catch(() => undefined);
    // Any other reload makes the console's last file old news: the same text written again later
    // (a rollback from the command line) is read again.
    this.written = written ? { file: written, result: run } : null;
    return run;
  }

  /**
   * The console's last written file when its text has this digest, with the reload that applied it
   * (or is applying it); answered once: the watcher's one look at the file the console wrote.
   */
  takeWrittenFile(digest: string): { file: WrittenFile; result: Promise<ReloadResult> } | null {
    const w = this.written && this.written.file.digest === digest ? this.written : null;
    if (w) this.written = null;
    return w;
  }

  /** Records a reload refused before it reached the gateway (the new file does not validate) or by it. */
  refused(problems: string[], plan?: ReloadPlan): void {
    this.record.reloads_refused += 1;
    this.record.last_reload = { at: new Date(this.o.clock.now()).toISOString(), outcome: 'refused', changed: plan?.changed ?? [], restart_required: plan?.restartRequired ?? [], problems };
    this.o.metrics.configReloads.inc({ outcome: 'refused' });
  }

  /** Refuses further reloads and waits for the one under way, so none rebuilds a stage that is stopping. */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
  }

  private async applyNow(next: GatewayConfig): Promise<ReloadResult> {
    if (this.closed) throw new Error('the gateway is stopping');
    const plan = planReload(this.current, next);
    const target = appliedConfig(this.current, next);
    // Build first (no I/O): a section that cannot be built refuses the whole reload and nothing
    // running is touched.
    const change: SourceChange = await this.o.sources.prepare(plan.sourceSections, target).catch((err: unknown) => {
      this.refused(err instanceof ConfigError ? err.problems : [describeError(err)], plan);
      throw err;
    });
    await change.swap();
    for (const step of this.steps) await step(plan, target);
    if (plan.logLevel) this.o.logger.level = target.log.level;
    this.current = target;
    await change.start();
    const outcome = plan.changed.length === 0 ? 'unchanged' : 'applied';
    if (outcome === 'applied') {
      this.record.reloads_applied += 1;
      this.record.loaded_at = new Date(this.o.clock.now()).toISOString();
    }
    this.record.last_reload = { at: new Date(this.o.clock.now()).toISOString(), outcome, changed: plan.changed, restart_required: plan.restartRequired };
    this.o.metrics.configReloads.inc({ outcome });
    return { ...plan, restartedSources: [...new Set([...change.stopped, ...change.started].map((s) => s.name))] };
  }
}
