import type { RefusalReason } from '../../core/sample.js';

/** One MQTT message as the transports hand it to the pipeline. */
export interface InboundMessage {
  topic: string;
  payload: Buffer;
  qos: 0 | 1 | 2;
  retain: boolean;
  /** Wall-clock ms when the message arrived (the timestamp of values that carry none). */
  receivedAt: number;
}

/**
 * A value found in a payload; `ts` is undefined when the payload carries no timestamp for it (the
 * pipeline then stamps the arrival time in place). Decoders always set the `ts` key, so every
 * sample object has the same shape on its way into the buffer.
 */
export interface RawSample {
  variable: string;
  value: number;
  ts: number | undefined;
}

/** A value (or a whole message) that did not become a sample, and why, in words for the log. */
export interface Refusal {
  reason: RefusalReason;
  detail: string;
  /** The machine variable the value was for, when the decoder got that far (its quality becomes bad or uncertain). */
  variable?: string;
}

export interface Decoded {
  samples: RawSample[];
  refusals: Refusal[];
  /** The message carries no data by design (Sparkplug NDEATH, NCMD, STATE ...); not a refusal. */
  ignored?: string;
  /**
   * Who sent it, when the decoder tells senders apart (a Sparkplug edge node or device): a death of
   * that sender makes the variables it delivered stale. Default: the subscription.
   */
  origin?: number;
}

/** Turns payloads of one subscription into samples. Must not throw for any input; the pipeline guards it anyway. */
export interface PayloadDecoder {
  decode(msg: InboundMessage): Decoded;
  /** Extra detail for `status()` (Sparkplug edge nodes ...). */
  detail?(): Record<string, unknown>;
}

/** engineering = raw * scale + offset, refused when that is no longer finite. */
export function scaled(value: number, scale: number, offset: number): number {
  return scale === 1 && offset === 0 ? value : value * scale + offset;
}

export const MACHINE_VARIABLE_ID = /^mvr_[A-Za-z0-9_]+$/;

/**
 * The `payload_variables` allow-list of a subscription as a predicate: exact ids, or prefixes
 * written with a trailing "*". Undefined allows every id.
 */
export function payloadVariableAllowed(list: readonly string[] | undefined): (variable: string) => boolean {
  if (list === undefined) return () => true;
  const exact = new Set(list.filter((e) => !e.endsWith('*')));
  const prefixes = list.filter((e) => e.endsWith('*')).map((e) => e.slice(0, -1));
  return (v) => exact.has(v) || prefixes.some((p) => v.startsWith(p));
}
