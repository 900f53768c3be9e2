// What the operator panel asks the gateway, and what it keeps on the panel (localStorage).
import type { PanelView } from '../api-model.js';
import { send, type Answer } from '../../web/request.js';
import { readStored, TokenStore, writeStored } from '../../web/storage.js';

/** The token is kept on the panel (localStorage): a panel is set up once, then used for shifts. */
export const token = new TokenStore('local', 'edge-gateway.api_token');

/**
 * A request of the panel: marked as the HMI's (the annotation's origin); a bodiless write (cancel)
 * carries X-Requested-By, the server's CSRF rule (src/http/guard.ts). Answers every status.
 */
export function call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { 'x-annotation-origin': 'hmi' };
  if (body === undefined && method !== 'GET') headers['x-requested-by'] = 'hmi';
  return send(path, { method, body, token: token.get(), headers, timeoutMs: REQUEST_TIMEOUT_MS });
}

/** No answer within this: the gateway counts as unreachable (a tap is kept on the panel). */
export const REQUEST_TIMEOUT_MS = 6_000;

export const readPanel = (): Promise<Answer> => call('GET', '/api/panel');
export type { PanelView };

export type DowntimeAction = 'start' | 'stop' | 'cancel';
export const downtimePath = (machine: string, action: DowntimeAction): string => `/api/machines/${encodeURIComponent(machine)}/downtime/${action}`;

/** What the operator picked and typed for an open downtime: kept until stop, so a reload keeps it. */
export interface Draft {
  reason?: string | null;
  text?: string;
}

const draftKey = (machine: string, downtime: string) => `edge-gateway.draft.${machine}.${downtime}`;

export function getDraft(machine: string, downtime: string): Draft {
  try {
    return (JSON.parse(readStored('local', draftKey(machine, downtime)) || '{}') as Draft | null) || {};
  } catch {
    return {};
  }
}

export function setDraft(machine: string, downtime: string, d: Draft | null): void {
  writeStored('local', draftKey(machine, downtime), d === null ? null : JSON.stringify(d));
}
