/**
 * The JSON of the local annotations API (api.ts) as its readers see it: the operator panel
 * (annotations/web), the console's Annotations page and `edge-gateway annotations`. The server
 * builds it with these types (entryView, downtimeView, the panel in index.ts) and the pages read
 * it with them, so a field renamed on one side fails the typecheck of the other.
 */
import type { UplinkCondition } from '../uplink/uplink-health.js';
import type { AlarmCategory } from './alarm-config.js';
import type { AnnotationsConfig } from './config.js';
import type { AnnotationType, DeliveryState, Origin, OriginKind, SiteRef } from './model.js';

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
  /** Who recorded it: an operator (panel, API, MQTT trigger), a detector, a machine alarm, a gap. */
  origin_kind: OriginKind;
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

/**
 * What the machine's own state signal says now, in the operator's words: the last sample of the
 * machine's first downtime detector that has seen one (annotations.detectors[].states names the
 * values; else "Stopped" while the detector's condition holds, "Running" otherwise).
 */
export interface MachineStateView {
  words: string;
  /** The detector's condition holds: the machine is down by its own signal. */
  down: boolean;
  value: number;
  /** Timestamp of that sample (epoch ms). */
  at: number;
  /** Start of the stop in progress (epoch ms), null while running. */
  since: number | null;
  /** The stop lasted min_duration: it becomes a downtime annotation when it ends. */
  recorded: boolean;
  min_duration_ms: number;
}

/** A machine condition (OPC UA alarm) of the machine active now, as the tile lists it. */
export interface PanelAlarm {
  external_id: string;
  /** ConditionName (or the event type's name). */
  condition: string;
  /** The rule's reason text, else its reason code; null for an alarm no rule maps. */
  reason: string | null;
  /** The machine's message at activation. */
  message: string;
  severity: number;
  /** Active since (epoch ms, the server's clock). */
  since: number;
  acked: boolean | null;
}

export interface PanelMachine {
  key: string;
  name: string;
  reasons: string[];
  downtime: DowntimeView | null;
  detected: DetectedEpisode[];
  /** Null when no detector of the machine has seen a sample (the gateway does not know its state). */
  state: MachineStateView | null;
  /** Its OPC UA alarms active now (annotations.alarms), most severe first. */
  alarms: PanelAlarm[];
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

/** A machine condition (OPC UA Part 9) behind an annotation, as last reported. */
export interface AlarmDetailView {
  server: string;
  condition_id: string;
  condition_name: string | null;
  source_name: string;
  source_node: string | null;
  event_type: string;
  event_type_name: string | null;
  severity: number;
  message: string;
  reason_code: string | null;
  category: AlarmCategory | null;
  /** open: active now; closed: a range annotation was queued; instant: an event without a range. */
  record: 'open' | 'closed' | 'instant';
  active: boolean | null;
  acked: boolean | null;
  confirmed: boolean | null;
  retain: boolean | null;
  active_since: string;
  ended_at: string | null;
  /** Why the end is not the server's inactive transition (inferred), or null when it is. */
  end_inferred: string | null;
  /**
   * Where the server sent no event Time (OPC UA's null time), the stand-in each time came from:
   * `ReceiveTime` or `gateway` (its receive time); null when the times are the server's own.
   */
  time_sources: { start?: string; end?: string } | null;
  last_event_at: string;
  last_known_active_at: string;
}

/** An annotation of the other side an annotation overlaps (operator ↔ alarm of the same machine). */
export interface AnnotationLinkView {
  external_id: string;
  origin_kind: 'operator' | 'alarm';
  origin: Origin | null;
  text: string | null;
  started_at: string | null;
  ended_at: string | null;
  /** The other entry's delivery state; open: an alarm still active; pending: a downtime still open on the panel. */
  state: DeliveryState | 'open' | 'pending';
}

export interface AnnotationFlagView {
  flag: string;
  detail: string;
  at: string;
}

/** An entry with what the machine said about it (GET /api/annotations, with annotations.alarms or reconciliation). */
export interface AnnotationDetailView extends AnnotationView {
  alarm: AlarmDetailView | null;
  links: AnnotationLinkView[];
  flags: AnnotationFlagView[];
  /** An operator's downtime while the machine's running signal said it ran. */
  contradicted_by_machine_state: { detail: string } | null;
}

/** A machine condition active now; its range annotation is queued when it ends. */
export interface OpenAlarmView {
  external_id: string;
  machine: string | null;
  origin: 'alarm';
  origin_kind: 'alarm';
  alarm: AlarmDetailView;
  links: AnnotationLinkView[];
}

/** GET /api/annotations. */
export interface AnnotationListResponse {
  annotations: Array<AnnotationView | AnnotationDetailView>;
  counts: Record<DeliveryState, number>;
  open_alarms: OpenAlarmView[];
}
