import { createHash, randomUUID } from 'node:crypto';
import { EXTERNAL_ID_PATTERN, MAX_EXTERNAL_ID_CHARS } from './model.js';

/**
 * External ids the gateway assigns (interface §2.1: 1-100 characters of [A-Za-z0-9-_], unique in
 * the organisation). Every annotation gets one when it is created, stored in the outbox in the
 * same transaction, and sent with every attempt: a retry after a timeout or a crash can then only
 * meet a 409, which means "already delivered" (§4.1, CONTRACT.md).
 *
 * The gateway name (`gateway.name`, at most 40 characters of the same alphabet) is the prefix, so
 * ids of several gateways of one organisation never collide and an id tells where it came from.
 */

/** A fresh id: `<gateway>-<32 hex>` (random: unique even if the outbox database is replaced). */
export function newExternalId(gatewayName: string): string {
  return checked(`${gatewayName}-${randomUUID().replace(/-/g, '')}`);
}

/**
 * A deterministic id for an automatic downtime: the same rule and start always give the same id,
 * so even a detector that re-detects after its database was lost meets a 409, not a duplicate.
 */
export function detectorExternalId(gatewayName: string, ruleFingerprint: string, startedAt: number): string {
  const h = createHash('sha256').update(ruleFingerprint).digest('hex').slice(0, 12);
  return checked(`${gatewayName}-auto-${h}-${startedAt.toString(36)}`);
}

/**
 * A deterministic id for an MQTT message that carries no external_id: a redelivered message
 * (QoS 1 is at-least-once, MQTT §4.3.2) then maps to the same annotation instead of a second one.
 */
export function contentExternalId(gatewayName: string, payload: Buffer | string): string {
  const h = createHash('sha256').update(payload).digest('hex').slice(0, 32);
  return checked(`${gatewayName}-mqtt-${h}`);
}

/**
 * A deterministic id for one activation of a machine condition: the same condition of the
 * same server that became active at the same time always gives the same id, so a ConditionRefresh,
 * a restart or a lost database can only meet a 409. `kind` r: range (a mapped condition), i: instant
 * (an unmapped alarm), e: a plain event (then `activeSince` is 0 and the id hashes its EventId).
 */
export function alarmExternalId(gatewayName: string, kind: 'r' | 'i' | 'e', server: string, conditionId: string, activeSince: number): string {
  const h = createHash('sha256').update(`${server}|${conditionId}`).digest('hex').slice(0, kind === 'e' ? 24 : 12);
  return checked(`${gatewayName}-alarm${kind}-${h}${kind === 'e' ? '' : `-${activeSince.toString(36)}`}`);
}

function checked(id: string): string {
  // gateway.name is validated to 1-40 characters of [A-Za-z0-9_-], so this cannot fail; kept as a guard.
  if (id.length > MAX_EXTERNAL_ID_CHARS || !EXTERNAL_ID_PATTERN.test(id)) throw new Error(`generated external_id ${JSON.stringify(id)} breaks §2.1`);
  return id;
}
