import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { ClientSession, DataValue, OPCUAClient } from 'node-opcua';
import { Backoff } from '../../core/backoff.js';
import { sleepUnlessAborted } from '../../core/clock.js';
import { describeError, GatewayError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import { Q_BAD, qualityOfStatusCode, type QualityTable } from '../../core/quality.js';
import { MAX_FUTURE_MS } from '../../core/time.js';
import type { Source, SourceStatus } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import { ClockTolerantCertificateManager } from './certificate-validity.js';
import { createClient, userIdentity } from './client-options.js';
import { describeOffset, isLargeOffset, isoSeconds, measureClockOffset, type ClockOffset } from './clock-offset.js';
import { effectivePolicy, type OpcuaServerConfig } from './config.js';
import { decodeColumn, decodeDataValue, hasOverflowBit, sampleOut, type NodeBinding } from './decode.js';
import type { DataChanges } from './data-change-decode.js';
import { ValueLosses } from './value-losses.js';
import { classifyConnectError, OpcuaErrorCodes, type ErrorContext } from './errors.js';
import { attachNodeOpcuaLogger } from './node-opcua-logging.js';
import { parseNodeId } from './node-id.js';
import { ensureOwnCertificate } from './own-certificate.js';
import { PollingReader } from './polling-reader.js';
import { SampleQueue } from './sample-queue.js';
import { startSubscription, type MessageCounts, type SubscriptionReader } from './subscription-reader.js';
import { planNodes, type InvalidNode, type NodePlan } from './validate-nodes.js';
import { NO_OPERATION_LIMITS, readServerOperationLimits, type OperationLimits } from './operation-limits.js';
import { Watchdog } from './watchdog.js';
import { HistoryBackfill } from './history.js';
import { startConditionReader, type ConditionReader } from './condition-reader.js';

/** Why a working link was given up; becomes the `how` label of gateway_opcua_session_recoveries_total. */
interface Broken {
  how: 'watchdog' | 'connection_lost' | 'namespace_changed' | 'session_closed' | 'stopped';
  error: GatewayError | null;
}

/** One attempt at a connection: client, session, reader, watchdog. Replaced whole on rebuild. */
interface Link {
  id: number;
  client: OPCUAClient | null;
  session: ClientSession | null;
  subscription: SubscriptionReader | null;
  poller: PollingReader | null;
  watchdog: Watchdog | null;
  /** Alarms & Conditions (events:), with its own subscription; null when not configured. */
  conditions: ConditionReader | null;
  namespaceArray: string[];
  /** The server's operation limits, read at connect. */
  limits: OperationLimits;
  /** Valid nodes of this link (the historical backfill reads these). */
  bindings: NodeBinding[];
  established: boolean;
  broken: Promise<Broken>;
  break(b: Broken): void;
  teardown: Promise<void> | null;
}

const DISCONNECT_TIMEOUT_MS = 5_000;

/**
 * One OPC UA server as a source (issue 4): a secure session, a subscription (or polling), and
 * recovery that needs no operator.
 *
 * Recovery has two layers:
 * 1. node-opcua repairs a broken connection itself (new secure channel, session re-activated or
 *    re-created, subscriptions transferred or re-created; Part 4 §5.6.3, §5.13.7). Counted as
 *    `how="reconnected"`.
 * 2. A watchdog (watchdog.ts) rebuilds the whole client when neither data nor keep-alives arrive for
 *    `watchdog_multiplier` publishing intervals, whatever the cause: a repair that hangs, a
 *    subscription the server dropped, a half-open TCP connection. Then the source's own loop
 *    reconnects with capped exponential backoff, re-resolves `nsu=` ids and re-checks every node.
 */
export class OpcuaSource implements Source {
  readonly kind = 'opcua' as const;
  readonly name: string;
  private readonly path: string;
  private readonly pkiDir: string;
  private readonly throttle: LogThrottle;
  private readonly queue: SampleQueue;
  /** Values lost before the buffer (server overflow, refused), counted and recorded as gaps. */
  private readonly losses: ValueLosses;
  private readonly backoff: Backoff;
  private readonly abort = new AbortController();
  private certificateManager: ClockTolerantCertificateManager | null = null;
  /** Server clock minus gateway clock at the last connect; kept across reconnects for error messages. */
  private clockOffset: ClockOffset | null = null;
  /** The server's operation limits read at the last connect (status; kept across reconnects). */
  private operationLimits: OperationLimits | null = null;
  private link: Link | null = null;
  private linkSeq = 0;
  private loop: Promise<void> | null = null;
  private stopped = false;
  private detachLog: (() => void) | null = null;
  private invalid: InvalidNode[] = [];
  private monitored = 0;
  private watchdogTimeoutMs = 0;
  private publishingInterval: number | null = null;
  private connectedAt: number | null = null;
  private readonly recoveries: Record<string, number> = {};
  private nextRetryMs: number | null = null;
  /** Polling mode: last forwarded value and source time per node, for deadband and de-duplication. */
  private readonly lastPolled = new Map<number, { value: number; ts: number }>();
  /** Historical backfill after gaps (history.ts); null when off or without buffer state. */
  private readonly history: HistoryBackfill | null;
  /** The quality of each configured node, slot = its place in `nodes` (NodeBinding.index). */
  private readonly quality: QualityTable;

  constructor(
    private readonly cfg: OpcuaServerConfig,
    private readonly ctx: SourceContext,
    options: { path: string; pkiDir?: string },
  ) {
    this.name = cfg.name;
    this.path = options.path;
    this.pkiDir = options.pkiDir ?? join(ctx.dataDir, 'opcua', 'pki');
    this.throttle = new LogThrottle(ctx.logger, 60_000, () => ctx.clock.monotonic());
    this.losses = new ValueLosses({ source: cfg.name, path: this.path, nodes: cfg.nodes.length, sink: ctx.sink, gaps: ctx.history?.gaps ?? null, metrics: ctx.metrics, logger: ctx.logger, clock: ctx.clock });
    this.queue = new SampleQueue(ctx.sink, ctx.stats, this.throttle, ctx.logger, cfg.max_pending_samples, {
      onLost: (variable, ts) => this.losses.refused(variable, ts),
      // Room again after a commit: send the Publish requests held back (publish-pipeline.ts).
      onDrained: () => this.link?.subscription?.resume(),
    });
    this.backoff = new Backoff({ initialMs: cfg.reconnect.initial_delay, maxMs: cfg.reconnect.max_delay, factor: 2, jitterRatio: 0.2 });
    this.quality = ctx.stats.quality;
    this.quality.reserve(cfg.nodes.length);
    for (const n of cfg.nodes) this.quality.add(n.variable);
    // A polled node is read every polling_interval; a monitored item reports on change only.
    if (cfg.mode === 'polling') this.quality.setPeriod(cfg.polling_interval);
    this.history =
      ctx.history && cfg.history.backfill === 'auto'
        ? new HistoryBackfill({
            source: cfg.name,
            path: this.path,
            settings: cfg.history,
            ctx: ctx.history,
            sink: ctx.sink,
            logger: ctx.logger.child({ part: 'history' }),
            metrics: ctx.metrics,
            clock: ctx.clock,
            firstValueTimeoutMs: Math.max(10_000, 3 * (cfg.mode === 'polling' ? cfg.polling_interval : cfg.publishing_interval)),
          })
        : null;
  }

  async start(): Promise<void> {
    if (this.loop || this.stopped) return;
    this.detachLog = attachNodeOpcuaLogger(this.ctx.logger);
    this.ctx.metrics.opcuaInvalidNodes.set({ source: this.name }, 0);
    this.loop = this.run().catch((err) => {
      // The loop catches everything itself; reaching this is a bug, reported rather than crashing.
      this.ctx.stats.error(err, 'OPCUA_INTERNAL');
      this.ctx.logger.error({ err: describeError(err) }, 'OPC UA source loop ended unexpectedly');
    });
  }

  async close(): Promise<void> {
    if (this.stopped) {
      await this.loop;
      return;
    }
    this.stopped = true;
    this.abort.abort();
    const link = this.link;
    if (link) {
      link.break({ how: 'stopped', error: null });
      await this.teardown(link, true);
    }
    await this.loop;
    await this.queue.drain();
    this.losses.flush();
    if (this.certificateManager) await this.certificateManager.dispose().catch(() => undefined);
    this.certificateManager = null;
    this.detachLog?.();
    this.ctx.stats.setState('stopped');
  }

  status(): SourceStatus {
    return this.ctx.stats.snapshot({
      endpoint: this.cfg.endpoint,
      security: `${this.cfg.security_mode}/${effectivePolicy(this.cfg)}`,
      user: this.cfg.user.type,
      mode: this.cfg.mode,
      nodes_configured: this.cfg.nodes.length,
      nodes_monitored: this.monitored,
      invalid_nodes: this.invalid.map((n) => ({ node_id: n.node_id, variable: n.variable, reason: n.reason })),
      publishing_interval_ms: this.publishingInterval,
      publish_requests: this.link?.subscription?.publishRequests ?? null,
      flow: this.link?.subscription?.flow() ?? null,
      values_lost: this.losses.totalLost,
      watchdog_timeout_ms: this.watchdogTimeoutMs || null,
      watchdog_silent_ms: this.link?.watchdog ? Math.round(this.link.watchdog.silentFor()) : null,
      connected_since: this.connectedAt,
      server_clock_offset_ms: this.clockOffset?.offsetMs ?? null,
      operation_limits: this.operationLimits && {
        max_nodes_per_read: this.operationLimits.maxNodesPerRead,
        max_monitored_items_per_call: this.operationLimits.maxMonitoredItemsPerCall,
        max_nodes_per_history_read_data: this.operationLimits.maxNodesPerHistoryReadData,
      },
      recoveries: { ...this.recoveries },
      next_retry_ms: this.nextRetryMs,
      pending_samples: this.queue.size,
      pki_dir: this.pkiDir,
      history: this.history?.status() ?? { backfill: this.cfg.history.backfill },
      ...(this.cfg.events ? { events: this.link?.conditions?.status() ?? { subscribed: false, last_error: this.eventsError } } : {}),
    });
  }

  // --- the connect loop -----------------------------------------------------------------------

  private async run(): Promise<void> {
    while (!this.stopped) {
      await this.runLink();
      if (this.stopped) break;
      this.ctx.stats.setState('disconnected');
      this.ctx.stats.reconnecting();
      const delay = this.takeDelay();
      this.nextRetryMs = delay;
      await sleepUnlessAborted(delay, this.abort.signal);
      this.nextRetryMs = null;
    }
  }

  /**
   * One link from connect to teardown. Its own async function, so nothing of the link outlives it:
   * a suspended async function keeps every local it ever held (V8 keeps its registers), and when
   * this body was inline in run()'s loop the torn-down link (client, session, subscription and its
   * 100,000 monitored items, issue 25) stayed reachable through the backoff sleeps and the next
   * connect until a later link happened to overwrite the register.
   */
  private async runLink(): Promise<void> {
    const link = this.newLink();
    this.link = link;
    let broken: Broken | null = null;
    let untrusted = false;
    try {
      this.ctx.stats.setState('connecting');
      await this.establish(link);
      this.backoff.reset();
      broken = await link.broken;
    } catch (err) {
      if (this.stopped) return;
      const delay = this.peekDelay();
      const e = err instanceof GatewayError && err.code.startsWith('OPCUA_') ? err : classifyConnectError(err, this.errorContext(`Retrying in ${formatSeconds(delay)}.`));
      untrusted = e.code === OpcuaErrorCodes.serverCertUntrusted;
      this.ctx.stats.error(e, e.code);
      this.throttle.warn(`connect:${e.code}`, { code: e.code, endpoint: this.cfg.endpoint }, e.message);
    }
    await this.teardown(link, broken === null || broken.how === 'stopped');
    this.release(link);
    if (untrusted) await this.forgetTrustIndex();
    this.connectedAt = null;
    this.setMonitored(0);
    if (this.stopped) return;
    if (broken && broken.how !== 'stopped') {
      this.recoveries[broken.how] = (this.recoveries[broken.how] ?? 0) + 1;
      this.ctx.metrics.opcuaSessionRecoveries.inc({ source: this.name, how: broken.how });
      if (broken.error) {
        this.ctx.stats.error(broken.error, broken.error.code);
        this.ctx.logger.warn({ code: broken.error.code, endpoint: this.cfg.endpoint }, broken.error.message);
      }
    }
  }

  /**
   * A torn-down link lets go of what it holds, so nothing that still reaches the Link object (a
   * listener node-opcua keeps, a late callback) keeps the client and its monitored items in memory
   * while the next link is built (issue 25: two sets of 100,000 items during a rebuild).
   */
  private release(link: Link): void {
    if (this.link === link) this.link = null;
    link.client = null;
    link.session = null;
    link.subscription = null;
    link.poller = null;
    link.watchdog = null;
    link.conditions = null;
    link.bindings = [];
  }

  /**
   * The nodes as last checked, and the server's namespace array they were resolved against. A
   * rebuild (watchdog, lost session, restarted server) re-checks only the nodes refused last time
   * while the namespace array is unchanged: checking every node again (DataType, ValueRank and Value,
   * three reads each) made a rebuild 4–6× slower than a bare client's at 30,000–100,000 nodes
   * (issue 25, bench/opcua-recovery.ts). What a restarted server changed is still caught: a node that
   * no longer exists is refused by CreateMonitoredItems (BadNodeIdUnknown), a value that is no
   * longer numeric by the decoder, each with its reason.
   */
  private checked: { namespaceArray: readonly string[]; plan: NodePlan } | null = null;

  private async planFor(session: ClientSession, namespaceArray: readonly string[], limits: OperationLimits): Promise<NodePlan> {
    const prev = this.checked;
    let plan: NodePlan;
    if (prev && sameList(prev.namespaceArray, namespaceArray)) {
      const again = await planNodes(session, this.cfg, namespaceArray, limits, new Set(prev.plan.invalid.map((n) => n.index)));
      plan = { valid: again.valid.length === 0 ? prev.plan.valid : [...prev.plan.valid, ...again.valid].sort((a, b) => a.index - b.index), invalid: again.invalid };
    } else {
      plan = await planNodes(session, this.cfg, namespaceArray, limits);
    }
    this.checked = { namespaceArray, plan };
    return plan;
  }

  private pendingDelay: number | null = null;
  /** The delay the next retry will use (computed once, so the message and the wait agree). */
  private peekDelay(): number {
    if (this.pendingDelay === null) this.pendingDelay = this.backoff.next();
    return this.pendingDelay;
  }
  private takeDelay(): number {
    const d = this.peekDelay();
    this.pendingDelay = null;
    return d;
  }

  private newLink(): Link {
    let resolve!: (b: Broken) => void;
    const broken = new Promise<Broken>((r) => (resolve = r));
    let done = false;
    return {
      id: ++this.linkSeq,
      client: null,
      session: null,
      subscription: null,
      poller: null,
      watchdog: null,
      conditions: null,
      namespaceArray: [],
      limits: NO_OPERATION_LIMITS,
      bindings: [],
      established: false,
      broken,
      break(b) {
        if (done) return;
        done = true;
        resolve(b);
      },
      teardown: null,
    };
  }

  private errorContext(retryHint?: string): ErrorContext {
    return {
      path: this.path,
      endpoint: this.cfg.endpoint,
      securityMode: this.cfg.security_mode,
      securityPolicy: effectivePolicy(this.cfg),
      pkiDir: this.pkiDir,
      serverCertificateTimeInvalid: this.certificateManager?.lastTimeInvalid() ?? null,
      clockOffsetMs: this.clockOffset?.offsetMs ?? null,
      sessionTimeoutMs: this.cfg.session_timeout,
      ...(this.cfg.user.type === 'username' ? { user: this.cfg.user.username } : {}),
      ...(retryHint ? { retryHint } : {}),
    };
  }

  private async certificates(): Promise<ClockTolerantCertificateManager> {
    if (this.certificateManager) return this.certificateManager;
    mkdirSync(this.pkiDir, { recursive: true });
    // Unknown server certificates land in <pki>/rejected unless trust_on_first_use is set; a
    // trusted one whose validity starts in the future (server clock ahead) is accepted and logged.
    const cm = new ClockTolerantCertificateManager({ rootFolder: this.pkiDir, automaticallyAcceptUnknownCertificate: this.cfg.trust_on_first_use, name: 'PKI' });
    await cm.initialize();
    // The application instance certificate, under <pki>/own, back-dated so that a server whose
    // clock is behind accepts it. Should this fail, node-opcua creates its default one at connect.
    try {
      await ensureOwnCertificate(cm, this.cfg.application_name);
    } catch (err) {
      this.ctx.logger.warn({ err: describeError(err), pki_dir: this.pkiDir }, 'could not create the back-dated gateway certificate; node-opcua creates its default one');
    }
    this.certificateManager = cm;
    return cm;
  }

  /**
   * Drops the certificate manager after a refused (untrusted) server certificate, so the next
   * attempt reads the trust folders afresh. node-opcua-pki 6.x keeps an in-memory index of
   * `trusted/` and `rejected/` fed by file watchers, and the file it writes to `rejected/` is
   * indexed without its file name: when the operator moves it to `trusted/certs` before the
   * watcher has reported the new file (immediately, or on a busy machine), the `unlink` is never
   * matched, the certificate stays "rejected" in memory (rejected wins over trusted) and the
   * source would be refused until restarted. A fresh manager scans the folders as they are now.
   */
  private async forgetTrustIndex(): Promise<void> {
    const cm = this.certificateManager;
    this.certificateManager = null;
    if (cm) await cm.dispose().catch(() => undefined);
  }

  private async establish(link: Link): Promise<void> {
    const cm = await this.certificates();
    if (this.stopped) return;
    const client = createClient(this.cfg, cm);
    link.client = client;
    const current = () => this.link === link && !this.stopped;

    client.on('connection_lost', () => {
      if (!current() || !link.established) return;
      this.ctx.stats.setState('connecting');
      // The items are gone with the server (or the connection); counted again once repaired.
      this.setMonitored(0);
      link.watchdog?.allow(this.cfg.reconnect.max_delay);
      this.ctx.logger.warn({ endpoint: this.cfg.endpoint }, 'OPC UA connection lost; reconnecting (subscriptions are transferred when the server still has them, else re-created)');
    });
    client.on('connection_reestablished', () => {
      if (!current() || !link.established) return;
      void this.afterReconnect(link);
    });
    client.on('close', (err?: Error | null) => {
      if (!current() || !link.established || !err) return;
      link.break({ how: 'connection_lost', error: new GatewayError(OpcuaErrorCodes.connectionLost, `${this.path}: the connection to ${this.cfg.endpoint} was lost and could not be repaired (${describeError(err)}); rebuilding it`, { cause: err }) });
    });

    await client.connect(this.cfg.endpoint);
    if (!current()) return;
    const session = await client.createSession(userIdentity(this.cfg, this.path));
    link.session = session;
    if (!current()) return;
    session.on('session_closed', (status: unknown) => {
      if (!current() || !link.established) return;
      link.break({ how: 'session_closed', error: new GatewayError(OpcuaErrorCodes.sessionFailed, `${this.path}: the server closed the session (${String(status)}); rebuilding it`) });
    });

    link.namespaceArray = await session.readNamespaceArray();
    await this.checkClock(link, cm, true);
    if (!current()) return;
    // Every Read, CreateMonitoredItems and HistoryRead below is split to fit these (Part 5 §6.3.11).
    const limits = await readServerOperationLimits(session);
    link.limits = limits;
    this.operationLimits = limits;
    if (!current()) return;
    const plan = await this.planFor(session, link.namespaceArray, limits);
    if (!current()) return;

    const onValue = (b: NodeBinding, dv: DataValue) => {
      if (this.link !== link) return;
      link.watchdog?.feed();
      this.onValue(b, dv);
    };
    let invalid = plan.invalid;
    link.bindings = plan.valid;
    // Before the subscription exists, so the first live value cannot move where the gap starts.
    this.history?.begin(session, plan.valid, limits);
    if (this.cfg.mode === 'subscription') {
      const labels = { source: this.name };
      const onMessage = (c: MessageCounts) => {
        if (this.link !== link) return;
        if (c.values > 0) this.ctx.metrics.opcuaValuesReceived.inc(labels, c.values);
        if (c.overflows > 0) {
          this.ctx.metrics.opcuaQueueOverflows.inc(labels, c.overflows);
          this.throttle.warn('queue-overflow', { code: 'OPCUA_QUEUE_OVERFLOW', values: c.overflows }, `${this.path}: the server discarded older values of ${c.overflows} node(s) (Overflow bit, Part 4 §5.12.1.5): its monitored-item queues (queue_size) filled before the gateway fetched them; counted in gateway_opcua_queue_overflows_total`);
        }
        if (c.missedMessages > 0) {
          this.ctx.metrics.opcuaMissedMessages.inc(labels, c.missedMessages);
          this.throttle.warn('missed-messages', { code: 'OPCUA_MISSED_MESSAGES', messages: c.missedMessages }, `${this.path}: ${c.missedMessages} NotificationMessage(s) of the subscription never arrived (sequence number skipped); their values are lost`);
        }
      };
      const onColumns = (c: DataChanges, bindings: readonly NodeBinding[]) => {
        if (this.link === link) this.onColumns(link, c, bindings);
      };
      const sub = await startSubscription(session, this.cfg, plan.valid, { onValue, onColumns, onAlive: () => link.watchdog?.feed(), onMessage }, limits, () => this.queue.room());
      link.subscription = sub;
      invalid = [...invalid, ...sub.refused].sort((a, b) => a.index - b.index);
      this.monitored = sub.monitored;
      this.publishingInterval = sub.publishingInterval;
      // An idle subscription sends a keep-alive every MaxKeepAliveCount intervals (Part 4 §5.13.1);
      // the watchdog waits the configured multiple, and never less than two keep-alive periods.
      const keepAlive = sub.subscription.maxKeepAliveCount || this.cfg.keep_alive_count;
      this.watchdogTimeoutMs = Math.max(this.cfg.watchdog_multiplier, keepAlive + 2) * sub.publishingInterval;
    } else {
      this.lastPolled.clear();
      const poller = new PollingReader(session, plan.valid, this.cfg.polling_interval, this.ctx.clock, {
        onValue,
        onAlive: () => link.watchdog?.feed(),
        onError: (err) => {
          const e = new GatewayError(OpcuaErrorCodes.readFailed, `${this.path}: reading from ${this.cfg.endpoint} failed: ${describeError(err)}`, { cause: err });
          this.ctx.stats.error(e, e.code);
          this.throttle.warn('poll-error', { code: e.code }, e.message);
        },
        onRequest: (outcome) => this.ctx.metrics.sourceRequests.inc({ source: this.name, kind: 'opcua', device: this.name, outcome }),
      }, limits.maxNodesPerRead);
      link.poller = poller;
      this.monitored = plan.valid.length;
      this.publishingInterval = null;
      this.watchdogTimeoutMs = this.cfg.watchdog_multiplier * this.cfg.polling_interval;
    }
    this.reportInvalid(invalid);
    this.ctx.metrics.opcuaMonitoredNodes.set({ source: this.name }, this.monitored);
    if (this.cfg.events) await this.startEvents(link, session);
    if (!current()) return;

    const watchdog = new Watchdog(
      this.watchdogTimeoutMs,
      this.ctx.clock,
      (silent) => {
        link.break({
          how: 'watchdog',
          error: new GatewayError(OpcuaErrorCodes.watchdog, `${this.path}: no data and no keep-alive from ${this.cfg.endpoint} for ${Math.round(silent / 1000)} s (watchdog ${Math.round(this.watchdogTimeoutMs / 1000)} s); rebuilding the connection`),
        });
      },
      () => link.subscription?.holding() ?? false,
    );
    link.watchdog = watchdog;
    watchdog.start();
    link.poller?.start();
    link.established = true;
    this.connectedAt = this.ctx.clock.now();
    this.ctx.stats.setState(invalid.length > 0 ? 'degraded' : 'connected');
    this.ctx.logger.info(
      { endpoint: this.cfg.endpoint, security: `${this.cfg.security_mode}/${effectivePolicy(this.cfg)}`, mode: this.cfg.mode, nodes: this.monitored, invalid_nodes: invalid.length, watchdog_ms: this.watchdogTimeoutMs },
      'OPC UA source connected',
    );
  }

  /**
   * After node-opcua repaired the connection: the subscription's items are on the server again (they
   * are ours, not node-opcua's: subscription-reader.ts), and the same nsu= ids must still point to
   * the same indexes.
   */
  private async afterReconnect(link: Link): Promise<void> {
    // The repair gets a whole watchdog period of its own from here, and every CreateMonitoredItems
    // call it completes counts as a sign of life: re-creating 100,000 items is work, not silence.
    link.watchdog?.feed();
    this.recoveries.reconnected = (this.recoveries.reconnected ?? 0) + 1;
    this.ctx.metrics.opcuaSessionRecoveries.inc({ source: this.name, how: 'reconnected' });
    // A repaired session may have missed values (a subscription re-created, not transferred): read
    // them back from history (issue 14 §1). Overlap with transferred values is harmless. Before the
    // items are created again, so their first live values cannot move where the gap starts.
    if (link.session && this.link === link) this.history?.begin(link.session, link.bindings, link.limits);
    if (link.subscription) {
      try {
        const r = await link.subscription.repair(() => link.watchdog?.feed());
        if (this.link !== link) return;
        if (r.created > 0) {
          this.ctx.logger.info({ endpoint: this.cfg.endpoint, items: r.created, refused: r.refused }, 'OPC UA monitored items created again: the server had lost the subscription (restarted)');
        }
        if (r.firstRefusal) {
          const n = r.firstRefusal;
          this.throttle.warn('recreate-refused', { code: OpcuaErrorCodes.invalidNode, refused: r.refused, node_id: n.node_id, variable: n.variable }, `${this.path}: the restarted server refused ${r.refused} monitored item(s) when they were created again, e.g. nodes[${n.index}] "${n.node_id}" (${n.variable}): ${n.reason}; nodes_monitored counts the others`);
        }
      } catch (err) {
        if (this.link !== link) return;
        // An empty subscription still sends keep-alives, so the watchdog would never trip: rebuild.
        link.break({ how: 'connection_lost', error: new GatewayError(OpcuaErrorCodes.connectionLost, `${this.path}: after the connection to ${this.cfg.endpoint} was repaired, its monitored items could not be created again (${describeError(err)}); rebuilding it`, { cause: err }) });
        return;
      }
    }
    // What the server accepted is monitored.
    this.setMonitored(link.subscription ? link.subscription.countMonitored() : link.poller ? link.bindings.length : 0);
    this.ctx.stats.setState(this.invalid.length > 0 ? 'degraded' : 'connected');
    this.ctx.logger.info({ endpoint: this.cfg.endpoint }, 'OPC UA connection re-established; session and subscription restored');
    const usesNsu = this.cfg.nodes.some((n) => {
      const p = parseNodeId(n.node_id);
      return !('problem' in p) && 'uri' in p.namespace;
    });
    // Part 9 §5.5.7: conditions that changed while the connection was broken are resent.
    if (this.link === link) link.conditions?.refresh('connection re-established');
    if (link.session) await this.checkClock(link, this.certificateManager, false);
    if (!usesNsu || !link.session) return;
    try {
      const now = await link.session.readNamespaceArray();
      if (now.join('\n') !== link.namespaceArray.join('\n')) {
        link.break({ how: 'namespace_changed', error: new GatewayError(OpcuaErrorCodes.namespaceChanged, `${this.path}: the server's namespace array changed after it restarted; re-resolving nsu= node ids`) });
      }
    } catch {
      // The watchdog covers a session that does not answer.
    }
  }

  /**
   * Measures the server's clock against the gateway's and says so, once per connect, when they
   * differ by more than CLOCK_OFFSET_WARN_MS or when a trusted server certificate was accepted
   * before its validity began. After node-opcua repaired a connection (`fresh` false) only a
   * changed offset is reported again, so a flapping link does not repeat the same line.
   */
  private async checkClock(link: Link, cm: ClockTolerantCertificateManager | null, fresh: boolean): Promise<void> {
    const early = cm?.takeAcceptedEarly() ?? null;
    const previous = this.clockOffset;
    const offset = link.session ? await measureClockOffset(link.session, this.ctx.clock) : null;
    if (offset) this.clockOffset = offset;
    const endpoint = this.cfg.endpoint;
    if (offset && isLargeOffset(offset) && (fresh || !previous || Math.abs(offset.offsetMs - previous.offsetMs) > 10_000)) {
      const stamped = this.cfg.nodes.filter((n) => (n.timestamp ?? this.cfg.timestamp) !== 'gateway').length;
      const effect =
        stamped === 0
          ? 'all nodes use timestamp "gateway", so values carry the gateway clock and are not affected'
          : offset.offsetMs > MAX_FUTURE_MS
            ? `${stamped} of ${this.cfg.nodes.length} node(s) use timestamp "source" or "server", and a timestamp more than 24 h ahead is refused (bad_timestamp): their values are not stored until the server's clock is set (NTP), or set ${this.path}.timestamp: gateway`
            : `${stamped} of ${this.cfg.nodes.length} node(s) use timestamp "source" or "server", so their values carry the server's clock: set the server's clock (NTP), or set ${this.path}.timestamp: gateway`;
      this.ctx.logger.warn(
        { code: 'OPCUA_CLOCK_OFFSET', endpoint, server_clock_offset_ms: offset.offsetMs, server_time: new Date(offset.serverTime).toISOString(), gateway_time: new Date(offset.gatewayTime).toISOString() },
        `${this.path}: the clock of the OPC UA server ${endpoint} is ${describeOffset(offset.offsetMs)} the gateway clock (server ${isoSeconds(offset.serverTime)}, gateway ${isoSeconds(offset.gatewayTime)}); ${effect}`,
      );
    }
    if (early) {
      const clockNote = offset ? `the server clock is ${describeOffset(offset.offsetMs)} the gateway's` : 'the server clock is probably ahead of the gateway\'s';
      this.ctx.logger.warn(
        { code: 'OPCUA_SERVER_CERT_NOT_YET_VALID', endpoint, certificate_subject: early.subject, valid_from: early.validFrom.toISOString() },
        `${this.path}: the certificate of the OPC UA server ${endpoint} is valid only from ${isoSeconds(early.validFrom.getTime())} by the gateway clock (${clockNote}); accepted because it is trusted (Part 6 E.6 allows suppressing this check); the warning stops once that time has passed. Check the server's clock`,
      );
    }
  }

  /** nodes_monitored and gateway_opcua_monitored_nodes: what is being read right now. */
  private setMonitored(n: number): void {
    this.monitored = n;
    this.ctx.metrics.opcuaMonitoredNodes.set({ source: this.name }, n);
  }

  private reportInvalid(invalid: InvalidNode[]): void {
    this.invalid = invalid;
    this.ctx.metrics.opcuaInvalidNodes.set({ source: this.name }, invalid.length);
    const now = this.ctx.clock.now();
    for (const n of invalid) {
      this.quality.set(n.index, Q_BAD, now);
      this.ctx.stats.refused('invalid_node', 1, { variable: n.variable, detail: n.reason });
      const e = new GatewayError(OpcuaErrorCodes.invalidNode, `${this.path}.nodes[${n.index}].node_id: "${n.node_id}" (${n.variable}) is skipped: ${n.reason}`);
      this.ctx.stats.error(e, e.code);
      this.throttle.warn(`invalid:${n.index}:${n.reason}`, { code: e.code, node_id: n.node_id, variable: n.variable }, `${e.message}; the other nodes keep flowing`);
    }
  }

  /** A value node-opcua decoded (polling reads, and subscription values that are not simple). */
  private onValue(b: NodeBinding, dv: DataValue): void {
    const now = this.ctx.clock.now();
    const d = decodeDataValue(b, dv, now);
    // The node's quality is its StatusCode's severity (Part 4 §7.39), whether or not the value is
    // forwarded (Bad never is; Uncertain as configured); a value the gateway cannot use is bad.
    this.quality.set(b.index, d.ok || d.reason === 'bad_status' || d.reason === 'uncertain_status' ? qualityOfStatusCode(dv.statusCode?.value ?? 0) : Q_BAD, now);
    const code = dv.statusCode?.value ?? 0;
    if (this.cfg.mode === 'subscription' && hasOverflowBit(code)) {
      this.overflowed(b, d.ok ? d.sample.ts : (dv.sourceTimestamp?.getTime() ?? now));
    }
    if (!d.ok) {
      this.refuse(b, d.reason, d.detail);
      return;
    }
    if (this.cfg.mode === 'polling') {
      // A poll returns the value even when it did not change: skip an unchanged source sample
      // (same value, same source time) and apply an absolute deadband on the gateway side.
      const last = this.lastPolled.get(b.index);
      if (last) {
        if (b.timestamp === 'source' && last.ts === d.sample.ts && last.value === d.sample.value) return;
        if (b.deadband && Math.abs(d.sample.value - last.value) <= b.deadband.value) return;
      }
      this.lastPolled.set(b.index, { value: d.sample.value, ts: d.sample.ts });
    }
    this.accept(b, d.sample.ts, d.sample.value);
  }

  /**
   * The values of one data change notification read as columns (data-change-decode.ts): the hot
   * path at 100,000 values a second, one object (the sample) per value.
   */
  private onColumns(link: Link, c: DataChanges, bindings: readonly NodeBinding[]): void {
    const now = this.ctx.clock.now();
    const out = this.out;
    const queue = this.queue;
    const losses = this.losses;
    const history = this.history;
    const quality = this.quality;
    for (let i = 0; i < c.count; i++) {
      const b = bindings[c.handles[i] - 1];
      if (b === undefined) continue;
      const refused = decodeColumn(out, b, c, i, now);
      // As onValue: the StatusCode's severity, or bad for a value the gateway cannot use.
      quality.set(b.index, refused === null || refused.reason === 'bad_status' || refused.reason === 'uncertain_status' ? qualityOfStatusCode(c.status[i]) : Q_BAD, now);
      if (c.status[i] !== 0 && hasOverflowBit(c.status[i])) this.overflowed(b, refused ? (c.source[i] > 0 ? c.source[i] : now) : out.ts, link, c.handles[i] - 1);
      if (refused) {
        this.refuse(b, refused.reason, refused.detail);
        continue;
      }
      losses.seenOut(b.index, out);
      history?.noteLiveOut(b.index, out);
      queue.pushOut(b.variable, out);
    }
  }

  /** Where decodeColumn writes each value (one object for all). */
  private readonly out = sampleOut();

  /** The server discarded values of `b` before this one (Overflow bit): counted, estimated and recorded (value-losses.ts). */
  private overflowed(b: NodeBinding, ts: number, link = this.link, position = link ? positionOf(link.bindings, b.index) : -1): void {
    const sampling = position >= 0 ? (link?.subscription?.samplingOf(position) ?? 0) : 0;
    this.losses.overflowed(b.index, b.variable, ts, sampling > 0 ? sampling : b.samplingInterval);
  }

  private refuse(b: NodeBinding, reason: string, detail: string): void {
    this.ctx.stats.refused(reason, 1, { variable: b.variable, detail });
    this.throttle.warn(`refused:${b.index}:${reason}`, { node_id: b.configuredId, variable: b.variable, reason, detail }, 'OPC UA value not forwarded');
  }

  private accept(b: NodeBinding, ts: number, value: number): void {
    this.losses.seen(b.index, ts);
    this.history?.noteLive(b.index, ts);
    this.queue.pushValue(b.variable, ts, value);
  }

  /** Why the event subscription could not be created at the last connect (status). */
  private eventsError: string | null = null;

  /**
   * Subscribes to the server's events (events:, issue 26). A notifier or type the server does not
   * have is reported and skipped: the values keep flowing.
   */
  private async startEvents(link: Link, session: ClientSession): Promise<void> {
    const events = this.cfg.events!;
    const sink = this.ctx.conditions;
    if (!sink) {
      this.eventsError = 'no consumer for condition events in this process';
      return;
    }
    try {
      link.conditions = await startConditionReader({
        session,
        cfg: events,
        path: `${this.path}.events`,
        source: this.name,
        namespaceArray: link.namespaceArray,
        sink,
        logger: this.ctx.logger,
        throttle: this.throttle,
        metrics: this.ctx.metrics,
        clock: this.ctx.clock,
        keepAliveCount: this.cfg.keep_alive_count,
        // Either subscription's Publish responses prove the link alive: a storm of events can hold
        // the other one's keep-alives back on a busy server (node-opcua: several seconds).
        onAlive: () => link.watchdog?.feed(),
      });
      this.eventsError = null;
    } catch (err) {
      this.eventsError = describeError(err);
      const e = new GatewayError(OpcuaErrorCodes.eventsUnavailable, `${this.path}.events: no event subscription on ${this.cfg.endpoint}: ${this.eventsError}; values keep flowing`, { cause: err });
      this.ctx.stats.error(e, e.code);
      this.throttle.warn(`events:${this.eventsError}`, { code: e.code }, e.message);
      return;
    }
  }

  /**
   * `graceful`: wait longer for the session to close (shutdown). A link the watchdog or a connection
   * loss condemned gets short timeouts: its requests would mostly wait for nothing.
   */
  private async teardown(link: Link, graceful: boolean): Promise<void> {
    if (link.teardown) return link.teardown;
    if (this.link === link || this.stopped) this.history?.end();
    link.teardown = (async () => {
      link.watchdog?.stop();
      link.subscription?.stop();
      await link.conditions?.terminate();
      await link.poller?.stop();
      const client = link.client;
      if (!client) return;
      // Closing the session deletes its subscriptions on the server (Part 4 §5.6.4); bounded,
      // because on a dead connection the request would wait for its timeout.
      const session = link.session;
      // Still tried briefly on a condemned link: a server that is alive but whose subscription died
      // would otherwise keep the orphan session until session_timeout, and PLCs allow few sessions.
      if (session && link.established) await withTimeout(session.close(true).catch(() => undefined), graceful ? 3_000 : 1_000);
      await withTimeout(client.disconnect().catch(() => undefined), graceful ? DISCONNECT_TIMEOUT_MS : 2_000);
    })();
    return link.teardown;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]).finally(() => clearTimeout(timer));
}

function formatSeconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

/** Position of the binding of config node `index` in `bindings` (sorted by index), or -1. */
function positionOf(bindings: readonly NodeBinding[], index: number): number {
  let lo = 0;
  let hi = bindings.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const at = bindings[mid].index;
    if (at === index) return mid;
    if (at < index) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
