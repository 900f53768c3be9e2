import { readFileSync } from 'node:fs';

/**
 * File descriptors the process keeps for itself, away from its listeners.
 *
 * Every accepted connection is a descriptor, and so is everything the gateway opens on its own
 * behalf: the SQLite buffer with its WAL and shared memory (twice: the checkpoint worker has its
 * own connection), the owner lock, import-job files, backups, the log, worker threads' pipes and
 * the connections it makes itself (the tracking service, OPC UA servers, Modbus devices, brokers).
 * When the listeners take the last one, SQLite cannot open its WAL, a PLC's connection is reset at
 * accept and /healthz goes dark. So the listeners' connection caps are sized below the soft
 * RLIMIT_NOFILE (the limit `ulimit -n`, systemd's LimitNOFILE or `--ulimit nofile` sets), read once
 * at start:
 *
 * - a reserve of max(256, limit / 8) descriptors (at most half the limit) stays with the process;
 *   a running gateway with the embedded broker, the HTTP server and an upload under way holds ~50,
 *   the rest is room for outgoing device connections, import files and backups;
 * - of the remainder the local HTTP server may hold a quarter, the embedded MQTT broker (TCP and
 *   WebSocket together) the other three quarters; the tracking-service emulator, a process of its
 *   own, may hold all of it.
 *
 * At 1,024 (a common default) that is 256 reserved, 192 for HTTP (http.max_connections 256 is
 * lowered) and 576 for the broker (mqtt.broker.max_clients 1,000 is lowered); at 65,536 nothing
 * configured is lowered. The listener's own settings stay the upper bound.
 */
export type Listener = 'http' | 'broker' | 'emulator';

/** The local HTTP server's share of what stays after the reserve; the broker has the rest. */
const HTTP_SHARE = 0.25;

/** The reserve kept for the process's own files at `limit`. */
export function descriptorReserve(limit: number): number {
  return Math.min(Math.max(256, Math.ceil(limit / 8)), Math.floor(limit / 2));
}

/** Most connections `listener` may hold at the open-file `limit` (null: unknown or unlimited). */
export function listenerCeiling(listener: Listener, limit: number | null): number {
  if (limit === null) return Number.POSITIVE_INFINITY;
  const rest = limit - descriptorReserve(limit);
  const http = Math.floor(rest * HTTP_SHARE);
  return Math.max(1, listener === 'http' ? http : listener === 'broker' ? rest - http : rest);
}

/**
 * A listener's cap: the configured `wanted`, or less when the open-file limit leaves less. `lowered`
 * says so in words naming the setting, for a warning at start.
 */
export function capToDescriptors(listener: Listener, setting: string, wanted: number, limit: number | null = openFileLimit()): { cap: number; lowered: string | null } {
  const ceiling = listenerCeiling(listener, limit);
  if (wanted <= ceiling) return { cap: wanted, lowered: null };
  return {
    cap: ceiling,
    lowered: `${setting} ${wanted} is lowered to ${ceiling}: the open-file limit of the process is ${limit}, and ${descriptorReserve(limit as number)} descriptors are kept for the gateway's own files (buffer, WAL, imports, logs, outgoing connections). Raise the limit (ulimit -n, systemd LimitNOFILE, docker --ulimit nofile) to use the configured value`,
  };
}

let cached: { limit: number | null } | null = null;

/**
 * The soft RLIMIT_NOFILE of this process (Node raises the soft limit to the hard one at start, so
 * this is what the process can use), or null when unlimited or unknown. `process.getrlimit` where
 * the runtime has it, else /proc/self/limits (Linux); read once.
 */
export function openFileLimit(): number | null {
  if (cached) return cached.limit;
  cached = { limit: readOpenFileLimit() };
  return cached.limit;
}

export function readOpenFileLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | null {
  const getrlimit = (process as unknown as { getrlimit?: (r: string) => { soft: number | bigint | null } }).getrlimit;
  if (typeof getrlimit === 'function') {
    try {
      const soft = getrlimit('nofile').soft;
      return soft === null || Number(soft) === Number.POSITIVE_INFINITY ? null : Number(soft);
    } catch {
      /* fall through to /proc */
    }
  }
  let text: string;
  try {
    text = read();
  } catch {
    return null;
  }
  return parseOpenFileLimit(text);
}

/** The soft "Max open files" of a /proc/<pid>/limits text; null when absent or "unlimited". */
export function parseOpenFileLimit(text: string): number | null {
  const m = /^Max open files\s+(\S+)/m.exec(text);
  if (!m || !/^\d+$/.test(m[1])) return null;
  return Number(m[1]);
}
