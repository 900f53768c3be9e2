import { open } from 'node:fs/promises';

/** One sample as read from the buffer. */
export interface ImportRow {
  seq: number;
  variable: string;
  ts: number;
  value: number;
}

export interface BuildResult {
  /** Items written. */
  itemCount: number;
  /** Seq of the last row written (the file covers rows up to here), or null when empty. */
  lastSeq: number | null;
  /** Size of the file in bytes. */
  bytes: number;
}

const HEAD = '{"items":[';
const TAIL = ']}';
/** Write to disk in pieces of about this many characters: few syscalls, bounded memory. */
const FLUSH_AT = 1 << 20;

/**
 * Streams buffer rows into an import-job file `{"items": [ITEM, ...]}` (CONTRACT.md, import jobs)
 * without ever holding the file in memory: rows arrive in chunks, are serialized into a string of
 * about 1 MB and written out. Stops before the file would exceed `maxBytes` (the service accepts
 * up to 128 MB, read as 128,000,000 bytes), so the caller learns which rows the file covers from
 * `lastSeq`.
 *
 * Items carry ISO 8601 UTC timestamps with milliseconds and `idField` as the variable field name.
 */
export async function buildImportFile(rows: Iterable<ImportRow[]>, path: string, maxBytes: number, idField: string, signal?: AbortSignal): Promise<BuildResult> {
  const handle = await open(path, 'w');
  const varJson = new Map<string, { text: string; bytes: number }>();
  const fieldPart = `,${JSON.stringify(idField)}:`;
  let pending = HEAD;
  let bytes = HEAD.length;
  let count = 0;
  let lastSeq: number | null = null;
  let full = false;
  try {
    for (const chunk of rows) {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      for (const r of chunk) {
        let v = varJson.get(r.variable);
        if (!v) {
          const text = JSON.stringify(r.variable);
          v = { text, bytes: Buffer.byteLength(text) };
          varJson.set(r.variable, v);
        }
        // ASCII apart from the variable id, whose byte length is known.
        const head = `{"timestamp":"${new Date(r.ts).toISOString()}"${fieldPart}`;
        const tail = `,"value":${String(r.value)}}`;
        const itemBytes = head.length + v.bytes + tail.length + (count > 0 ? 1 : 0);
        if (bytes + itemBytes + TAIL.length > maxBytes) {
          full = true;
          break;
        }
        pending += (count > 0 ? ',' : '') + head + v.text + tail;
        bytes += itemBytes;
        count += 1;
        lastSeq = r.seq;
      }
      if (pending.length >= FLUSH_AT) {
        await handle.write(pending);
        pending = '';
      }
      if (full) break;
    }
    pending += TAIL;
    bytes += TAIL.length;
    await handle.write(pending);
  } finally {
    await handle.close();
  }
  return { itemCount: count, lastSeq, bytes };
}
