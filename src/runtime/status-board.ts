import type { Clock } from '../core/clock.js';
import { gatewayStatus, type GatewayStatus, type StatusReadings } from '../status/model.js';
import { VERSION } from '../version.js';

type Part<K extends keyof StatusReadings> = () => Pick<StatusReadings, K>;

/** The stages' parts of the status readings, each read by the stage that owns it. */
export interface StatusParts {
  store: Part<'buffer' | 'ingestRate' | 'recoveredFrom' | 'setAside' | 'gaps'>;
  uplink: Part<'maxUnsentAgeMs' | 'health' | 'budget' | 'sync' | 'backfill'>;
  sources: Part<'sources' | 'sourceRates'>;
  reloads: Part<'config'>;
  surfaces: Part<'fleet'>;
  features: Part<'annotations'>;
}

/**
 * Where `status()` reads from (the model itself is src/status/model.ts). Each stage shows its part
 * as it starts; the surfaces and the fleet publisher read the status from here, while later stages
 * are still starting, so the status simply leaves out what is not there yet (annotations, fleet).
 */
export class StatusBoard {
  private readonly parts: Partial<StatusParts> = {};

  constructor(private readonly gateway: { name: string; startedAt: number; clock: Clock }) {}

  show<K extends keyof StatusParts>(name: K, part: StatusParts[K]): void {
    this.parts[name] = part;
  }

  readonly status = (): GatewayStatus => {
    const { store, uplink, sources, reloads, surfaces, features } = this.parts;
    if (!store || !uplink || !sources || !reloads) throw new Error('no status yet: the gateway is starting');
    return gatewayStatus({
      ...store(),
      ...uplink(),
      now: this.gateway.clock.now(),
      gateway: { name: this.gateway.name, version: VERSION, startedAt: this.gateway.startedAt, pid: process.pid, memory: memoryNow() },
      ...sources(),
      fleet: null,
      annotations: null,
      ...surfaces?.(),
      ...features?.(),
      ...reloads(),
    });
  };
}

let lastMemory = { rss_bytes: 0, heap_used_bytes: 0, external_bytes: 0 };
/**
 * process.memoryUsage() opens /proc/self/stat and throws EMFILE when every descriptor is taken
 * (issue 12 §1); /status then shows the last reading instead of failing.
 */
function memoryNow(): typeof lastMemory {
  try {
    const m = process.memoryUsage();
    lastMemory = { rss_bytes: m.rss, heap_used_bytes: m.heapUsed, external_bytes: m.external };
  } catch {
    /* keep the last reading */
  }
  return lastMemory;
}
