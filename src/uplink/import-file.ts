import { open } from 'node:fs/promises';
import { createIsoFormatter } from '../core/time.js';

/** Rows as the buffer stores them: `[seq, variableId, ts, value]`. */
export type RawRow = [number, number, number, number];

/** Where the rows come from: chunks of raw rows and the variable dictionary. */
export interface RowSource {
  chunks: Iterable<RawRow[]>;
  variableName(id: number): string;
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
export async function buildImportFile(rows: RowSource, path: string, maxBytes: number, idField: string, signal?: AbortSignal): Promise<BuildResult> {
  const handle = await open(path, 'w');
  const iso = createIsoFormatter();
  // Per variable id: the JSON of `,"<idField>":"<variable>","value":` prefix pieces, computed once.
  const varJson = new Map<number, { text: string; bytes: number }>();
  const fieldPart = `,${JSON.stringify(idField)}:`;
  let pending = HEAD;
  let bytes = HEAD.length;
  let count = 0;
  let lastSeq: number | null = null;
  let full = false;
  try {
    for (const chunk of rows.chunks) {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      for (let i = 0; i < chunk.length; i++) {
        const row = chunk[i];
        const varId = row[1];
        let v = varJson.get(varId);
        if (!v) {
          const text = `${fieldPart}${JSON.stringify(rows.variableName(varId))},"value":`;
          v = { text, bytes: Buffer.byteLength(text) };
          varJson.set(varId, v);
        }
        // ASCII apart from the variable id, whose byte length is known.
        const stamp = iso(row[2]);
        const num = String(row[3]);
        // {"timestamp":"<24>"  +  ,"id":"...","value":  +  <num>  +  }
        const itemBytes = 15 + stamp.length + v.bytes + num.length + 1 + (count > 0 ? 1 : 0);
        if (bytes + itemBytes + TAIL.length > maxBytes) {
          full = true;
          break;
        }
        pending += `${count > 0 ? ',' : ''}{"timestamp":"${stamp}"${v.text}${num}}`;
        bytes += itemBytes;
        count += 1;
        lastSeq = row[0];
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
