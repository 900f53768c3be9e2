import type { AnnotationsRuntime, AnnotationsSection } from '../../annotations/index.js';
import type { GapAnnotator } from '../../annotations/gap-annotator.js';
import type { GapsConfig } from '../../buffer/gaps-config.js';
import type { StatusReadings } from '../../status/model.js';
import type { ConfigReloads } from '../reload.js';
import type { SourcesStage } from './sources.js';
import type { RuntimeServices, Stage } from './stage.js';
import type { StoreStage } from './store.js';
import type { SurfacesStage } from './surfaces.js';
import type { UplinkStage } from './uplink.js';

export interface FeaturesSettings {
  annotations: AnnotationsSection;
  gaps: GapsConfig;
  gatewayName: string;
}

export interface FeaturesDeps {
  store: StoreStage;
  uplink: UplinkStage;
  sources: SourcesStage;
  surfaces: SurfacesStage;
  reloads: ConfigReloads;
}

/**
 * Stage 5, the features: operator annotations (outbox, local API and operator page on the
 * surfaces' HTTP server, MQTT trigger, downtime detectors fed by the sources' sink) and, with
 * gaps.annotate, the gap annotator that turns unfilled gaps into annotations. A reload
 * that changes the annotations section rebuilds them here. Each is loaded only when configured.
 */
export class FeaturesStage implements Stage {
  private running: { annotations: AnnotationsRuntime; untap: () => void; gapAnnotator: GapAnnotator | null } | null = null;
  private readonly unsubscribe: Array<() => void>;

  private constructor(
    private readonly settings: FeaturesSettings,
    private readonly services: RuntimeServices,
    private readonly deps: FeaturesDeps,
  ) {
    this.unsubscribe = [
      deps.reloads.onReload(async (plan, next) => {
        if (plan.annotations) await this.restart(next.annotations);
      }),
      deps.sources.onGapClosed(() => this.running?.gapAnnotator?.run()),
    ];
  }

  static async start(settings: FeaturesSettings, services: RuntimeServices, deps: FeaturesDeps): Promise<FeaturesStage> {
    const stage = new FeaturesStage(settings, services, deps);
    try {
      await stage.startAnnotations(settings.annotations);
    } catch (err) {
      await stage.stop();
      throw err;
    }
    return stage;
  }

  /** The running annotations, or null (section absent). */
  get annotations(): AnnotationsRuntime | null {
    return this.running?.annotations ?? null;
  }

  status(): Pick<StatusReadings, 'annotations'> {
    return { annotations: this.running?.annotations.status() ?? null };
  }

  async stop(): Promise<void> {
    this.unsubscribe.forEach((u) => u());
    await this.stopAnnotations();
  }

  private async restart(section: AnnotationsSection): Promise<void> {
    await this.stopAnnotations();
    await this.startAnnotations(section);
  }

  private async startAnnotations(section: AnnotationsSection): Promise<void> {
    if (!section) return;
    const { logger, metrics, clock } = this.services;
    const { store, uplink, sources, surfaces } = this.deps;
    // Loaded only when configured: it brings the HMI page and an MQTT client with it.
    const { startAnnotations } = await import('../../annotations/index.js');
    const annotations = await startAnnotations({
      annotations: section,
      gatewayName: this.settings.gatewayName,
      owners: store.annotationOwners, // the outbox and the conditions: owners of the gateway's file of their own
      client: uplink.client,
      health: uplink.health,
      http: surfaces.http,
      logger: logger.child({ component: 'annotations' }),
      metrics,
      clock,
      dataDir: store.dataDir,
      conditions: sources.conditions,
      // The OPC UA servers whose condition events are read (opcua.servers[].events), as configured now.
      eventServers: (this.deps.reloads.config.opcua?.servers ?? []).filter((s) => s.events).map((s) => s.name),
    });
    if (!annotations) return;
    const untap = sources.sink.addTap(annotations);
    this.running = { annotations, untap, gapAnnotator: null };
    if (!this.settings.gaps.annotate) return;
    // Unfilled gaps become range annotations through the same outbox.
    const { GapAnnotator } = await import('../../annotations/gap-annotator.js');
    const gapAnnotator = new GapAnnotator({
      ledger: store.gaps,
      store: annotations.store,
      gatewayName: this.settings.gatewayName,
      site: section.site,
      machines: section.machines,
      sources: () => sources.inventory(),
      minDurationMs: this.settings.gaps.min_duration,
      onQueued: () => annotations.sender.notify(),
      logger: logger.child({ component: 'gaps' }),
      metrics,
      clock,
    });
    this.running.gapAnnotator = gapAnnotator;
    gapAnnotator.start();
  }

  private async stopAnnotations(): Promise<void> {
    const running = this.running;
    this.running = null;
    if (!running) return;
    running.gapAnnotator?.stop();
    running.untap();
    await running.annotations.close();
  }
}

/** Stage 5, the features (see FeaturesStage). */
export function startFeatures(settings: FeaturesSettings, services: RuntimeServices, deps: FeaturesDeps): Promise<FeaturesStage> {
  return FeaturesStage.start(settings, services, deps);
}
