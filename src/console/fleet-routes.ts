import type { Clock } from '../core/clock.js';
import type { FleetWatch } from '../fleet/index.js';
import type { LocalHttpServer } from '../http/server.js';
import type { FleetResponse } from './api/fleet.js';

export interface FleetRouteDeps {
  clock: Clock;
  /** This gateway's name (gateway.name of the configuration in force). */
  self: () => string;
  /** The plant's fleet table (fleet.mqtt configured), else null/absent. */
  fleet?: FleetWatch | null;
}

/**
 * The Fleet page: every gateway publishing under fleet.mqtt.prefix, as `edge-gateway fleet`
 * shows it (same table model). The page asks every few seconds while it is open: the rows are
 * built from memory, nothing goes to the broker per request (the subscription starts with the
 * first question and ends 5 minutes after the last, src/fleet/index.ts).
 */
export function registerFleetRoutes(http: LocalHttpServer, deps: FleetRouteDeps): void {
  http.route('GET', '/console/api/fleet', async () => {
    const fleet = deps.fleet;
    let json: FleetResponse;
    if (!fleet) json = { configured: false, message: 'fleet status not configured (fleet.mqtt)', self: deps.self(), rows: [] };
    else {
      const now = () => deps.clock.now();
      const rows = await fleet.rows(now);
      json = { configured: true, self: deps.self(), now: now(), broker: fleet.broker(), rows };
    }
    return { json };
  }, { name: 'console fleet' });
}
