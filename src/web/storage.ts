/**
 * The browser's storage, read and written without failing: private modes and locked-down kiosks
 * refuse it, and the pages work without it (they only forget more).
 */
export type StorageKind = 'local' | 'session';

const area = (kind: StorageKind): Storage => (kind === 'local' ? localStorage : sessionStorage);

export function readStored(kind: StorageKind, key: string): string | null {
  try {
    return area(kind).getItem(key);
  } catch {
    return null;
  }
}

/** Writes `value`, or removes the key when it is null. */
export function writeStored(kind: StorageKind, key: string, value: string | null): void {
  try {
    if (value === null) area(kind).removeItem(key);
    else area(kind).setItem(key, value);
  } catch {
    /* private mode: works without */
  }
}

/** The gateway's API token (http.api_token) as a page keeps it. */
export class TokenStore {
  constructor(
    private readonly kind: StorageKind,
    private readonly key: string,
  ) {}

  get(): string | null {
    return readStored(this.kind, this.key);
  }

  /** Keeps `token`, or forgets it (null or empty). */
  set(token: string | null): void {
    writeStored(this.kind, this.key, token || null);
  }
}
