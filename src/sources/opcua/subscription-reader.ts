import {
  AttributeIds,
  DataChangeFilter,
  DataChangeTrigger,
  DeadbandType,
  TimestampsToReturn,
  resolveNodeId,
  type ClientMonitoredItemGroup,
  type ClientSession,
  type ClientSubscription,
  type DataChangeNotification,
  type DataValue,
  type NotificationMessage,
} from 'node-opcua';
import type { OpcuaServerConfig } from './config.js';
import type { NodeBinding } from './decode.js';
import { PublishPipeline, publishRequestsFor } from './publish-pipeline.js';
import { entriesPerCall, NO_OPERATION_LIMITS, type OperationLimits } from './operation-limits.js';
import type { InvalidNode } from './validate-nodes.js';

/** Monitored items per CreateMonitoredItems call, lowered to the server's MaxMonitoredItemsPerCall (operation-limits.ts). */
const CREATE_CHUNK = 1_000;
/** Room per data change notification in a Publish response, bytes (generous: about 40 are used). */
const NOTIFICATION_BYTES = 64;

export interface SubscriptionCallbacks {
  /** One value of one node (already matched to its binding). */
  onValue(binding: NodeBinding, dv: DataValue): void;
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
}

export interface SubscriptionReader {
  readonly subscription: ClientSubscription;
  /** Revised publishing interval (the server may change what was asked, Part 4 §5.13.2.2). */
  readonly publishingInterval: number;
  /** Nodes whose monitored item the server refused (bad filter, sampling not supported ...). */
  readonly refused: InvalidNode[];
  readonly monitored: number;
  /**
   * Items the server holds now by their last result: node-opcua re-creates them after a server
   * restart (reconnection) and only logs the ones the new server refused.
   */
  countMonitored(): number;
  /** Publish requests kept queued at the server (publish-pipeline.ts). */
  readonly publishRequests: number;
  /** Stops topping up the Publish requests (the link is being torn down; closing the session ends the rest). */
  stop(): void;
  terminate(): Promise<void>;
}

/**
 * Creates one subscription and its monitored items (OPC UA Part 4 §5.12, §5.13). Items with the
 * same sampling interval, queue size and deadband share one CreateMonitoredItems call.
 *
 * Lifetime count: the server keeps the subscription this many publishing intervals without a
 * Publish request, so after a short network loss node-opcua can transfer it to the new session
 * (Part 4 §5.13.7, TransferSubscriptions) with the values queued meanwhile. We ask for about two
 * minutes, and at least 3 × the keep-alive count as §5.13.2 requires.
 */
export async function startSubscription(session: ClientSession, cfg: OpcuaServerConfig, bindings: NodeBinding[], cb: SubscriptionCallbacks, limits: OperationLimits = NO_OPERATION_LIMITS): Promise<SubscriptionReader> {
  const lifetime = Math.max(cfg.keep_alive_count * 3, Math.ceil(120_000 / cfg.publishing_interval));
  const subscription = await session.createSubscription2({
    requestedPublishingInterval: cfg.publishing_interval,
    requestedLifetimeCount: lifetime,
    requestedMaxKeepAliveCount: cfg.keep_alive_count,
    // A Publish response must fit max_message_size (client-options.ts): a notification is at most
    // about 40 bytes encoded (client handle + DataValue with both timestamps), so this many leave
    // room; a bigger backlog comes in several responses (moreNotifications, Part 4 §5.13.1.1).
    maxNotificationsPerPublish: Math.floor(cfg.max_message_size / NOTIFICATION_BYTES),
    publishingEnabled: true,
    priority: 10,
  });
  subscription.on('keepalive', () => cb.onAlive());
  subscription.on('received_notifications', () => cb.onAlive());
  if (cb.onMessage) {
    const onMessage = cb.onMessage;
    const sequence = new SequenceTracker();
    subscription.on('raw_notification', (msg: NotificationMessage) => onMessage(countMessage(msg, sequence)));
  }

  const groups = new Map<string, NodeBinding[]>();
  for (const b of bindings) {
    const key = `${b.samplingInterval}|${b.queueSize}|${b.deadband?.type ?? '-'}|${b.deadband?.value ?? 0}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(b);
  }

  const refused: InvalidNode[] = [];
  const created: ClientMonitoredItemGroup[] = [];
  let monitored = 0;
  const perCall = entriesPerCall(CREATE_CHUNK, limits.maxMonitoredItemsPerCall);
  for (const list of groups.values()) {
    for (let start = 0; start < list.length; start += perCall) {
      const chunk = list.slice(start, start + perCall);
      const first = chunk[0];
      const filter = first.deadband
        ? new DataChangeFilter({
            trigger: DataChangeTrigger.StatusValue,
            deadbandType: first.deadband.type === 'percent' ? DeadbandType.Percent : DeadbandType.Absolute,
            deadbandValue: first.deadband.value,
          })
        : null;
      const group = await subscription.monitorItems(
        chunk.map((b) => ({ nodeId: resolveNodeId(b.nodeId), attributeId: AttributeIds.Value })),
        { samplingInterval: first.samplingInterval, queueSize: first.queueSize, discardOldest: true, filter },
        TimestampsToReturn.Both,
      );
      created.push(group);
      group.on('changed', (_item, dv, index) => {
        const b = chunk[index];
        if (b) cb.onValue(b, dv);
      });
      group.monitoredItems.forEach((item, i) => {
        const status = item.statusCode;
        if (status && status.value >>> 30 >= 2) {
          const b = chunk[i];
          refused.push({ index: b.index, node_id: b.configuredId, variable: b.variable, reason: monitorRefusal(status.name, b) });
        } else {
          monitored += 1;
        }
      });
    }
  }

  const publishingInterval = subscription.publishingInterval || cfg.publishing_interval;
  const pipeline = new PublishPipeline(session, publishRequestsFor(bindings, publishingInterval));
  pipeline.start(publishingInterval);

  return {
    subscription,
    publishingInterval,
    refused,
    monitored,
    countMonitored: () => created.reduce((t, g) => t + g.monitoredItems.reduce((k, item) => k + (item.statusCode && item.statusCode.value >>> 30 < 2 ? 1 : 0), 0), 0),
    publishRequests: pipeline.target,
    stop: () => pipeline.stop(),
    async terminate() {
      pipeline.stop();
      await Promise.race([subscription.terminate().catch(() => undefined), new Promise((r) => setTimeout(r, 2_000).unref())]);
    },
  };
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

  /**
   * Messages skipped before this one (0 for the first one seen). A number below the expected one
   * (the 32-bit counter wrapped, or the subscription was re-created after a reconnect) starts
   * the count afresh.
   */
  see(sequenceNumber: number, hasData: boolean): number {
    const skipped = this.next !== null && sequenceNumber > this.next ? sequenceNumber - this.next : 0;
    this.next = hasData ? sequenceNumber + 1 : sequenceNumber;
    return skipped;
  }
}

/** Values, overflow bits and skipped messages of one NotificationMessage. */
export function countMessage(msg: NotificationMessage, sequence: SequenceTracker): MessageCounts {
  let values = 0;
  let overflows = 0;
  const data = msg.notificationData ?? [];
  for (const n of data) {
    const items = (n as DataChangeNotification | null)?.monitoredItems;
    if (!items) continue;
    values += items.length;
    for (const item of items) if (item.value?.statusCode?.hasOverflowBit) overflows += 1;
  }
  return { values, overflows, missedMessages: sequence.see(msg.sequenceNumber, data.length > 0) };
}
