/**
 * Readers for values whose shape only their producer knows (a source's status `detail`, a status
 * document read over HTTP): each gives the value when it has the type, else a neutral one.
 */
export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
export const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
export const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
export const rec = (v: unknown): Record<string, unknown> => (isRecord(v) ? v : {});
/** A count as operators read it: 12,345. */
export const count = (x: number) => Math.round(x).toLocaleString('en-US');
