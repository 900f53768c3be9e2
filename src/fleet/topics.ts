/**
 * Topics on the plant broker, one subtree per gateway:
 *
 *   <prefix>/<gateway>/status   retained; the current status, or the last-will / stop message saying
 *                               it is offline or stopped (MQTT 3.1.1 §3.1.2.5: the will is published
 *                               when the connection is lost without DISCONNECT)
 *   <prefix>/<gateway>/last     retained; the last status published while online (a will cannot carry
 *                               it, so a viewer that starts late still sees what it was doing)
 *   <prefix>/<gateway>/budget   retained; its demand on the shared request budget (budget-sharing.ts),
 *                               emptied when it stops (a zero-length retained message clears it, §3.3.1.3)
 */
export type FleetTopicKind = 'status' | 'last' | 'budget';

export function fleetTopic(prefix: string, gateway: string, kind: FleetTopicKind): string {
  return `${prefix}/${gateway}/${kind}`;
}

/** `{gateway, kind}` of a topic under `prefix`, or null for anything else. */
export function parseFleetTopic(prefix: string, topic: string): { gateway: string; kind: FleetTopicKind } | null {
  if (!topic.startsWith(`${prefix}/`)) return null;
  const rest = topic.slice(prefix.length + 1).split('/');
  if (rest.length !== 2 || rest[0] === '') return null;
  const kind = rest[1];
  if (kind !== 'status' && kind !== 'last' && kind !== 'budget') return null;
  return { gateway: rest[0], kind };
}
