import type { ChunkTotals } from './chunks/store.js';

/**
 * The buffer's in-memory counts, shared by the rooms (README.md B8: each changes only after the
 * transaction that changed the file has committed). Counting from the file on every read would be
 * exact but costs a scan per status call; these are kept instead, and re-read from the file
 * (`resync`) after operations that re-encode chunks and so change their byte sizes.
 */
export class Tally {
  /** Samples in the samples table (the live tail), acknowledged-but-undeleted ones included. */
  rows = 0;
  /** Samples in chunks. */
  sealed = 0;
  chunks = 0;
  chunkBytes = 0;
  /** Chunks the sealer wrote since the start (a counter, not a level). */
  chunksSealedTotal = 0;
  /** Samples committed since the start. */
  committedTotal = 0;

  /** Unsent samples, rows and sealed. */
  get samples(): number {
    return this.rows + this.sealed;
  }

  /** Sets the chunk counts from the chunks table (after a commit that re-encoded chunks). */
  resync(t: ChunkTotals): void {
    this.sealed = t.samples;
    this.chunks = t.chunks;
    this.chunkBytes = t.bytes;
  }
}
