import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { loadConfigFile } from '../config/load.js';
import { ConfigHistory } from '../console/config-history.js';
import type { GatewayConfig } from '../config/schema.js';
import { ConfigError, describeError } from '../core/errors.js';
import { watchFile } from './config-watch.js';
import { startGateway, type GatewayHandle, type ReloadResult, type StartOptions } from './gateway.js';
import { applyV8MemoryFlags } from './v8-memory.js';
import { statusLine } from '../status/line.js';
import { guardedInterval } from '../core/guarded-timer.js';
import { LogThrottle } from '../core/log-throttle.js';

/** Longest a graceful stop may take before the process exits anyway (issue: exit within 10 s). */
export const SHUTDOWN_DEADLINE_MS = 9_000;

export interface RunningGateway {
  handle: GatewayHandle;
  /** Resolves when the gateway has stopped (signal or `stop()`). */
  done: Promise<void>;
  stop(): Promise<void>;
  /** Reads the config file again and applies it (what SIGHUP and a change of the file do). Null without a file. */
  reload(): Promise<ReloadResult | null>;
}

export interface RunOptions {
  logger?: Logger;
  /** The file `config` came from: SIGHUP or a change of this file reloads it (issue: hot reload). */
  configPath?: string | null;
  /** Watch the file for changes (default true when configPath is given); SIGHUP works either way. */
  watchConfig?: boolean;
  extraClose?: () => Promise<void>;
  /** The demo's simulated devices (StartOptions.demo). */
  demo?: StartOptions['demo'];
  onStatus?: (line: string) => void;
}

/**
 * Runs a gateway in this process until SIGINT/SIGTERM: prints a status line every
 * `gateway.status_interval`, reloads the configuration on SIGHUP or when its file changes, and
 * stops gracefully on a signal. `extraClose` runs after the gateway stopped (the demo closes its
 * emulator and simulators there).
 */
export async function runUntilSignal(config: GatewayConfig, options: RunOptions = {}): Promise<RunningGateway> {
  const configPath = options.configPath ?? null;
  // A long-running gateway process: keep its RSS near its live memory (v8-memory.ts). Before
  // startGateway, whose first requests compile undici's parser.
  applyV8MemoryFlags();
  const handle = await startGateway(config, { logger: options.logger, configPath, demo: options.demo });
  const log = handle.logger;
  const print =
    options.onStatus ??
    ((line: string) => {
      if (process.stdout.isTTY) process.stdout.write(`[${new Date().toLocaleTimeString('en-GB')}] ${line}\n`);
      else log.info({ status: line }, 'status');
    });
  let timer: NodeJS.Timeout | null = null;
  // Issue 12 §1: the status line must not end the process when a read fails (EMFILE under fd exhaustion).
  const timerErrors = new LogThrottle(log, 60_000);
  const startStatusTimer = () => {
    if (timer) clearInterval(timer);
    const interval = handle.config.gateway.status_interval;
    timer =
      interval > 0
        ? guardedInterval(() => print(statusLine(handle.status())), interval, (err) => timerErrors.warn('status-timer', { err: describeError(err) }, 'status line failed; the gateway keeps running'))
        : null;
  };
  startStatusTimer();

  // --- hot reload -----------------------------------------------------------------------------
  // A digest of the file as last applied, not its text: at 100,000 OPC UA nodes the file is 7.4 MB,
  // held for the life of the process only to tell a real change from a touch (issue 25).
  let lastDigest = configPath ? fileDigest(configPath) : null;
  // Each text the file had, kept as a version (console/config-history.ts): at start, and after
  // each reload of an edit made elsewhere (the console's Apply keeps its own).
  const keepVersion = (by: string, changed: string[] | null) => {
    if (!configPath) return;
    try {
      new ConfigHistory(handle.config.gateway.data_dir).record(readFileSync(configPath, 'utf8'), { by, changed });
    } catch (err) {
      log.warn({ err: describeError(err), config: configPath }, 'the configuration history could not keep this version of the file');
    }
  };
  keepVersion('gateway started', null);
  const reload = async (trigger: string): Promise<ReloadResult | null> => {
    if (!configPath) {
      log.warn({ trigger }, 'configuration reload requested, but this gateway was not started from a file');
      return null;
    }
    let next: GatewayConfig;
    try {
      const loaded = loadConfigFile(configPath);
      next = loaded.config;
      for (const w of loaded.warnings) log.warn({ config: configPath }, w);
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : [describeError(err)];
      handle.reloadRefused(problems);
      log.error({ trigger, config: configPath, problems }, 'new configuration refused; the running configuration is kept');
      return null;
    }
    try {
      const result = await handle.reload(next);
      lastDigest = fileDigest(configPath);
      keepVersion(trigger, result.changed);
      if (result.changed.length === 0) {
        log.info({ trigger, config: configPath }, 'configuration reloaded: nothing changed');
      } else {
        log.info({ trigger, config: configPath, changed: result.changed, restarted_sources: result.restartedSources }, 'configuration reloaded');
      }
      if (result.restartRequired.length > 0) {
        log.warn({ settings: result.restartRequired }, `these changed settings take effect at the next restart: ${result.restartRequired.join(', ')}`);
      }
      if (result.statusInterval) startStatusTimer();
      return result;
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : [describeError(err)];
      log.error({ trigger, config: configPath, problems }, 'new configuration refused; the running configuration is kept');
      return null;
    }
  };
  const onHangup = () => void reload('SIGHUP');
  process.on('SIGHUP', onHangup);
  const unwatch =
    configPath && options.watchConfig !== false
      ? watchFile(configPath, () => {
          // Editors touch files without changing them, and a rename fires twice: reload on new content only.
          const digest = fileDigest(configPath);
          if (digest === null || digest === lastDigest) return;
          lastDigest = digest;
          // The console's Apply (or rollback) wrote this text and applied it: nothing to read again;
          // say what that applied, not "nothing changed".
          const written = handle.takeWrittenFile(digest);
          if (written) {
            written.result.then(
              (r) => log.info({ trigger: 'file changed', config: configPath, by: written.file.by, version: written.file.version, changed: r.changed, restarted_sources: r.restartedSources }, `configuration file written by the console (${written.file.by}${written.file.version ? `, version ${written.file.version}` : ''}), applied by it: ${r.changed.length ? `changed ${r.changed.join(', ')}` : 'no setting changed'}`),
              () => undefined,
            );
            return;
          }
          void reload('file changed');
        })
      : () => undefined;

  // --- graceful stop --------------------------------------------------------------------------
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    if (stopping) return stopping;
    if (timer) clearInterval(timer);
    unwatch();
    process.off('SIGHUP', onHangup);
    const force = setTimeout(() => {
      log.error('graceful stop took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    force.unref();
    stopping = (async () => {
      try {
        await handle.close();
        await options.extraClose?.();
      } catch (err) {
        log.error({ err: describeError(err) }, 'error while stopping');
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
    log.info({ signal }, 'stopping');
    void stop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return { handle, done, stop, reload: () => reload('request') };
}

/** SHA-256 of the file's bytes (null when it cannot be read). */
function fileDigest(path: string): string | null {
  try {
    return createHash('sha256').update(readFileSync(path)).digest('hex');
  } catch {
    return null;
  }
}
