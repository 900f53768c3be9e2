import type { GatewayConfig } from '../config/schema.js';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import type { TrackingClient } from '../uplink/client.js';
import type { Catalog } from './api/build.js';

export type { Catalog };

/** A GET never makes the gateway read the catalog upstream more often than this. */
export const CATALOG_MIN_AGE_MS = 60_000;
/** Nor does an explicit refresh (POST), so a script looping on it cannot keep the service busy. */
export const CATALOG_REFRESH_MIN_AGE_MS = 10_000;
/** How long one read may wait behind data in the request budget before the console is told so. */
export const CATALOG_BUDGET_WAIT_MS = 60_000;

export interface CatalogDeps {
  client: TrackingClient;
  service: () => GatewayConfig['service'];
  /** Wall clock for read_at, monotonic clock for the copy's age. */
  clock: Clock;
}

/**
 * The console's copy of the organisation's catalog. It names the machine of each
 * variable and feeds the mapping on the build page.
 *
 * A GET that starts work is a write (src/http/guard.ts): a cross-site `<img>` pointing at
 * `/console/api/catalog?refresh=1` made the gateway read every page of both lists again, each
 * time, ahead of sample data in the request budget. Now:
 * - GET serves the copy, and reads upstream only when there is none or it is older than
 *   CATALOG_MIN_AGE_MS: whatever a page makes a browser fetch, at most one read a minute;
 * - reading again on purpose is POST /console/api/catalog/refresh, under the write guard (same
 *   origin, JSON or X-Requested-By, the token), at most once per CATALOG_REFRESH_MIN_AGE_MS;
 * - every read goes at the budget's 'background' priority: only when no data call waits.
 */
export class ConsoleCatalog {
  private copy: { at: number; body: Catalog } | null = null;
  private loading: Promise<Catalog> | null = null;
  private warmed = false;
  constructor(private readonly deps: CatalogDeps) {}

  private monotonic(): number {
    return this.deps.clock.monotonic();
  }

  /** The copy, read again when missing or older than `minAgeMs`. */
  get(minAgeMs = CATALOG_MIN_AGE_MS): Promise<Catalog> {
    if (this.copy && this.monotonic() - this.copy.at < minAgeMs) return Promise.resolve(this.copy.body);
    this.loading ??= this.load().finally(() => {
      this.loading = null;
    });
    return this.loading;
  }

  /** Starts one read the first time the variable list is asked for (machine names); never blocks. */
  warm(): void {
    if (this.warmed) return;
    this.warmed = true;
    this.get().catch(() => undefined);
  }

  /** The copy as it is, without reading (null before the first read); starts a read when there is none. */
  current(): Catalog | null {
    if (!this.copy) this.warm();
    return this.copy?.body ?? null;
  }

  /** Variable id -> machine name, from the copy (null before the first read). */
  machines(): Map<string, string | null> | null {
    return this.copy ? new Map(this.copy.body.variables.map((v) => [v.id, v.machine])) : null;
  }

  /** Variable id -> unit (units next to values), from the copy; null before the first read. */
  units(): Map<string, string | null> | null {
    return this.copy ? new Map(this.copy.body.variables.map((v) => [v.id, v.unit])) : null;
  }

  unitOf(id: string): string | null {
    return this.copy?.body.variables.find((v) => v.id === id)?.unit ?? null;
  }

  machineOf(id: string): string | null {
    return this.copy?.body.variables.find((v) => v.id === id)?.machine ?? null;
  }

  private async load(): Promise<Catalog> {
    const { fetchCatalog, CatalogCheckError } = await import('../uplink/catalog.js');
    const signal = AbortSignal.timeout(CATALOG_BUDGET_WAIT_MS);
    try {
      const c = await fetchCatalog(this.deps.client, this.deps.service(), { signal, priority: 'background' });
      const body: Catalog = {
        machines: [...c.machines].map(([id, name]) => ({ id, name })),
        variables: c.variables.map((v) => ({ id: v.id, name: v.name, machine: v.machineId ? (c.machines.get(v.machineId) ?? v.machineId) : null, unit: v.unit })),
        read_at: this.deps.clock.now(),
      };
      this.copy = { at: this.monotonic(), body };
      return body;
    } catch (err) {
      if (signal.aborted) {
        throw new HttpError(503, 'catalog_busy', `the catalog is read only while no sample data waits for the request budget (uplink.requests_per_minute), and data kept it busy for ${CATALOG_BUDGET_WAIT_MS / 1000} s; try again later`);
      }
      throw new HttpError(502, 'catalog_unavailable', err instanceof CatalogCheckError ? err.message : describeError(err));
    }
  }
}

/** GET /console/api/catalog (a read, from the copy) and POST /console/api/catalog/refresh (a write). */
export function registerCatalogRoutes(http: LocalHttpServer, catalog: ConsoleCatalog): void {
  http.route('GET', '/console/api/catalog', async ({ url }) => {
    if (url.searchParams.has('refresh')) {
      throw new HttpError(
        400,
        'refresh_is_a_post',
        `GET /console/api/catalog answers from the gateway's copy (read from the service at most once every ${CATALOG_MIN_AGE_MS / 1000} s); to read it again now, POST /console/api/catalog/refresh`,
        'refresh',
      );
    }
    return { json: await catalog.get() };
  }, { name: 'console catalog' });

  http.route('POST', '/console/api/catalog/refresh', async () => ({ json: await catalog.get(CATALOG_REFRESH_MIN_AGE_MS) }), { name: 'console catalog refresh' });
}
