/**
 * The JSON of the local annotations API (api.ts) as its readers see it: the operator panel
 * (annotations/web), the console's Annotations page and `edge-gateway annotations`. The server
 * builds it with these types (entryView, downtimeView, the panel in index.ts) and the pages read
 * it with them, so a field renamed on one side fails the typecheck of the other.
 */
import type { UplinkCondition } from '../uplink/uplink-health.js';
import type { AnnotationsConfig } from './config.js';
import type { AnnotationType, DeliveryState, Origin, SiteRef } from './model.js';

/** An outbox entry (§2.3 body fields, times as ISO 8601 UTC) with its delivery state. */
export interface AnnotationView {
  external_id: string;
  type: AnnotationType;
  /** instant only */
  occurred_at?: string;
  /** range only */
  started_at?: string;
  ended_at?: string;
  text: string;
  machine_variables: string[];
  site: SiteRef;
  machine: string | null;
  origin: Origin;
  state: DeliveryState;
  attempts: number;
  last_error: string | null;
  /** The service's message when it refused the annotation. */
  refusal: string | null;
  service_id: string | null;
  request_id: string | null;
  created_at: string;
  delivered_at: string | null;
}

/** A downtime being recorded: started on the panel (manual) or by a detector. */
export interface DowntimeView {
  machine: string;
  kind: 'manual' | 'detector';
  external_id: string;
  started_at: string;
  started_ms: number;
  reason: string | null;
  text: string | null;
  origin: Origin;
}

/** A detector's episode in progress: `open` once it has lasted the rule's min_duration. */
export interface DetectedEpisode {
  machine: string;
  variable: string;
  condition: string;
  since: number;
  open: boolean;
  text: string;
  min_duration_ms: number;
}

export interface PanelMachine {
  key: string;
  name: string;
  reasons: string[];
  downtime: DowntimeView | null;
  detected: DetectedEpisode[];
}

/** GET /api/panel: everything the operator panel shows, in one request. */
export interface PanelView {
  title: string;
  gateway: string;
  /** The gateway's wall clock (epoch ms): the panel shows times on it, not on the panel's own clock. */
  now: number;
  site: AnnotationsConfig['site'];
  uplink: { condition: UplinkCondition; reason: string };
  reasons: string[];
  machines: PanelMachine[];
  recent: AnnotationView[];
  counts: Record<DeliveryState, number>;
}

/** GET /api/annotations. */
export interface AnnotationListResponse {
  annotations: AnnotationView[];
  counts: Record<DeliveryState, number>;
}
