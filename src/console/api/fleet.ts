/**
 * The Fleet page's model: GET /console/api/fleet, the rows of `edge-gateway fleet` (fleet/view.ts).
 * Built by console/fleet-routes.ts, read by console/web/page-fleet.tsx.
 */
import type { FleetWatch } from '../../fleet/index.js';
import type { FleetRow, FleetState } from '../../fleet/view.js';

export type { FleetRow, FleetState };

export type FleetBroker = ReturnType<FleetWatch['broker']>;

export type FleetResponse =
  | { configured: false; message: string; self: string; rows: FleetRow[] }
  | { configured: true; self: string; now: number; broker: FleetBroker; rows: FleetRow[] };
