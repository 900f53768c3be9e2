import type { ClientSession } from 'node-opcua';
import type { NodeBinding } from './decode.js';

/**
 * Values one Publish response carries at most, as node-opcua's server caps them
 * (`Subscription.maxNotificationPerPublishHighLimit`); we ask for more (subscription-reader.ts),
 * a server answers with what it allows.
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

/**
 * Publish requests to keep queued at the server for these monitored items (Part 4 §5.13.5: a
 * client pipelines Publish requests so the server always has one to answer with).
 *
 * A server sends a NotificationMessage only in answer to a queued Publish request, and each one
 * carries at most its maxNotificationsPerPublish values (node-opcua: 1,000). node-opcua's client
 * keeps five queued, and sends the next only after it has processed a response. A busy server
 * reads new requests between its own jobs (a node-opcua server sampling 30,000 items spends most
 * of each second in one burst of sampling), so five requests move at most ~5,000 values per turn
 * of its event loop: at 30,000 items at 1 s it fell behind, held 450,000 values and discarded half
 * of what it sampled from its full monitored-item queues (bench/plant-scale.ts, issue 25).
 * Enough requests for one publishing interval's values, plus headroom, lets it hand over
 * everything it has each turn.
 */
export function publishRequestsFor(bindings: readonly NodeBinding[], publishingInterval: number): number {
  let values = 0;
  for (const b of bindings) {
    // Values a monitored item queues per publishing interval: one per sampling, at most its
    // queue; an exception-based item (sampling 0) is counted as one change per interval.
    const perInterval = b.samplingInterval > 0 ? Math.max(1, Math.floor(publishingInterval / b.samplingInterval)) : 1;
    values += Math.min(b.queueSize, perInterval);
  }
  return Math.min(MAX_PIPELINE, Math.max(NODE_OPCUA_PIPELINE, Math.ceil(values / VALUES_PER_RESPONSE) + HEADROOM));
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

/**
 * Keeps `target` Publish requests queued at the server on `session`. node-opcua sends its own five
 * when the subscription is registered, and one per response; this adds the rest, and puts back
 * what a reconnect lost (requests failed on the broken channel are not re-sent by node-opcua
 * beyond its five). Never more than the server accepted (node-opcua lowers
 * nbMaxPublishRequestsAcceptedByServer on BadTooManyPublishRequests), and nothing while the
 * engine is suspended (a reconnect in progress) or the channel is not usable.
 */
export class PublishPipeline {
  private timer: NodeJS.Timeout | null = null;
  /** Requests asked of node-opcua that it has not counted yet (it sends them from a setImmediate). */
  private scheduled = 0;

  constructor(
    private readonly session: ClientSession,
    readonly target: number,
  ) {}

  /** Tops up now and then every `everyMs` until `stop()`. */
  start(everyMs: number): void {
    this.topUp();
    this.timer = setInterval(() => this.topUp(), Math.max(250, everyMs));
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Sends what is missing; returns how many requests were added. */
  topUp(): number {
    const session = this.session as unknown as SessionInternals;
    const engine = session.getPublishEngine();
    if (engine.isSuspended || engine.subscriptionCount === 0 || !session.isChannelValid()) return 0;
    const limit = Math.min(this.target, engine.nbMaxPublishRequestsAcceptedByServer);
    const missing = limit - engine.nbPendingPublishRequests - this.scheduled;
    if (missing <= 0) return 0;
    for (let i = 0; i < missing; i++) engine.send_publish_request();
    this.scheduled += missing;
    // node-opcua counts them in its own setImmediate; ours runs after those.
    setImmediate(() => (this.scheduled = 0));
    return missing;
  }
}
