import {
  AttributeIds,
  DataChangeFilter,
  DataChangeTrigger,
  DeadbandType,
  MonitoringMode,
  TimestampsToReturn,
  resolveNodeId,
  type ClientSession,
  type ClientSessionRawSubscriptionService,
  type ClientSubscription,
  type DataChangeNotification,
  type DataValue,
  type NotificationMessage,
} from 'node-opcua';
import type { OpcuaServerConfig } from './config.js';
import { dataChangesOf, installDataChangeDecoder, type DataChanges } from './data-change-decode.js';
import { hasOverflowBit, type NodeBinding } from './decode.js';
import { PublishPipeline, publishRequestsFor, valuesPerInterval } from './publish-pipeline.js';
import { inFlight } from '../../core/in-flight.js';
import { entriesPerCall, NO_OPERATION_LIMITS, type OperationLimits } from './operation-limits.js';
import type { InvalidNode } from './validate-nodes.js';

/** Monitored items per CreateMonitoredItems call, lowered to the server's MaxMonitoredItemsPerCall (operation-limits.ts). */
const CREATE_CHUNK = 1_000;
/**
 * CreateMonitoredItems calls in flight at once. One after the other, 100 calls for 100,000 items
 * waited a round trip each on a busy machine, while the server could have worked on the next:
 * set-up and re-creation after a restart were 4-6 times a bare client's (bench/opcua-recovery.ts).
 */
const CREATE_IN_FLIGHT = 4;
/** Room per data change notification in a Publish response, bytes (generous: about 40 are used). */
const NOTIFICATION_BYTES = 64;

export interface SubscriptionCallbacks {
  /** One value of one node (already matched to its binding), as node-opcua decoded it (not a simple value). */
  onValue(binding: NodeBinding, dv: DataValue): void;
  /**
   * The values of one DataChangeNotification read as columns (data-change-decode.ts): value `i`
   * belongs to `bindings[columns.handles[i] - 1]` (absent: not one of ours).
   */
  onColumns(columns: DataChanges, bindings: readonly NodeBinding[]): void;
  /** A keep-alive or any Publish response: the link is alive. */
  onAlive(): void;
  /**
   * Once per NotificationMessage, before its values are dispatched: how many values it carries,
   * how many of them have the Overflow bit (the server discarded older values of that node), and
   * how many NotificationMessages its sequence number says were skipped since the last one.
   */
  onMessage?(counts: MessageCounts): void;
}

export interface MessageCounts {
  values: number;
  overflows: number;
  missedMessages: number;
  /** A message received already (its values are not handed on again). */
  repeated?: boolean;
}

export interface SubscriptionReader {
  readonly subscription: ClientSubscription;
  /** Revised publishing interval (the server may change what was asked, Part 4 §5.13.2.2). */
  readonly publishingInterval: number;
  /** Nodes whose monitored item the server refused (bad filter, sampling not supported ...). */
  readonly refused: InvalidNode[];
  readonly monitored: number;
  /** Items the server holds now by their last result (after `repair()`, what the server accepted again). */
  countMonitored(): number;
  /**
   * After node-opcua repaired the connection: makes sure the server holds our items. A subscription
   * node-opcua transferred to the new session still has them; one it had to create afresh (the
   * server lost the old one: a restart) has none, and they are created again here. Resolves with
   * what the server holds then; rejects when that could not be done.
   */
  repair(progress?: () => void): Promise<RepairResult>;
  /** Publish requests kept queued at the server (publish-pipeline.ts) while the gateway has room. */
  readonly publishRequests: number;
  /** Flow control and what the server revised (status). */
  flow(): SubscriptionFlow;
  /** The gateway has room again: send the Publish requests held back. */
  resume(): void;
  /** Whether every Publish request is held back now (the watchdog does not count that silence). */
  holding(): boolean;
  /** The sampling interval the server revised for the item at `position`, ms (0: none known). */
  samplingOf(position: number): number;
  /** Stops topping up the Publish requests (the link is being torn down; closing the session ends the rest). */
  stop(): void;
  terminate(): Promise<void>;
}

export interface SubscriptionFlow {
  publish_requests: number;
  values_per_response: number;
  /** Values per publishing interval the items queue at the server, from what it revised. */
  values_per_interval: number;
  /** Shortest stall (ms) the server's queues absorb: revised queue size × sampling interval, least of the items. */
  server_queue_ms: number | null;
  /** Items whose queue the server revised below what was asked. */
  queues_revised_down: number;
  holding: boolean;
  held_ms_total: number;
}

export interface RepairResult {
  /** Items created again (0: the subscription was transferred with them). */
  created: number;
  /** Of those, refused by the server, with the first refusal's node and reason. */
  refused: number;
  firstRefusal: InvalidNode | null;
}

/** Item states: not on the server (yet), held by the server, refused by it. */
const ABSENT = 0;
const HELD = 1;
const REFUSED = 2;

/**
 * Creates one subscription and its monitored items (OPC UA Part 4 §5.12, §5.13). Items with the
 * same sampling interval, queue size and deadband share one CreateMonitoredItems call.
 *
 * The items are created with the CreateMonitoredItems service directly, not as node-opcua
 * ClientMonitoredItem objects: those cost ~810 bytes each (an EventEmitter with its listener
 * table and a closure, the request's ReadValueId, NodeId, NumericRange, QualifiedName and
 * MonitoringParameters, the create result; measured in test/sources/opcua/monitored-items.test.ts),
 * ~80 MB of heap at 100,000 items, which V8's old generation then grows by half again between
 * collections (issue 25: ≤ 400 MB RSS at 100,000).
 * Here an item is its binding's position: client handle = position + 1, one byte of state.
 * Values are taken from each NotificationMessage by client handle. node-opcua still transfers or
 * re-creates the subscription when it repairs a connection; the items of a re-created one are
 * created again by `repair()`.
 *
 * Lifetime count: the server keeps the subscription this many publishing intervals without a
 * Publish request, so after a short network loss node-opcua can transfer it to the new session
 * (Part 4 §5.13.7, TransferSubscriptions) with the values queued meanwhile. We ask for about two
 * minutes, and at least 3 × the keep-alive count as §5.13.2 requires.
 */
export async function startSubscription(session: ClientSession, cfg: OpcuaServerConfig, bindings: readonly NodeBinding[], cb: SubscriptionCallbacks, limits: OperationLimits = NO_OPERATION_LIMITS, room: () => number = () => Infinity): Promise<SubscriptionReader> {
  installDataChangeDecoder();
  const lifetime = Math.max(cfg.keep_alive_count * 3, Math.ceil(120_000 / cfg.publishing_interval));
  const subscription = await session.createSubscription2({
    requestedPublishingInterval: cfg.publishing_interval,
    requestedLifetimeCount: lifetime,
    requestedMaxKeepAliveCount: cfg.keep_alive_count,
    // A Publish response must fit max_message_size (client-options.ts): a notification is at most
    // about 40 bytes encoded (client handle + DataValue with both timestamps), so this many leave
    // room; a bigger backlog comes in several responses (moreNotifications, Part 4 §5.13.1.1). And
    // one response is at most a tenth of what the gateway holds for its commit (max_pending_samples),
    // so the Publish requests held back by the room left (publish-pipeline.ts) bound its memory.
    maxNotificationsPerPublish: Math.min(Math.floor(cfg.max_message_size / NOTIFICATION_BYTES), Math.floor(cfg.max_pending_samples / 10)),
    publishingEnabled: true,
    priority: 10,
  });

  // The raw CreateMonitoredItems and SetMonitoringMode services, which node-opcua's session implements
  // (ClientSessionImpl) but its ClientSession type leaves out.
  const raw = session as ClientSession & ClientSessionRawSubscriptionService;
  const state = new Uint8Array(bindings.length);
  // What the server revised per item (Part 4 §5.12.2): the Publish pipeline and the loss estimate use it.
  const revisedSampling = new Float64Array(bindings.length);
  const revisedQueue = new Uint32Array(bindings.length);
  const sequence = new SequenceTracker();
  let pipeline: PublishPipeline | null = null;
  // Every NotificationMessage, keep-alives included (node-opcua emits this one first, before its own handling).
  let numbered = subscription.subscriptionId;
  subscription.on('raw_notification', (msg: NotificationMessage) => {
    cb.onAlive();
    // node-opcua created the subscription afresh (a restarted server): new numbers from 1.
    if (subscription.subscriptionId !== numbered) {
      numbered = subscription.subscriptionId;
      sequence.reset();
    }
    const counts = countMessage(msg, sequence);
    if (counts.repeated) {
      msg.notificationData = [];
      return;
    }
    pipeline?.observe(counts.values);
    cb.onMessage?.(counts);
    if (counts.values === 0) return;
    msg.notificationData = dispatch(msg.notificationData ?? [], bindings, cb);
  });
  const groups = new Map<string, number[]>();
  bindings.forEach((b, i) => {
    const key = `${b.samplingInterval}|${b.queueSize}|${b.deadband?.type ?? '-'}|${b.deadband?.value ?? 0}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(i);
  });
  const perCall = entriesPerCall(CREATE_CHUNK, limits.maxMonitoredItemsPerCall);
  /** The server's id of one item it holds in this subscription (none when it holds none). */
  let probeId: number | null = null;
  let stopped = false;

  /**
   * Creates the items not on the server yet, in calls of `perCall`, CREATE_IN_FLIGHT calls at a time;
   * the refusals of this round. `progress` after each call (the watchdog: a repair that creates
   * 100,000 items is busy, not silent).
   */
  const createAbsent = async (progress?: () => void): Promise<{ created: number; refused: InvalidNode[] }> => {
    const refused: InvalidNode[] = [];
    let created = 0;
    const calls: number[][] = [];
    for (const positions of groups.values()) {
      const absent = positions.filter((p) => state[p] === ABSENT);
      for (let start = 0; start < absent.length; start += perCall) calls.push(absent.slice(start, start + perCall));
    }
    await inFlight(calls, CREATE_IN_FLIGHT, async (chunk) => {
      if (stopped) throw new Error('subscription stopped');
      const first = bindings[chunk[0]];
      const filter = first.deadband
        ? new DataChangeFilter({
            trigger: DataChangeTrigger.StatusValue,
            deadbandType: first.deadband.type === 'percent' ? DeadbandType.Percent : DeadbandType.Absolute,
            deadbandValue: first.deadband.value,
          })
        : null;
      const response = await raw.createMonitoredItems({
        subscriptionId: subscription.subscriptionId,
        timestampsToReturn: TimestampsToReturn.Both,
        itemsToCreate: chunk.map((p) => ({
          itemToMonitor: { nodeId: resolveNodeId(bindings[p].nodeId), attributeId: AttributeIds.Value },
          monitoringMode: MonitoringMode.Reporting,
          requestedParameters: { clientHandle: p + 1, samplingInterval: first.samplingInterval, queueSize: first.queueSize, discardOldest: true, filter },
        })),
      });
      const results = response.results ?? [];
      chunk.forEach((p, i) => {
        const r = results[i];
        const status = r?.statusCode;
        created += 1;
        if (status && status.value >>> 30 < 2) {
          state[p] = HELD;
          probeId = r.monitoredItemId;
          revisedSampling[p] = r.revisedSamplingInterval;
          revisedQueue[p] = r.revisedQueueSize;
        } else {
          state[p] = REFUSED;
          const b = bindings[p];
          refused.push({ index: b.index, node_id: b.configuredId, variable: b.variable, reason: status ? monitorRefusal(status.name, b) : 'the server returned no result for the item' });
        }
      });
      progress?.();
    });
    refused.sort((x, y) => x.index - y.index);
    return { created, refused };
  };

  /** Whether the server still holds the items of this subscription (probed with one of them). */
  const itemsKept = async (): Promise<boolean> => {
    if (probeId === null) return false;
    // SetMonitoringMode to the mode the item has changes nothing (Part 4 §5.12.4); on a
    // subscription created afresh the id is unknown (BadMonitoredItemIdInvalid), as is the
    // subscription if the server lost it too (BadSubscriptionIdInvalid, thrown).
    try {
      const r = await raw.setMonitoringMode({ subscriptionId: subscription.subscriptionId, monitoringMode: MonitoringMode.Reporting, monitoredItemIds: [probeId] });
      const status = r.results?.[0];
      return status !== undefined && status.value >>> 30 < 2;
    } catch (err) {
      if (/BadSubscriptionIdInvalid|BadMonitoredItemIdInvalid/.test(String(err))) return false;
      throw err;
    }
  };

  let repairing: Promise<RepairResult> | null = null;
  const repair = (progress?: () => void): Promise<RepairResult> => {
    // One at a time; a repair asked for while one runs waits for it and probes again.
    const run = (repairing ?? Promise.resolve())
      .catch(() => undefined)
      .then(async () => {
        if (!(await itemsKept())) {
          state.fill(ABSENT);
          probeId = null;
        }
        const { created, refused } = await createAbsent(progress);
        return { created, refused: refused.length, firstRefusal: refused[0] ?? null };
      });
    repairing = run;
    void run.catch(() => undefined).finally(() => {
      if (repairing === run) repairing = null;
    });
    return run;
  };

  const first = await createAbsent();
  const monitored = first.created - first.refused.length;

  const publishingInterval = subscription.publishingInterval || cfg.publishing_interval;
  /** Over the items the server holds, from what it revised: values per publishing interval, the shortest stall its queues absorb, queues revised below the request. */
  const revised = () => {
    let values = 0;
    let shortest = Infinity;
    let down = 0;
    for (let p = 0; p < bindings.length; p++) {
      if (state[p] !== HELD) continue;
      const item = { samplingInterval: revisedSampling[p], queueSize: revisedQueue[p] };
      values += valuesPerInterval([item], publishingInterval);
      shortest = Math.min(shortest, item.queueSize * (item.samplingInterval > 0 ? item.samplingInterval : publishingInterval));
      if (item.queueSize < bindings[p].queueSize) down += 1;
    }
    return { values, shortest, down };
  };
  pipeline = new PublishPipeline(session, publishRequestsFor(revised().values), room, () => room() >= cfg.max_pending_samples);
  const p = pipeline;
  const sizePipeline = () => void (p.target = publishRequestsFor(revised().values, p.valuesPerResponse));
  p.start(publishingInterval);

  return {
    subscription,
    publishingInterval,
    refused: first.refused,
    monitored,
    countMonitored: () => {
      let n = 0;
      for (const s of state) if (s === HELD) n += 1;
      return n;
    },
    repair: (progress) =>
      repair(progress).then((r) => {
        sizePipeline();
        p.topUp();
        return r;
      }),
    get publishRequests() {
      return p.target;
    },
    flow: () => {
      const r = revised();
      return {
        publish_requests: p.target,
        values_per_response: p.valuesPerResponse,
        values_per_interval: Math.round(r.values),
        server_queue_ms: r.shortest === Infinity ? null : Math.round(r.shortest),
        queues_revised_down: r.down,
        holding: p.holding,
        held_ms_total: p.heldTotalMs(),
      };
    },
    resume: () => void p.topUp(),
    holding: () => p.holding,
    samplingOf: (position) => revisedSampling[position] ?? 0,
    stop: () => {
      stopped = true;
      p.stop();
    },
    async terminate() {
      stopped = true;
      p.stop();
      await Promise.race([subscription.terminate().catch(() => undefined), new Promise((r) => setTimeout(r, 2_000).unref())]);
    },
  };
}

/** Hands each value of a message's data changes to the callbacks; returns the notifications for node-opcua (events, status changes). */
function dispatch(data: NonNullable<NotificationMessage['notificationData']>, bindings: readonly NodeBinding[], cb: SubscriptionCallbacks): NotificationMessage['notificationData'] {
  let others: NotificationMessage['notificationData'] = null;
  for (const n of data) {
    const columns = dataChangesOf(n);
    if (columns) {
      cb.onColumns(columns, bindings);
      continue;
    }
    if (!isDataChange(n)) {
      (others ??= []).push(n);
      continue;
    }
    for (const item of n.monitoredItems ?? []) {
      const b = bindings[item.clientHandle - 1];
      if (b) cb.onValue(b, item.value);
    }
  }
  // node-opcua's own handling, after this event, looks each value up among its
  // ClientMonitoredItems, finds none of ours and warns once per message: it gets the rest only
  // (status changes such as BadTimeout, events). The message was acknowledged before this event.
  return others ?? [];
}

function monitorRefusal(status: string, b: NodeBinding): string {
  if (status === 'BadDeadbandFilterInvalid' || status === 'BadFilterNotAllowed' || status === 'BadMonitoredItemFilterUnsupported') {
    return b.deadband?.type === 'percent'
      ? `the server refused the percent deadband (${status}); percent needs an AnalogItem with an EURange, use an absolute deadband`
      : `the server refused the deadband filter (${status})`;
  }
  if (status === 'BadNodeIdUnknown') return 'node does not exist on the server (BadNodeIdUnknown)';
  return `the server refused to monitor the node (${status})`;
}

/**
 * Sequence numbers of one subscription's NotificationMessages (Part 4 §5.13.1.1): each message
 * with data takes the next number, a keep-alive carries the number the next one will take. A jump
 * means messages were sent and never reached us.
 */
export class SequenceTracker {
  private next: number | null = null;
  /** The sequence numbers of the last RECENT messages with data, to know one that comes twice. */
  private readonly recent = new Set<number>();
  private readonly ring = new Array<number>(RECENT);
  private at = 0;

  /**
   * Whether a message with data carries a sequence number seen already: after a repair node-opcua
   * asks the server to republish what it believes missing (Republish, Part 4 §5.13.6) while
   * Publish responses of the transferred subscription still arrive, and the same message can come
   * both ways (every value of it twice upstream; seen in test/sources/opcua/monitored-items.test.ts).
   */
  repeated(sequenceNumber: number, hasData: boolean): boolean {
    return hasData && this.recent.has(sequenceNumber);
  }

  /** The subscription was created afresh: its numbers start again at 1. */
  reset(): void {
    this.next = null;
    this.recent.clear();
  }

  /**
   * Messages skipped before this one (0 for the first one seen). A number below the expected one
   * (the 32-bit counter wrapped, or the subscription was re-created after a reconnect) starts
   * the count afresh.
   */
  see(sequenceNumber: number, hasData: boolean): number {
    const skipped = this.next !== null && sequenceNumber > this.next ? sequenceNumber - this.next : 0;
    this.next = hasData ? sequenceNumber + 1 : sequenceNumber;
    if (hasData) {
      const old = this.ring[this.at];
      if (old !== undefined) this.recent.delete(old);
      this.ring[this.at] = sequenceNumber;
      this.at = (this.at + 1) % RECENT;
      this.recent.add(sequenceNumber);
    }
    return skipped;
  }
}

/** Sequence numbers remembered to recognise a message that comes twice (a few minutes of messages at 100,000 values a second). */
const RECENT = 16_384;

/**
 * A DataChangeNotification node-opcua decoded, with values (it decodes an empty list as null).
 * Ask `dataChangesOf` first: reading `monitoredItems` of a notification read as columns decodes it again.
 */
function isDataChange(n: unknown): n is DataChangeNotification {
  return n !== null && typeof n === 'object' && Array.isArray((n as DataChangeNotification).monitoredItems);
}

/** Values, overflow bits and skipped messages of one NotificationMessage. */
export function countMessage(msg: NotificationMessage, sequence: SequenceTracker): MessageCounts {
  let values = 0;
  let overflows = 0;
  const data = msg.notificationData ?? [];
  if (sequence.repeated(msg.sequenceNumber, data.length > 0)) return { values: 0, overflows: 0, missedMessages: 0, repeated: true };
  for (const n of data) {
    const columns = dataChangesOf(n);
    if (columns) {
      values += columns.count;
      for (let i = 0; i < columns.count; i++) if (hasOverflowBit(columns.status[i])) overflows += 1;
      continue;
    }
    if (!isDataChange(n)) continue;
    values += n.monitoredItems!.length;
    for (const item of n.monitoredItems!) if (hasOverflowBit(item.value?.statusCode?.value ?? 0)) overflows += 1;
  }
  return { values, overflows, missedMessages: sequence.see(msg.sequenceNumber, data.length > 0) };
}
