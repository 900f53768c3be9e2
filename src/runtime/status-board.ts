import type { Clock } from '../core/clock.js';
import { gatewayStatus, type GatewayStatus, type StatusReadings } from '../status/model.js';
import { VERSION } from '../version.js';
import type { UplinkReadingKeys } from './stages/uplink.js';

/** What shows a part of the status: `status()` reads the part it owns. */
type Part<K extends keyof StatusReadings> = { status(): Pick<StatusReadings, K> };

/** The stages' parts of the status readings. */
export interface StatusParts {
  store: Part<'buffer' | 'ingestRate' | 'recoveredFrom' | 'setAside' | 'gaps' | 'store'>;
  uplink: Part<UplinkReadingKeys>;
  sources: Part<'sources' | 'sourceRates'>;
  reloads: Part<'config'>;
  surfaces: Part<'fleet'>;
  features: Part<'annotations'>;
}

/**
 * Where `status()` reads from (the model itself is src/status/model.ts). Stages are shown as they
 * start; the surfaces and the fleet publisher read the status while later stages still start, so it
 * leaves out what is not there yet (annotations).
 */
export class StatusBoard {
  private readonly parts: Partial<StatusParts> = {};
  private memory: GatewayStatus['gateway']['memory'] = { rss_bytes: 0, heap_used_bytes: 0, external_bytes: 0 };

  constructor(private readonly gateway: { name: string; startedAt: number; clock: Clock }) {}

  show(parts: Partial<StatusParts>): void {
    Object.assign(this.parts, parts);
  }

  readonly status = (): GatewayStatus => {
    const { store, uplink, sources, reloads, surfaces, features } = this.parts;
    if (!store || !uplink || !sources || !reloads) throw new Error('no status yet: the gateway is starting');
    return gatewayStatus({
      ...store.status(),
      ...uplink.status(),
      now: this.gateway.clock.now(),
      gateway: { name: this.gateway.name, version: VERSION, startedAt: this.gateway.startedAt, pid: process.pid, memory: this.memoryNow() },
      ...sources.status(),
      fleet: null,
      annotations: null,
      ...surfaces?.status(),
      ...features?.status(),
      ...reloads.status(),
    });
  };

  /**
   * process.memoryUsage() opens /proc/self/stat and throws EMFILE when every descriptor is taken
   * (issue 12 §1); /status then shows the last reading instead of failing.
   */
  private memoryNow(): GatewayStatus['gateway']['memory'] {
    try {
      const m = process.memoryUsage();
      this.memory = { rss_bytes: m.rss, heap_used_bytes: m.heapUsed, external_bytes: m.external };
    } catch {
      /* keep the last reading */
    }
    return this.memory;
  }
}
