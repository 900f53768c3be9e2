import type { ClientSession } from 'node-opcua';

/**
 * Values one Publish response carries at most before any response has said more, as node-opcua's
 * and open62541's servers cap them (`maxNotificationsPerPublish` 1,000 by default); we ask for
 * more (subscription-reader.ts), a server answers with what it allows. The largest response seen
 * replaces it (`PublishPipeline.observe`).
 */
const VALUES_PER_RESPONSE = 1_000;
/** node-opcua's own pipeline (`ClientSidePublishEngine.publishRequestCountInPipeline`). */
const NODE_OPCUA_PIPELINE = 5;
/**
 * At most this many: node-opcua's server queues 100 Publish requests per session
 * (`ServerSession.maxPublishRequestInQueue`) and answers the one beyond with
 * BadTooManyPublishRequests, after which node-opcua lowers its own limit to what was accepted.
 */
const MAX_PIPELINE = 100;
/** Requests beyond one publishing interval's worth: a turn of the server's loop can come late. */
const HEADROOM = 2;

/** What the server revised for one monitored item (CreateMonitoredItems result, Part 4 §5.12.2). */
export interface RevisedItem {
  samplingInterval: number;
  queueSize: number;
}

/**
 * Values the items queue at the server per publishing interval, from what the server revised: one
 * per sampling, at most the item's queue, a fraction for an item sampled slower than it publishes
 * (one value every five intervals is 0.2, not 1); an exception-based item (sampling 0, or -1: the
 * publishing interval) is counted as one change per interval.
 */
export function valuesPerInterval(items: Iterable<RevisedItem>, publishingInterval: number): number {
  let values = 0;
  for (const it of items) {
    const perInterval = it.samplingInterval > 0 ? publishingInterval / it.samplingInterval : 1;
    values += Math.min(Math.max(1, it.queueSize), perInterval);
  }
  return values;
}

/**
 * Publish requests to keep queued at the server for `values` values per publishing interval
 * (Part 4 §5.13.5: a client pipelines Publish requests so the server always has one to answer with).
 *
 * A server sends a NotificationMessage only in answer to a queued Publish request, and each one
 * carries at most its maxNotificationsPerPublish values. node-opcua's client keeps five queued,
 * and sends the next only after it has processed a response. A busy server reads new requests
 * between its own jobs (a node-opcua server sampling 30,000 items spends most of each second in
 * one burst of sampling), so five requests move at most ~5,000 values per turn of its event loop:
 * at 30,000 items at 1 s it fell behind, held 450,000 values and discarded half of what it sampled
 * from its full monitored-item queues (bench/plant-scale.ts). Enough requests for one
 * publishing interval's values, plus headroom, lets it hand over everything it has each turn.
 */
export function publishRequestsFor(values: number, valuesPerResponse = VALUES_PER_RESPONSE): number {
  return Math.min(MAX_PIPELINE, Math.max(NODE_OPCUA_PIPELINE, Math.ceil(values / valuesPerResponse) + HEADROOM));
}

/** The parts of node-opcua's ClientSidePublishEngine this module reads (it is not typed as public API). */
interface PublishEngine {
  nbPendingPublishRequests: number;
  nbMaxPublishRequestsAcceptedByServer: number;
  isSuspended: boolean;
  subscriptionCount: number;
  send_publish_request(): void;
}

/** ClientSessionImpl members the ClientSession interface does not declare. */
interface SessionInternals {
  getPublishEngine(): PublishEngine;
  isChannelValid(): boolean;
}

const GATED = Symbol('publish requests gated');

/**
 * Keeps Publish requests queued at the server on `session`: `target` of them while the gateway
 * has room for what they bring back, fewer when it has not.
 *
 * Backpressure: every queued request can come back with up to one response's values, so the
 * requests in flight are held to what `room()` (values the gateway can still take before it would
 * have to refuse one) divided by the values per response allows. When the buffer does not keep up,
 * no new request goes out, the server keeps the values in its monitored-item queues (queue_size
 * samplings each, as it revised them) and sends them once the gateway asks again: a stall costs
 * freshness, not values, as long as those queues last (and the subscription's lifetime, about two
 * minutes without a request). node-opcua sends one request per response itself; it is held back
 * by the limit it already keeps for servers that refuse more (nbMaxPublishRequestsAcceptedByServer),
 * read through a gate here: what the server accepted, and no more than the room allows.
 *
 * node-opcua sends its own five when the subscription is registered, and one per response; this
 * adds the rest, and puts back what a reconnect lost (requests failed on the broken channel are
 * not re-sent by node-opcua beyond its five). Never more than the server accepted, and nothing
 * while the engine is suspended (a reconnect in progress) or the channel is not usable.
 */
export class PublishPipeline {
  private timer: NodeJS.Timeout | null = null;
  /** Requests asked of node-opcua that it has not counted yet (it sends them from a setImmediate). */
  private scheduled = 0;
  private perResponse = VALUES_PER_RESPONSE;
  private stopped = false;
  /** performance.now() since the room allowed no request at all, or null. */
  private heldSince: number | null = null;
  private heldMs = 0;

  constructor(
    private readonly session: ClientSession,
    public target: number,
    private readonly room: () => number = () => Infinity,
    /** Whether nothing the server sent waits in the gateway (its queue is empty). */
    private readonly idle: () => boolean = () => false,
  ) {}

  /** Tops up now and then every `everyMs` until `stop()`. */
  start(everyMs: number): void {
    this.topUp();
    this.timer = setInterval(() => this.topUp(), Math.max(250, everyMs));
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** A response carried `values` values: the largest seen is what one response can bring. */
  observe(values: number): void {
    if (values > this.perResponse) this.perResponse = values;
  }

  get valuesPerResponse(): number {
    return this.perResponse;
  }

  /**
   * Requests the room allows now (at most `target`); one whenever nothing waits at all, so values
   * always flow (a response is at most a tenth of max_pending_samples: subscription-reader.ts).
   */
  allowed(): number {
    const room = this.room();
    const byRoom = Math.floor(room / this.perResponse);
    const n = Math.max(this.idle() ? 1 : 0, Math.min(this.target, byRoom));
    const now = performance.now();
    if (n === 0 && !this.stopped) this.heldSince ??= now;
    else if (this.heldSince !== null) {
      this.heldMs += now - this.heldSince;
      this.heldSince = null;
    }
    return n;
  }

  /** Whether no request may go out now (the gateway is holding the server's values back). */
  get holding(): boolean {
    return this.heldSince !== null;
  }

  /** Total ms the pipeline held every request back (status). */
  heldTotalMs(): number {
    return Math.round(this.heldMs + (this.heldSince === null ? 0 : performance.now() - this.heldSince));
  }

  /** Sends what is missing; returns how many requests were added. */
  topUp(): number {
    if (this.stopped) return 0;
    const session = this.session as unknown as SessionInternals;
    const engine = session.getPublishEngine();
    this.gate(engine);
    if (engine.isSuspended || engine.subscriptionCount === 0 || !session.isChannelValid()) return 0;
    const missing = engine.nbMaxPublishRequestsAcceptedByServer - engine.nbPendingPublishRequests - this.scheduled;
    if (missing <= 0) return 0;
    for (let i = 0; i < missing; i++) engine.send_publish_request();
    this.scheduled += missing;
    // node-opcua counts them in its own setImmediate; ours runs after those.
    setImmediate(() => (this.scheduled = 0));
    return missing;
  }

  /**
   * Makes node-opcua's limit on queued requests read as min(what the server accepted, what the
   * room allows), so its own request after each response is held back too. Its writes (lowering it
   * after BadTooManyPublishRequests) keep setting what the server accepted.
   */
  private gate(engine: PublishEngine): void {
    const e = engine as PublishEngine & { [GATED]?: PublishPipeline };
    if (e[GATED] === this) return;
    const first = e[GATED] === undefined;
    e[GATED] = this;
    if (!first) return;
    let accepted = engine.nbMaxPublishRequestsAcceptedByServer;
    Object.defineProperty(engine, 'nbMaxPublishRequestsAcceptedByServer', {
      configurable: true,
      enumerable: true,
      get: () => {
        const p = e[GATED]!;
        return p.stopped ? accepted : Math.min(accepted, p.allowed());
      },
      set: (v: number) => {
        accepted = v;
      },
    });
  }
}
