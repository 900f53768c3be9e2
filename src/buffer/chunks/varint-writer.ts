/**
 * A growing byte buffer with LEB128 varints, shared by the chunk formats' writers (codec.ts for
 * formats 1 and 2, codec-v3.ts for format 3): the bytes on disk are the same for both.
 */
export class VarintWriter {
  buf: Uint8Array;
  pos = 0;
  constructor(size = 256) {
    this.buf = new Uint8Array(size);
  }
  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }
  byte(b: number): void {
    this.ensure(1);
    this.buf[this.pos++] = b;
  }
  /** Unsigned varint of a non-negative integer ≤ 2^53. */
  uvar(v: number): void {
    this.ensure(8);
    while (v >= 128) {
      this.buf[this.pos++] = (v % 128) | 128;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }
  /** Signed varint (zigzag). */
  svar(v: number): void {
    this.uvar(v >= 0 ? v * 2 : -v * 2 - 1);
  }
}
