// Taps the gateway did not answer, kept on the panel (localStorage) and sent when it answers again.
import type { DowntimeView } from '../api-model.js';
import { readStored, writeStored } from '../../web/storage.js';
import type { DowntimeAction } from './requests.js';

/**
 * A tap on Start, Stop or Discard that could not be sent: no answer from the gateway (down, a
 * network cut, a restart), or an answer that says "not now" (5xx). Kept with the time of the tap
 * on the gateway's clock, so the downtime it starts or stops keeps that time (`at`) when it is
 * sent later, and in tap order per machine.
 */
export interface PendingTap {
  id: string;
  action: DowntimeAction;
  /** Epoch ms on the gateway's clock (the panel's clock plus the offset the gateway last showed). */
  at: number;
  reason?: string | null;
  text?: string | null;
}

const key = (machine: string) => `edge-gateway.pending.${machine}`;

export function loadTaps(machine: string): PendingTap[] {
  try {
    const v = JSON.parse(readStored('local', key(machine)) || '[]') as unknown;
    return Array.isArray(v) ? (v.filter((t) => t && typeof t.id === 'string' && typeof t.at === 'number' && ['start', 'stop', 'cancel'].includes(t.action)) as PendingTap[]) : [];
  } catch {
    return [];
  }
}

export function saveTaps(machine: string, taps: readonly PendingTap[]): void {
  writeStored('local', key(machine), taps.length === 0 ? null : JSON.stringify(taps));
}

export function newTapId(): string {
  return `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
}

/** The id a downtime started by a kept tap goes by on the panel until the gateway gives it its own. */
export const pendingDowntimeId = (tap: PendingTap): string => `pending-${tap.id}`;

/** A downtime as the tile shows it: the gateway's, or one a kept tap started. */
export type ShownDowntime = Pick<DowntimeView, 'external_id' | 'started_ms' | 'reason' | 'text'> & { pending: boolean };

/**
 * The machine's downtime once the kept taps are applied to what the gateway last showed: a kept
 * Start opens one at its tap time, a kept Stop or Discard ends it.
 */
export function shownDowntime(server: DowntimeView | null, taps: readonly PendingTap[]): ShownDowntime | null {
  let d: ShownDowntime | null = server ? { external_id: server.external_id, started_ms: server.started_ms, reason: server.reason, text: server.text, pending: false } : null;
  for (const t of taps) {
    if (t.action === 'start') d ??= { external_id: pendingDowntimeId(t), started_ms: t.at, reason: null, text: null, pending: true };
    else d = null;
  }
  return d;
}

/** The request body of a kept tap: what was picked and typed, and its time. */
export function tapBody(t: PendingTap): Record<string, unknown> | undefined {
  const at = new Date(t.at).toISOString();
  if (t.action === 'cancel') return { at };
  return t.action === 'stop' ? { reason: t.reason ?? null, text: t.text ?? null, at } : { at };
}
