/**
 * Page packing for the `chunks` table: the order in which a seal or compaction job's chunks are
 * written, so that SQLite's leaf pages come out full.
 *
 * Why: a table b-tree keeps a row of up to `U − 35` bytes (U = page size) whole in its leaf page,
 * and a larger one as a local part plus full overflow pages (SQLite file format §1.6, "cell payload
 * overflow"). Written in key order, leaf pages fill like next-fit bin packing: a page is closed as
 * soon as the next cell does not fit. Chunks of one to three kilobytes in 4 KB pages then leave a
 * quarter of every leaf page empty (measured: 26 % of the leaf bytes of a compacted 2 M-sample
 * backlog). Inside a job's range the order of chunks is free (B3, chunks/sealer.ts), so the job's
 * chunks are ordered by first-fit decreasing bins; next-fit over a sequence of bins that each fit
 * a page uses no more pages than there are bins, so the b-tree gets the FFD packing.
 */

/** Bytes a varint of `v` (≥ 0) takes in SQLite's format (1–9). */
function varintBytes(v: number): number {
  let n = 1;
  while (v >= 128 && n < 9) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

/** Bytes an integer column value takes in a record (serial types 1–6, 8, 9; §2.1 record format). */
function intBytes(v: number): number {
  if (!Number.isInteger(v)) return 8; // stored as a REAL
  if (v === 0 || v === 1) return 0;
  const a = v < 0 ? -v - 1 : v;
  if (a <= 0x7f) return 1;
  if (a <= 0x7fff) return 2;
  if (a <= 0x7fffff) return 3;
  if (a <= 0x7fffffff) return 4;
  if (a <= 0x7fffffffffff) return 6;
  return 8;
}

/** The columns of a chunk row besides its key (seq_from is the rowid: a NULL in the record). */
export interface ChunkCellFields {
  var: number;
  n: number;
  ts_min: number;
  ts_max: number;
  dataBytes: number;
}

/** Size of the record (payload) of a chunks row: header plus body. */
export function chunkRecordBytes(c: ChunkCellFields): number {
  const blobType = 2 * c.dataBytes + 12;
  const body = intBytes(c.var) + intBytes(c.n) + intBytes(c.ts_min) + intBytes(c.ts_max) + c.dataBytes;
  // Header: its own size varint, then one serial type per column (seq_from NULL, var, n, ts_min, ts_max, data).
  const types = 5 + varintBytes(blobType);
  return varintBytes(types + 1) + types + body;
}

/**
 * How SQLite stores a table-leaf payload of `payload` bytes (§1.6): whole in the leaf up to
 * U − 35 bytes; beyond, a local part chosen so that the overflow pages (U − 4 bytes each) come out
 * full when it can, else the minimum local part.
 */
export function payloadLayout(payload: number, pageSize: number): { local: number; overflowPages: number } {
  const maxLocal = pageSize - 35;
  if (payload <= maxLocal) return { local: payload, overflowPages: 0 };
  const minLocal = Math.floor(((pageSize - 12) * 32) / 255) - 23;
  const surplus = minLocal + ((payload - minLocal) % (pageSize - 4));
  const local = surplus <= maxLocal ? surplus : minLocal;
  return { local, overflowPages: Math.ceil((payload - local) / (pageSize - 4)) };
}

/**
 * Bytes a table-leaf cell with `payload` bytes and key `rowid` takes in its page, its 2-byte cell
 * pointer included: payload size and rowid varints, the local payload, and a 4-byte overflow page
 * number when it spills.
 */
export function leafCellBytes(payload: number, rowid: number, pageSize: number): number {
  const { local, overflowPages } = payloadLayout(payload, pageSize);
  return Math.max(4, varintBytes(payload) + varintBytes(rowid) + local + (overflowPages > 0 ? 4 : 0)) + 2;
}

/** Space for cells in a table leaf page: the page minus its 8-byte header. */
export function leafCapacity(pageSize: number): number {
  return pageSize - 8;
}

/**
 * The order in which to write items of the given cell sizes so that next-fit packing into pages of
 * `capacity` bytes equals first-fit-decreasing packing. Returns a permutation of the indices: the
 * items of the first bin, then those of the second, and so on. Ties keep the input order, so a
 * variable's chunks of equal size stay in the order of their samples.
 */
export function packingOrder(sizes: readonly number[], capacity: number): number[] {
  const byDecreasing = sizes.map((_, i) => i).sort((a, b) => sizes[b] - sizes[a] || a - b);
  // First fit in O(log n) per item: a segment tree of the bins' free space finds the leftmost bin
  // with room (a backlog window can hold hundreds of thousands of tiny chunks).
  let leaves = 1;
  while (leaves < Math.max(1, sizes.length)) leaves *= 2;
  const tree = new Float64Array(2 * leaves).fill(capacity); // unopened bins are empty
  const bins: number[][] = [];
  for (const i of byDecreasing) {
    const s = Math.min(sizes[i], capacity);
    let node = 1;
    while (node < leaves) node = tree[2 * node] >= s ? 2 * node : 2 * node + 1;
    const b = node - leaves;
    while (bins.length <= b) bins.push([]);
    bins[b].push(i);
    tree[node] -= s;
    for (node >>= 1; node >= 1; node >>= 1) tree[node] = Math.max(tree[2 * node], tree[2 * node + 1]);
  }
  return bins.flat();
}

