import { changedPaths } from '../config/diff.js';
import type { GatewayConfig } from '../config/schema.js';
import { SOURCE_SECTIONS, sourceSections, type SourceSection } from '../sources/registry.js';

/**
 * What a configuration reload changes (issue: "sources and mappings are reloaded without losing
 * buffered data or restarting the process").
 *
 * Reloaded in place: the source sections (each protocol section is rebuilt on its own, so editing a
 * Modbus register leaves the OPC UA sessions alone), the operator annotations (machines, reasons,
 * detectors, MQTT trigger), `gateway.status_interval` and `log.level` (pino children created without
 * options read the level through their prototype, so setting it on the root reaches them all).
 *
 * Everything else is wired into long-lived objects (the buffer file, the HTTP listener, the
 * service connection and its request budget, the logger) and takes effect at the next restart;
 * the reload says which paths those are instead of half-applying them.
 */
export interface ReloadPlan {
  /** Every changed path (two levels deep), for the log. */
  changed: string[];
  /** Source sections to close and build again. */
  sourceSections: SourceSection[];
  annotations: boolean;
  statusInterval: boolean;
  logLevel: boolean;
  /** Changed paths that are not applied until the process restarts. */
  restartRequired: string[];
}

const HOT_PATHS = new Set<string>([...SOURCE_SECTIONS, 'annotations', 'gateway.status_interval', 'log.level']);

export function planReload(current: GatewayConfig, next: GatewayConfig): ReloadPlan {
  const changed = changedPaths(current, next);
  const topOf = (p: string) => p.split('.')[0];
  const sourceSections = SOURCE_SECTIONS.filter((s) => changed.some((p) => topOf(p) === s));
  return {
    changed,
    sourceSections,
    annotations: changed.some((p) => topOf(p) === 'annotations'),
    statusInterval: changed.includes('gateway.status_interval'),
    logLevel: changed.includes('log.level'),
    restartRequired: changed.filter((p) => !HOT_PATHS.has(p) && !HOT_PATHS.has(topOf(p))),
  };
}

/**
 * The configuration the gateway runs with after a reload: the reloadable parts from `next`, the
 * rest as it was started (those changes wait for a restart).
 */
export function appliedConfig(current: GatewayConfig, next: GatewayConfig): GatewayConfig {
  return {
    ...current,
    ...sourceSections(next),
    annotations: next.annotations,
    gateway: { ...current.gateway, status_interval: next.gateway.status_interval },
    log: { ...current.log, level: next.log.level },
  };
}
