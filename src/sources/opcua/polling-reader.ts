import { AttributeIds, resolveNodeId, type ClientSession, type DataValue, type NodeId } from 'node-opcua';
import type { Clock } from '../../core/clock.js';
import type { NodeBinding } from './decode.js';
import { entriesPerCall } from './operation-limits.js';

/** Nodes per Read request, lowered to the server's MaxNodesPerRead (operation-limits.ts). */
const READ_CHUNK = 500;

export interface PollingCallbacks {
  onValue(binding: NodeBinding, dv: DataValue): void;
  /** A complete read cycle succeeded. */
  onAlive(): void;
  /** A read failed (the watchdog decides when to rebuild the connection). */
  onError(err: unknown): void;
  onRequest(outcome: 'ok' | 'error'): void;
}

/**
 * Polling mode: a Read of every valid node each `intervalMs` (OPC UA Part 4 §5.10.2, maxAge 0 so
 * the server reads the device rather than a cache). Cycles are scheduled against the monotonic
 * clock and never overlap: a slow server stretches the cycle instead of piling up requests.
 */
export class PollingReader {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private running: Promise<void> | null = null;
  private readonly nodes: Array<{ binding: NodeBinding; nodeId: NodeId }>;
  private readonly perRead: number;

  constructor(
    private readonly session: ClientSession,
    bindings: NodeBinding[],
    private readonly intervalMs: number,
    private readonly clock: Clock,
    private readonly cb: PollingCallbacks,
    maxNodesPerRead = 0,
  ) {
    this.perRead = entriesPerCall(READ_CHUNK, maxNodesPerRead);
    this.nodes = bindings.map((binding) => ({ binding, nodeId: resolveNodeId(binding.nodeId) }));
  }

  start(): void {
    this.schedule(0);
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const began = this.clock.monotonic();
      this.running = this.cycle().finally(() => {
        this.running = null;
        const spent = this.clock.monotonic() - began;
        this.schedule(Math.max(0, this.intervalMs - spent));
      });
    }, delay);
  }

  private async cycle(): Promise<void> {
    let ok = true;
    for (let start = 0; start < this.nodes.length && !this.stopped; start += this.perRead) {
      const chunk = this.nodes.slice(start, start + this.perRead);
      try {
        const results = await this.session.read(
          chunk.map((n) => ({ nodeId: n.nodeId, attributeId: AttributeIds.Value })),
          0,
        );
        this.cb.onRequest('ok');
        if (this.stopped) return;
        results.forEach((dv, i) => this.cb.onValue(chunk[i].binding, dv));
      } catch (err) {
        ok = false;
        this.cb.onRequest('error');
        if (!this.stopped) this.cb.onError(err);
        break;
      }
    }
    if (ok && !this.stopped) this.cb.onAlive();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.running) await Promise.race([this.running, new Promise((r) => setTimeout(r, 2_000).unref())]);
  }
}

