import type { Duplex } from 'node:stream';

/**
 * Watches the bytes a client sends and reports the first MQTT packet larger than the limit, by
 * reading only fixed headers: one type byte, then the Remaining Length as a variable byte integer
 * of at most four bytes (MQTT 3.1.1 §2.2.3, MQTT 5 §1.5.5), then skipping that many bytes.
 * The packet is refused as soon as its header is seen, before its body has been buffered, which is
 * what the Maximum Packet Size of MQTT 5 §3.1.2.24 is for; aedes has no such limit of its own.
 */
export class PacketSizeGuard {
  private state: 'type' | 'length' | 'body' = 'type';
  private length = 0;
  private multiplier = 1;
  private lengthBytes = 0;
  private remaining = 0;

  constructor(private readonly maxPacketSize: number) {}

  /** Returns a problem in words when the stream so far holds a packet over the limit or a malformed length, else null. */
  feed(chunk: Buffer): string | null {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === 'type') {
        i += 1;
        this.state = 'length';
        this.length = 0;
        this.multiplier = 1;
        this.lengthBytes = 0;
      } else if (this.state === 'length') {
        const b = chunk[i++];
        this.lengthBytes += 1;
        this.length += (b & 0x7f) * this.multiplier;
        this.multiplier *= 128;
        if (b & 0x80) {
          if (this.lengthBytes >= 4) return 'malformed Remaining Length (more than 4 bytes)';
          continue;
        }
        const total = 1 + this.lengthBytes + this.length;
        if (total > this.maxPacketSize) return `packet of ${total} bytes is larger than max_packet_size ${this.maxPacketSize}`;
        this.remaining = this.length;
        this.state = this.remaining > 0 ? 'body' : 'type';
      } else {
        const take = Math.min(this.remaining, chunk.length - i);
        i += take;
        this.remaining -= take;
        if (this.remaining === 0) this.state = 'type';
      }
    }
    return null;
  }
}

/**
 * Attaches a guard to a connection that aedes already reads (with 'readable' and read()). A 'data'
 * listener added next to a 'readable' one does not change the flow: Node emits 'data' with each
 * chunk `read()` returns (Node stream docs, "Choose one API style"), so the guard sees exactly the
 * bytes aedes parses, as they are parsed.
 */
export function guardPacketSize(conn: Duplex, maxPacketSize: number, onTooLarge: (problem: string) => void): void {
  const guard = new PacketSizeGuard(maxPacketSize);
  let tripped = false;
  conn.on('data', (chunk: Buffer | string) => {
    if (tripped) return;
    const problem = guard.feed(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    if (problem) {
      tripped = true;
      onTooLarge(problem);
      conn.destroy();
    }
  });
}
