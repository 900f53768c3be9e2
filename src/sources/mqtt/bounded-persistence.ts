import { createRequire } from 'node:module';

// The CommonJS factory aedes itself uses for its default persistence (aedes.js: `opts.persistence || memory()`).
const memory = createRequire(import.meta.url)('aedes-persistence') as () => Record<string, unknown>;

/**
 * aedes' in-memory persistence with limits (retained messages and the QoS 1 queues of
 * offline persistent sessions grew the gateway to 1.5 GB).
 *
 * - Retained messages: at most `maxRetained` topics and `maxRetainedBytes` of payload. Replacing
 *   or deleting an existing topic always works; a new topic beyond a limit is not stored (the
 *   message itself is still delivered to current subscribers), counted as `retained_limit`.
 * - Queued QoS 1/2 messages of persistent sessions (waiting for an acknowledgement, or for an
 *   offline client to come back): at most `maxQueuedMessages` per session and
 *   `maxQueuedBytes` for all sessions together; beyond that a message is not queued for that
 *   session, counted as `queue_limit` (the same choice mosquitto makes with max_queued_messages).
 *
 * The counts are kept beside aedes-persistence (its maps are private): incremented when a packet is
 * queued, decremented when the client acknowledges it. aedes-persistence keeps a queue across a
 * later clean-session connect, so the count does too (it errs towards dropping, never towards growth).
 */
export interface PersistenceLimits {
  maxRetained: number;
  maxRetainedBytes: number;
  maxQueuedMessages: number;
  maxQueuedBytes: number;
  onDrop(reason: 'retained_limit' | 'queue_limit', detail: { topic: string; client_id?: string }): void;
}

interface Pkt {
  topic: string;
  payload: Buffer | string | Uint8Array;
  messageId?: number;
}
interface Sub {
  clientId: string;
}
type Persistence = Record<string, unknown>;

const size = (p: Pkt): number => (typeof p.payload === 'string' ? Buffer.byteLength(p.payload) : p.payload?.length ?? 0);

export function boundedMemoryPersistence(limits: PersistenceLimits): { persistence: Persistence; stats(): { retained: number; retained_bytes: number; queued: number; queued_bytes: number } } {
  const p = memory();
  const retained = new Map<string, number>();
  let retainedBytes = 0;
  const queues = new Map<string, { count: number; bytes: number }>();
  let queuedBytes = 0;
  let queuedCount = 0;

  const call = <T>(name: string, ...args: unknown[]): Promise<T> => (p[`__orig_${name}`] as (...a: unknown[]) => Promise<T>).apply(p, args);
  for (const name of ['storeRetained', 'outgoingEnqueue', 'outgoingEnqueueCombi', 'outgoingClearMessageId']) {
    p[`__orig_${name}`] = (p[name] as (...a: unknown[]) => unknown).bind(p);
  }

  p.storeRetained = (async (packet: Pkt) => {
    const bytes = size(packet);
    const before = retained.get(packet.topic);
    if (bytes === 0) {
      if (before !== undefined) {
        retained.delete(packet.topic);
        retainedBytes -= before;
      }
      return call('storeRetained', packet);
    }
    const grow = bytes - (before ?? 0);
    if ((before === undefined && retained.size >= limits.maxRetained) || retainedBytes + grow > limits.maxRetainedBytes) {
      limits.onDrop('retained_limit', { topic: packet.topic });
      return;
    }
    retained.set(packet.topic, bytes);
    retainedBytes += grow;
    return call('storeRetained', packet);
  }) as never;

  const admit = (sub: Sub, packet: Pkt): boolean => {
    const bytes = size(packet);
    let q = queues.get(sub.clientId);
    if ((q?.count ?? 0) >= limits.maxQueuedMessages || queuedBytes + bytes > limits.maxQueuedBytes) {
      limits.onDrop('queue_limit', { topic: packet.topic, client_id: sub.clientId });
      return false;
    }
    if (!q) {
      q = { count: 0, bytes: 0 };
      queues.set(sub.clientId, q);
    }
    q.count += 1;
    q.bytes += bytes;
    queuedBytes += bytes;
    queuedCount += 1;
    return true;
  };

  p.outgoingEnqueue = (async (sub: Sub, packet: Pkt) => {
    if (admit(sub, packet)) return call('outgoingEnqueue', sub, packet);
  }) as never;
  p.outgoingEnqueueCombi = (async (subs: Sub[], packet: Pkt) => {
    const admitted = subs.filter((s) => admit(s, packet));
    if (admitted.length > 0) return call('outgoingEnqueueCombi', admitted, packet);
  }) as never;
  p.outgoingClearMessageId = (async (client: { id: string }, packet: Pkt) => {
    const removed = await call<Pkt | undefined>('outgoingClearMessageId', client, packet);
    const q = queues.get(client.id);
    if (removed && q) {
      const bytes = size(removed);
      q.count -= 1;
      q.bytes -= bytes;
      queuedBytes -= bytes;
      queuedCount -= 1;
      if (q.count <= 0) queues.delete(client.id);
    }
    return removed;
  }) as never;
  return { persistence: p, stats: () => ({ retained: retained.size, retained_bytes: retainedBytes, queued: queuedCount, queued_bytes: queuedBytes }) };
}
