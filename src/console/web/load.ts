// A page's data: GET once, then every few seconds, with the error the gateway gave.
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, messageOf } from './lib.js';

export interface Loaded<T> {
  data: T | null;
  error: string | null;
  /** 200 once loaded; the error answer's status, or 0 when the request did not get one. */
  status: number;
  /** The path the data (or error) is of: a page that changes its path tells old data from new. */
  path: string | null;
}

/** GET `path` now and every 5 s while the page is shown, again when `deps` change; also returns a reload. */
export function useLoad<T>(path: string, deps: unknown[] = []): [Loaded<T>, () => void] {
  const [state, set] = useState<Loaded<T>>({ data: null, error: null, status: 0, path: null });
  const load = () => {
    api<T>(path).then(
      (data) => set({ data, error: null, status: 200, path }),
      (e: unknown) => set({ data: null, error: messageOf(e), status: e instanceof ApiError ? e.status : 0, path }),
    );
  };
  useEffect(() => {
    load();
    const t = setInterval(load, 5000);
    return () => clearInterval(t);
  }, deps);
  return [state, load];
}

/** The message of what the service or the gateway answered: a string, `{message}` or `{error: {message}}`. */
export function serviceMessage(detail: unknown): string {
  if (detail === null || detail === undefined) return '';
  if (typeof detail === 'string') return detail;
  const d = detail as { message?: string; error?: { message?: string } };
  return d.message ?? d.error?.message ?? JSON.stringify(detail);
}
