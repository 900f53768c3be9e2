import { AttributeIds, type ClientSession } from 'node-opcua';
import type { Clock } from '../../core/clock.js';

/**
 * Beyond this difference between the server's clock and the gateway's, the source warns (once per
 * connect). Well above what a read round trip can blur on a plant network, well below the errors
 * that matter: a PLC set to local time instead of UTC, a clock set by hand months ago.
 */
export const CLOCK_OFFSET_WARN_MS = 10_000;

export interface ClockOffset {
  /** Server clock minus gateway clock, ms (positive: the server is ahead). */
  offsetMs: number;
  /** Half the round trip: the measurement is good to ± this. */
  uncertaintyMs: number;
  serverTime: number;
  gatewayTime: number;
}

/** Server_ServerStatus_CurrentTime (Part 5 §12.10, ns=0;i=2258): the server's clock, which every server has. */
const CURRENT_TIME = 'i=2258';

/**
 * Reads the server's CurrentTime and compares it with the gateway's clock at the middle of the
 * round trip. Null when the server does not answer usefully; never throws (a measurement must
 * not break a connect).
 *
 * node-opcua itself measures the same difference from the secure channel's token creation time
 * (client_secure_channel_layer `timeDrift`, NODE-OPCUA-W33 above 5 min), but only for its console
 * and through a private field; this read is part of the standard and works with any server.
 */
export async function measureClockOffset(session: ClientSession, clock: Clock): Promise<ClockOffset | null> {
  try {
    const m0 = clock.monotonic();
    const w0 = clock.now();
    const dv = await session.read({ nodeId: CURRENT_TIME, attributeId: AttributeIds.Value });
    const rtt = clock.monotonic() - m0;
    const value: unknown = dv.value?.value;
    if (!(value instanceof Date) || !Number.isFinite(value.getTime()) || value.getTime() <= 0) return null;
    const gatewayTime = w0 + rtt / 2;
    return { offsetMs: Math.round(value.getTime() - gatewayTime), uncertaintyMs: Math.round(rtt / 2), serverTime: value.getTime(), gatewayTime: Math.round(gatewayTime) };
  } catch {
    return null;
  }
}

/** True when the difference is certainly larger than CLOCK_OFFSET_WARN_MS. */
export function isLargeOffset(o: ClockOffset): boolean {
  return Math.abs(o.offsetMs) - o.uncertaintyMs > CLOCK_OFFSET_WARN_MS;
}

/** "3 h 0 min ahead of", "2 d 1 h behind", "12 s ahead of": for sentences about the server's clock. */
export function describeOffset(offsetMs: number): string {
  return `${formatDuration(Math.abs(offsetMs))} ${offsetMs >= 0 ? 'ahead of' : 'behind'}`;
}

export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 48) return `${h} h ${min % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** ISO 8601 to the second, for messages. */
export function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
