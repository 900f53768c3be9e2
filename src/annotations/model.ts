import { toIsoUtc } from '../core/time.js';
import type { AnnotationView } from './api-model.js';

/**
 * The operator annotation as the gateway keeps it, and the limits of the interface (§2.3, §8).
 * Timestamps are epoch milliseconds in memory and in the outbox; they go on the wire as ISO 8601
 * UTC with `Z` and three fraction digits (CONTRACT.md, the service returns the same form).
 */

/** §2.3 / §8: annotation `text`, after trimming. */
export const MAX_TEXT_CHARS = 5_000;
/** §2.3 / §8: annotation `machine_variables`. */
export const MAX_MACHINE_VARIABLES = 100;
/** §2.1 / §8: `external_id` length. */
export const MAX_EXTERNAL_ID_CHARS = 100;
/** §2.1: `external_id` characters (annotations and site references). */
export const EXTERNAL_ID_PATTERN = /^[A-Za-z0-9\-_]+$/;
/** Machine variable ids, as everywhere else in the gateway (interface §2.1, `mvr_` TypeID). */
export const MACHINE_VARIABLE_PATTERN = /^mvr_[A-Za-z0-9_]+$/;
/** Site ids (interface §2.1, `ste_` TypeID). */
export const SITE_ID_PATTERN = /^ste_[A-Za-z0-9_]+$/;
/** Largest epoch ms that still prints as a four-digit-year ISO 8601 date (9999-12-31T23:59:59.999Z). */
export const MAX_EPOCH_MS = 253_402_300_799_999;

export type AnnotationType = 'instant' | 'range';
/** §2.2: a site reference in a request is exactly one of these. */
export type SiteRef = { id: string } | { external_id: string };
/** Where an annotation came from; a metric label and shown on the operator page. */
export type Origin = 'api' | 'hmi' | 'mqtt' | 'cli' | 'detector' | 'gap' | 'alarm';
export const ORIGINS: readonly Origin[] = ['api', 'hmi', 'mqtt', 'cli', 'detector', 'gap', 'alarm'];

/** Who an annotation is from, as the console groups them: a person (any operator entry point), a detector rule, a machine alarm, a gap in the data. */
export type OriginKind = 'operator' | 'detector' | 'alarm' | 'gap';
export const OPERATOR_ORIGINS: readonly Origin[] = ['api', 'hmi', 'mqtt', 'cli'];

export function originKind(origin: Origin): OriginKind {
  return origin === 'detector' || origin === 'alarm' || origin === 'gap' ? origin : 'operator';
}

/** Delivery state of an outbox entry. */
export type DeliveryState = 'queued' | 'delivered' | 'refused';

/** A validated annotation, ready to be queued. */
export interface AnnotationFields {
  type: AnnotationType;
  /** instant only */
  occurredAt: number | null;
  /** range only */
  startedAt: number | null;
  /** range only; > startedAt */
  endedAt: number | null;
  /** Trimmed, not blank, at most MAX_TEXT_CHARS. */
  text: string;
  machineVariables: string[];
  site: SiteRef;
  /** Configured machine key this annotation is about (local only, never sent). */
  machine: string | null;
}

export interface NewAnnotation extends AnnotationFields {
  externalId: string;
  origin: Origin;
}

/** A row of the outbox. */
export interface OutboxEntry extends NewAnnotation {
  /** Outbox sequence: creation order, also the delivery order. */
  seq: number;
  state: DeliveryState;
  attempts: number;
  /** Last transient failure (network, 5xx, 429 ...), cleared on delivery. */
  lastError: string | null;
  /** The service's message when it refused the annotation (400). */
  refusal: string | null;
  /** `mda_...` from the 201; null when delivery was confirmed by a 409. */
  serviceId: string | null;
  requestId: string | null;
  createdAt: number;
  updatedAt: number;
  deliveredAt: number | null;
}

/** The request body of `POST /machine-data-annotations` (§2.3), always with our external_id. */
export function requestBody(a: NewAnnotation): Record<string, unknown> {
  const times =
    a.type === 'instant'
      ? { occurred_at: toIsoUtc(a.occurredAt!) }
      : { started_at: toIsoUtc(a.startedAt!), ended_at: toIsoUtc(a.endedAt!) };
  return {
    type: a.type,
    ...times,
    text: a.text,
    machine_variables: a.machineVariables.map((id) => ({ id })),
    site: a.site,
    external_id: a.externalId,
  };
}

/** JSON view of an outbox entry for the local API, the operator page and the CLI. */
export function entryView(e: OutboxEntry): AnnotationView {
  return {
    external_id: e.externalId,
    type: e.type,
    ...(e.type === 'instant' ? { occurred_at: toIsoUtc(e.occurredAt!) } : { started_at: toIsoUtc(e.startedAt!), ended_at: toIsoUtc(e.endedAt!) }),
    text: e.text,
    machine_variables: e.machineVariables,
    site: e.site,
    machine: e.machine,
    origin: e.origin,
    origin_kind: originKind(e.origin),
    state: e.state,
    attempts: e.attempts,
    last_error: e.lastError,
    refusal: e.refusal,
    service_id: e.serviceId,
    request_id: e.requestId,
    created_at: toIsoUtc(e.createdAt),
    delivered_at: e.deliveredAt === null ? null : toIsoUtc(e.deliveredAt),
  };
}

/** True when two annotations carry the same content (used for idempotent replays of one external_id). */
export function sameContent(a: AnnotationFields, b: AnnotationFields): boolean {
  return (
    a.type === b.type &&
    a.occurredAt === b.occurredAt &&
    a.startedAt === b.startedAt &&
    a.endedAt === b.endedAt &&
    a.text === b.text &&
    JSON.stringify(a.machineVariables) === JSON.stringify(b.machineVariables) &&
    JSON.stringify(a.site) === JSON.stringify(b.site)
  );
}
