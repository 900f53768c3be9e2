/**
 * The cost model of a maintenance job's commit (chunks/seal-schedule.ts): how long a commit that
 * writes `bytes` is expected to take on this machine, so that a sealing range or a compaction
 * window is cut to fit a slice (src/buffer/README.md B7).
 *
 * Why a fixed term: a commit costs a sync of the WAL and the transaction's own bookkeeping whatever
 * it writes, plus a cost per byte. A cost per byte alone (the former model: the duration divided by
 * the bytes) charges the fixed part to the bytes, so small commits (the seals of a trickle of
 * samples, a few rows each; any commit on a busy disk) made bytes look tens of times dearer
 * than they are, and the next compaction windows shrank to a few kilobytes: many small chunks per
 * variable, each with its own header and row (measured: 0.0029 ms per byte after three seals of a
 * trickle, against 3e-5 for the large commits before them; bench/buffer-footprint.ts).
 *
 * The model is a least-squares line through the last FIT_POINTS commits (ms against bytes),
 * constrained to a fixed term of at least 0 and a cost per byte of at least MIN_MS_PER_BYTE
 * (commits all of about one size scale the line they had instead). Each
 * kind of job (sealing, compaction) has its own: deleting rows costs more per byte than deleting
 * chunks, whose overflow pages are only put on the freelist.
 */

/** Commits the line is fitted to. */
const FIT_POINTS = 16;
/** Floor of the cost per byte (500 MB/s): a fit on noisy points must not promise more. */
const MIN_MS_PER_BYTE = 2e-6;

export class CommitCost {
  private readonly points: Array<{ bytes: number; ms: number }> = [];
  fixedMs: number;
  msPerByte: number;

  /** The starting line, before any commit was measured. */
  constructor(initial: { fixedMs: number; msPerByte: number }) {
    this.fixedMs = initial.fixedMs;
    this.msPerByte = initial.msPerByte;
  }

  /** Commits measured so far (at most FIT_POINTS are kept). */
  get measured(): number {
    return this.points.length;
  }

  /** Expected duration of a commit writing `bytes`. */
  expectedMs(bytes: number): number {
    return this.fixedMs + this.msPerByte * bytes;
  }

  /**
   * Bytes a commit may write within `ms`: what is left of it after the fixed term, but never less
   * than what the cost per byte alone takes in half of it. On a disk so busy that its sync alone
   * takes most of `ms`, a commit then overruns by at most half of `ms` (a commit due meanwhile
   * waits that much more) rather than writing next to nothing: tiny commits would pay the sync
   * again and again, and tiny windows leave a variable in many small chunks.
   */
  budget(ms: number): number {
    return Math.max(ms - this.fixedMs, ms / 2) / this.msPerByte;
  }

  /** Records a commit of `bytes` that took `ms`, and fits the line again. */
  record(bytes: number, ms: number): void {
    if (!(bytes > 0) || !(ms >= 0)) return;
    this.points.push({ bytes, ms });
    if (this.points.length > FIT_POINTS) this.points.shift();
    this.fit();
  }

  private fit(): void {
    const p = this.points;
    const n = p.length;
    let sb = 0;
    let sm = 0;
    for (const x of p) {
      sb += x.bytes;
      sm += x.ms;
    }
    const mb = sb / n;
    const mm = sm / n;
    let sbb = 0;
    let sbm = 0;
    for (const x of p) {
      sbb += (x.bytes - mb) ** 2;
      sbm += (x.bytes - mb) * (x.ms - mm);
    }
    if (n < 3 || Math.sqrt(sbb / n) <= 0.25 * mb) {
      // Commits of about one size cannot separate the two terms: both are scaled so that the line
      // meets their mean (small commits that take long raise the fixed term as much as the cost
      // per byte, instead of charging it all to their few bytes).
      const scale = mm / this.expectedMs(mb);
      this.fixedMs *= scale;
      this.msPerByte = Math.max(MIN_MS_PER_BYTE, this.msPerByte * scale);
      return;
    }
    const slope = sbm / sbb;
    const intercept = mm - slope * mb;
    if (slope >= MIN_MS_PER_BYTE && intercept >= 0) {
      this.fixedMs = intercept;
      this.msPerByte = slope;
      return;
    }
    if (slope >= MIN_MS_PER_BYTE) {
      // Through the origin: the bytes explain it all.
      let sxy = 0;
      let sxx = 0;
      for (const x of p) {
        sxy += x.bytes * x.ms;
        sxx += x.bytes * x.bytes;
      }
      this.fixedMs = 0;
      this.msPerByte = Math.max(MIN_MS_PER_BYTE, sxy / sxx);
      return;
    }
    // Noise hides the cost per byte (small commits took longer than large ones): the fixed term is
    // at most the quickest commit, and the large commits (a quarter of the largest and more) pay
    // the rest per byte.
    let fixed = Infinity;
    let largest = 0;
    for (const x of p) {
      fixed = Math.min(fixed, x.ms);
      largest = Math.max(largest, x.bytes);
    }
    let excess = 0;
    let bytes = 0;
    for (const x of p) {
      if (x.bytes * 4 < largest) continue;
      excess += x.ms - fixed;
      bytes += x.bytes;
    }
    this.fixedMs = fixed;
    this.msPerByte = Math.max(MIN_MS_PER_BYTE, excess / bytes);
  }
}
