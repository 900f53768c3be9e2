import { open } from 'node:fs/promises';
import type { ImportReader } from '../buffer/sample-buffer.js';

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
/** Write to disk in pieces of about this size: few syscalls, bounded memory. */
const FLUSH_AT = 1 << 20;

/**
 * Streams buffer rows into an import-job file `{"items": [ITEM, ...]}` (CONTRACT.md, import jobs)
 * without ever holding the file in memory, and stops before the file would exceed `maxBytes` (the
 * service accepts up to 128 MB, read as 128,000,000 bytes); `lastSeq` tells which rows it covers.
 * Items are `{"timestamp":"<ISO 8601 UTC, ms, Z>","<idField>":"<variable>","value":<number>}`.
 *
 * SQLite serializes the items, a block of rows per string (SampleBuffer.importReader); here the
 * blocks are joined into a reusable byte buffer and written out about 1 MB at a time. Only the block
 * that meets the size limit is taken item by item.
 */
export async function buildImportFile(reader: ImportReader, path: string, maxBytes: number, signal?: AbortSignal): Promise<BuildResult> {
  const handle = await open(path, 'w');
  const buf = Buffer.allocUnsafe(FLUSH_AT + 512 * 1024);
  let pos = 0;
  let written = 0; // bytes already on disk
  let count = 0;
  let lastSeq: number | null = null;

  const flush = async () => {
    let off = 0;
    while (off < pos) off += (await handle.write(buf, off, pos - off)).bytesWritten;
    written += pos;
    pos = 0;
  };
  /** Appends text, flushing first when the buffer cannot hold it (a block is far below its size). */
  const put = async (text: string, bytes: number) => {
    if (pos + bytes > buf.length) await flush();
    if (bytes > buf.length) {
      await handle.write(text);
      written += bytes;
      return;
    }
    pos += buf.write(text, pos, 'utf8');
  };

  try {
    pos = buf.write(HEAD, 0, 'latin1');
    for (;;) {
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
      const block = reader.nextBlock();
      if (block === null) break;
      const bytes = Buffer.byteLength(block.text) + (count > 0 ? 1 : 0);
      if (written + pos + bytes + TAIL.length <= maxBytes) {
        await put(count > 0 ? `,${block.text}` : block.text, bytes);
        count += block.count;
        lastSeq = block.lastSeq;
      } else {
        // The limit falls inside this block: take its items one by one while they fit.
        for (const [seq, item] of reader.itemsAfter(block.afterSeq, block.count)) {
          const b = Buffer.byteLength(item) + (count > 0 ? 1 : 0);
          if (written + pos + b + TAIL.length > maxBytes) break;
          await put(count > 0 ? `,${item}` : item, b);
          count += 1;
          lastSeq = seq;
        }
        break;
      }
      if (pos >= FLUSH_AT) await flush();
    }
    pos += buf.write(TAIL, pos, 'latin1');
    await flush();
  } finally {
    await handle.close();
  }
  return { itemCount: count, lastSeq, bytes: written };
}
