import type { Logger } from 'pino';
import type { GatewayConfig } from '../config/schema.js';
import { describeError } from '../core/errors.js';
import { startGateway, type GatewayHandle } from './gateway.js';
import { statusLine } from './status.js';

/** Longest a graceful stop may take before the process exits anyway (issue: exit within 10 s). */
export const SHUTDOWN_DEADLINE_MS = 9_000;

export interface RunningGateway {
  handle: GatewayHandle;
  /** Resolves when the gateway has stopped (signal or `stop()`). */
  done: Promise<void>;
  stop(): Promise<void>;
}

/**
 * Runs a gateway in this process until SIGINT/SIGTERM: prints a status line every
 * `gateway.status_interval` and stops gracefully on a signal. `extraClose` runs after the gateway
 * stopped (the demo closes its emulator and simulators there).
 */
export async function runUntilSignal(
  config: GatewayConfig,
  options: { logger?: Logger; extraClose?: () => Promise<void>; onStatus?: (line: string) => void } = {},
): Promise<RunningGateway> {
  const handle = await startGateway(config, { logger: options.logger });
  const print =
    options.onStatus ??
    ((line: string) => {
      if (process.stdout.isTTY) process.stdout.write(`[${new Date().toLocaleTimeString('en-GB')}] ${line}\n`);
      else handle.logger.info({ status: line }, 'status');
    });
  const interval = config.gateway.status_interval;
  const timer = interval > 0 ? setInterval(() => print(statusLine(handle.status())), interval) : null;
  timer?.unref();

  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    if (stopping) return stopping;
    if (timer) clearInterval(timer);
    const force = setTimeout(() => {
      handle.logger.error('graceful stop took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    force.unref();
    stopping = (async () => {
      try {
        await handle.close();
        await options.extraClose?.();
      } catch (err) {
        handle.logger.error({ err: describeError(err) }, 'error while stopping');
      } finally {
        clearTimeout(force);
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        resolveDone();
      }
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    handle.logger.info({ signal }, 'stopping');
    void stop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { handle, done, stop };
}
