import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describeError } from '../../core/errors.js';
import { ConditionRouter } from '../../core/condition-event.js';
import { TappedSink, type RefusalReason } from '../../core/sample.js';
import type { QualityTable } from '../../core/quality.js';
import { SourceStats, type RefusalInfo, type Source, type SourceKind } from '../../core/source.js';
import type { SourceContext } from '../../sources/context.js';
import { describeSources, type SourceInfo } from '../../sources/inventory.js';
import { assertUniqueNames, buildSourceSection, buildSources, type SourceSection, type SourceSections } from '../../sources/registry.js';
import type { StatusReadings } from '../../status/model.js';
import { GapWatcher } from '../gap-watch.js';
import type { RuntimeServices, Stage } from './stage.js';
import type { StoreStage } from './store.js';

/** Sees every value a source refused, with the source's name (the console's refusal log). */
export type RefusalListener = (source: string, reason: RefusalReason, n: number, info: RefusalInfo) => void;

/** Sources rebuilt for a reload: built and checked, not yet in place. */
export interface SourceChange {
  /** The running sources the change replaces, and the ones it brings. */
  readonly stopped: readonly Source[];
  readonly started: readonly Source[];
  /** Closes the replaced sources (which commits what they handed over) and puts the new ones in their place. */
  swap(): Promise<void>;
  /** Takes the new sections as the source inventory and starts the new sources. */
  start(): Promise<void>;
}

/**
 * Stage 3, the sources: every configured source built (no I/O until `open`), writing through a
 * tapped sink into the store's buffer so observers (the console's value ring, the downtime
 * detector) see committed samples, and the gap watcher fed by their state changes (issue 14).
 * Stopping closes the sources, then commits what they handed over.
 */
export class SourcesStage implements Stage {
  /** The running sources; replaced in place by reloads, so whoever holds it sees the running ones. */
  readonly list: Source[] = [];
  readonly sink: TappedSink;
  /** Condition events (OPC UA Alarms & Conditions) go to annotations.alarms through this router (issue 26). */
  readonly conditions = new ConditionRouter();
  private readonly stats = new Map<string, SourceStats>();
  private readonly refusalListeners = new Set<RefusalListener>();
  private readonly gapClosedListeners = new Set<() => void>();
  private readonly gapWatcher: GapWatcher;

  private constructor(
    private sections: SourceSections,
    private readonly services: RuntimeServices,
    private readonly store: StoreStage,
  ) {
    const { logger, clock } = services;
    this.sink = new TappedSink(store.buffer);
    this.gapWatcher = new GapWatcher({
      ledger: store.gaps,
      buffer: store.buffer,
      sources: () => this.list,
      info: () => this.inventory(),
      clock,
      logger: logger.child({ component: 'gaps' }),
      onClosed: () => this.gapClosedListeners.forEach((l) => l()),
    });
  }

  static async start(sections: SourceSections, services: RuntimeServices, deps: { store: StoreStage }): Promise<SourcesStage> {
    const stage = new SourcesStage(sections, services, deps.store);
    stage.list.push(...(await buildSources(sections, (name, kind) => stage.makeContext(name, kind))));
    return stage;
  }

  /** What the configuration says each running source delivers (the gap watcher and annotator read it). */
  inventory(): Map<string, SourceInfo> {
    return describeSources(this.sections);
  }

  onRefused(listener: RefusalListener): () => void {
    this.refusalListeners.add(listener);
    return () => this.refusalListeners.delete(listener);
  }

  /** Called after a gap closed (the gap annotator looks for work). */
  onGapClosed(listener: () => void): () => void {
    this.gapClosedListeners.add(listener);
    return () => this.gapClosedListeners.delete(listener);
  }

  /** Records the interval the gateway was not running (before any source is up), then starts every source. */
  async open(startedAt: number): Promise<void> {
    this.gapWatcher.start(startedAt);
    await this.startEach(this.list);
  }

  /**
   * Builds the sources of the changed sections from `next` (no I/O). A section that cannot be built
   * or a name used twice throws here, with nothing running touched.
   */
  async prepare(changed: readonly SourceSection[], next: SourceSections): Promise<SourceChange> {
    const started: Source[] = [];
    // The new sources' stats replace the running ones' only at the swap: a reload refused here
    // leaves the running sources counted and watched.
    const pending: Array<[string, SourceStats]> = [];
    for (const section of changed) started.push(...(await buildSourceSection(section, next, (name, kind) => this.makeContext(name, kind, pending))));
    const kinds: readonly string[] = changed;
    assertUniqueNames([...this.list.filter((s) => !kinds.includes(s.kind)), ...started]);
    const stopped = this.list.filter((s) => kinds.includes(s.kind));
    return {
      stopped,
      started,
      swap: async () => {
        // Closing a source commits what it already handed over (its appends resolve on commit), so
        // no sample is lost between the old and the new source.
        await Promise.allSettled(stopped.map((s) => s.close()));
        for (const s of stopped) this.list.splice(this.list.indexOf(s), 1);
        this.list.push(...started);
        for (const [name, stats] of pending) this.register(name, stats);
      },
      start: async () => {
        this.sections = next;
        await this.startEach(started);
      },
    };
  }

  status(): Pick<StatusReadings, 'sources' | 'sourceRates'> {
    return {
      sources: this.list.map((src) => src.status()),
      sourceRates: Object.fromEntries(this.list.map((src) => [src.name, this.stats.get(src.name)?.readPerSecond() ?? 0])),
    };
  }

  async stop(): Promise<void> {
    // Sources first, so nothing new arrives; then commit what is pending.
    await Promise.allSettled(this.list.map((s) => s.close()));
    this.gapWatcher.stop();
    await this.store.buffer.flush();
  }

  /** The quality of each running source's variables, by source name (the console's Variables page). */
  qualityTables(): Map<string, QualityTable> {
    const out = new Map<string, QualityTable>();
    for (const src of this.list) {
      const q = this.stats.get(src.name)?.quality;
      if (q) out.set(src.name, q);
    }
    return out;
  }

  /** `pending`: a reload's new source, registered at its swap (see prepare). */
  private makeContext(name: string, kind: SourceKind, pending?: Array<[string, SourceStats]>): SourceContext {
    const { logger, metrics, clock } = this.services;
    const dir = join(this.store.dataDir, 'sources', name);
    mkdirSync(dir, { recursive: true });
    const stats = new SourceStats(name, kind, metrics, clock);
    stats.onRefused = (reason, n, info) => this.refusalListeners.forEach((l) => l(name, reason, n, info));
    if (pending) pending.push([name, stats]);
    else this.register(name, stats);
    return { sink: this.sink, logger: logger.child({ source: name, kind }), stats, metrics, clock, dataDir: dir, history: { lastCommitted: this.store.buffer.lastCommitted, gaps: this.store.gaps }, conditions: this.conditions };
  }

  private register(name: string, stats: SourceStats): void {
    this.stats.set(name, stats);
    this.gapWatcher.attach(name, stats);
  }

  private async startEach(list: readonly Source[]): Promise<void> {
    for (const src of list) {
      try {
        await src.start();
      } catch (err) {
        // A source that cannot start (bad config discovered at start) must not stop the others.
        this.services.logger.error({ source: src.name, kind: src.kind, err: describeError(err) }, 'source failed to start');
      }
    }
  }
}

/** Stage 3, the sources (see SourcesStage). */
export function startSources(sections: SourceSections, services: RuntimeServices, deps: { store: StoreStage }): Promise<SourcesStage> {
  return SourcesStage.start(sections, services, deps);
}
