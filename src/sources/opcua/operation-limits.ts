import { readOperationLimits, type ClientSession } from 'node-opcua';

/**
 * The server's operation limits (OPC UA Part 5 §6.3.11, Server.ServerCapabilities.OperationLimits):
 * most operations one service call may carry. A server answers a call beyond them with
 * BadTooManyOperations and does none of it, so a gateway with thousands of nodes must split its
 * Read, CreateMonitoredItems and HistoryRead calls to fit. 0 means the server sets no limit.
 */
export interface OperationLimits {
  maxNodesPerRead: number;
  maxMonitoredItemsPerCall: number;
  maxNodesPerHistoryReadData: number;
}

export const NO_OPERATION_LIMITS: OperationLimits = Object.freeze({ maxNodesPerRead: 0, maxMonitoredItemsPerCall: 0, maxNodesPerHistoryReadData: 0 });

/**
 * Reads the limits once per session. A server without the OperationLimits object (it is optional)
 * or one that refuses the read gets no limits: our own chunk sizes then apply.
 */
export async function readServerOperationLimits(session: ClientSession): Promise<OperationLimits> {
  try {
    const l = await readOperationLimits(session);
    const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0);
    return { maxNodesPerRead: n(l.maxNodesPerRead), maxMonitoredItemsPerCall: n(l.maxMonitoredItemsPerCall), maxNodesPerHistoryReadData: n(l.maxNodesPerHistoryReadData) };
  } catch {
    return NO_OPERATION_LIMITS;
  }
}

/**
 * Entries per call: our own chunk size, lowered to the server's limit (0: none) counted in
 * operations, where each entry takes `operationsPerEntry` operations (a node whose DataType,
 * ValueRank and Value are read is three). Never below one entry.
 */
export function entriesPerCall(ours: number, serverLimit: number, operationsPerEntry = 1): number {
  const limit = serverLimit > 0 ? Math.floor(serverLimit / operationsPerEntry) : ours;
  return Math.max(1, Math.min(ours, limit));
}
