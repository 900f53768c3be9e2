import type { Server } from 'node:http';
import { capToDescriptors, openFileLimit } from '../core/descriptors.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Logger } from '../core/logger.js';
import { ConnectionGuard, type RefusedReason } from '../http/connection-guard.js';

export const DEFAULT_MAX_CONNECTIONS = 1_024;
export const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 256;

/**
 * The emulator's connections, admitted per client address as the gateway's own server does
 * (http/connection-guard.ts): one host's idle or half-sent connections cost that host, not the
 * gateways under test, and the total stays below the process's open-file limit
 * (core/descriptors.ts) so the import-job files always open. Refusals are logged (with the
 * address, at a bounded rate) and counted; returns the counts.
 *
 * Once listening, an error of the server (accept() failing with EMFILE) is logged, not thrown:
 * without a listener it would end the process, and the server keeps accepting once descriptors
 * are free again.
 */
export function guardEmulatorConnections(server: Server, o: { maxConnections?: number; maxConnectionsPerClient?: number; logger: Logger }): () => Record<RefusedReason, number> {
  const wanted = o.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const { cap, lowered } = capToDescriptors('emulator', '--max-connections', wanted, openFileLimit());
  if (lowered) o.logger.warn({ max_connections: cap }, lowered);
  const counts: Record<RefusedReason, number> = { max_connections: 0, max_connections_per_client: 0, header_timeout: 0 };
  const throttle = new LogThrottle(o.logger, 60_000);
  server.once('listening', () => {
    server.on('error', (err: NodeJS.ErrnoException) => throttle.error(`server-error|${err.code ?? ''}`, { err: err.message }, 'tracking-service emulator: server error; it keeps listening'));
  });
  const guard = new ConnectionGuard(
    { maxConnections: cap, maxConnectionsPerClient: o.maxConnectionsPerClient ?? DEFAULT_MAX_CONNECTIONS_PER_CLIENT },
    {
      count: (reason) => (counts[reason] += 1),
      throttle,
      names: { server: 'tracking-service emulator', maxConnections: '--max-connections', maxConnectionsPerClient: '--max-connections-per-client', headerTimeout: 'its header timeout (30 s)' },
    },
  );
  guard.attach(server);
  return () => ({ ...counts });
}
