import type { Logger } from 'pino';
import type { AnnotationsRuntime } from '../annotations/index.js';
import type { GapLedger } from '../buffer/gaps.js';
import type { SampleBuffer } from '../buffer/sample-buffer.js';
import type { GatewayConfig } from '../config/schema.js';
import type { DemoDevices } from '../console/demo-routes.js';
import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import type { Source } from '../core/source.js';
import type { LocalHttpServer } from '../http/server.js';
import type { GatewayStatus } from '../status/model.js';
import type { BackfillManager } from '../uplink/backfill.js';
import type { RequestBudget } from '../uplink/budget.js';
import type { TrackingClient } from '../uplink/client.js';
import type { UnknownVariables } from '../uplink/unknown-variables.js';
import type { SyncSender } from '../uplink/sync-sender.js';
import type { ReloadResult, WrittenFile } from './reload.js';
import type { MakeUplinkHealth } from './stages/uplink.js';
import type { UplinkHealth } from '../uplink/uplink-health.js';

export interface StartOptions {
  logger?: Logger;
  clock?: Clock;
  metrics?: Metrics;
  /** The file the configuration came from (shown in /status; reloads read it again). */
  configPath?: string | null;
  /** The demo's simulated devices (commands/demo.ts): the console's switch takes them down and back. */
  demo?: DemoDevices | null;
  /** Builds the shared uplink health (bench/outage-recovery.ts passes the former behaviour as its baseline). */
  uplinkHealth?: MakeUplinkHealth;
}

/** A running gateway, as commands and tests see it (startGateway in gateway.ts). */
export interface GatewayHandle {
  /** The configuration in effect (after reloads: the reloadable parts of the newest file). */
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly buffer: SampleBuffer;
  readonly sources: Source[];
  readonly client: TrackingClient;
  readonly health: UplinkHealth;
  readonly budget: RequestBudget;
  readonly sync: SyncSender;
  readonly backfill: BackfillManager;
  /** Machine variables the service does not know (issue 24 §1). */
  readonly unknown: UnknownVariables;
  readonly http: LocalHttpServer | null;
  /** Operator annotations (outbox, local API, HMI page, detectors), when configured. */
  readonly annotations: AnnotationsRuntime | null;
  /** The gap ledger (issue 14): intervals without data, and whether history filled them. */
  readonly gaps: GapLedger;
  /** Base URL of the local HTTP server, or null when disabled. */
  readonly httpUrl: string | null;
  status(): GatewayStatus;
  /**
   * Applies a new, already validated configuration without a restart (see reload-plan.ts for what
   * is reloaded in place). Buffered samples are untouched: only sources and annotations are rebuilt.
   * Throws ConfigError, leaving everything as it was, when the new sources cannot be built.
   */
  reload(next: GatewayConfig): Promise<ReloadResult>;
  /** Records a reload refused before it reached the gateway (the new file does not validate). */
  reloadRefused(problems: string[]): void;
  /** The file the console last wrote and applied, when its text has this digest (the watcher then has nothing to reload); answered once. */
  takeWrittenFile(digest: string): { file: WrittenFile; result: Promise<ReloadResult> } | null;
  /** Graceful stop: sources closed, pending samples committed, requests finished or abandoned. Safe to call twice. */
  close(): Promise<void>;
}
