import type { BackoffPolicy } from '../../core/backoff.js';
import { describeError, GatewayError } from '../../core/errors.js';
import { LogThrottle } from '../../core/log-throttle.js';
import type { Source, SourceStatus } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import type { ModbusSectionConfig } from './config.js';
import { DevicePoller } from './device.js';
import { ModbusLink } from './link.js';
import { endpointKey, type SectionPlan } from './plan.js';

/**
 * The Modbus source: one per `modbus:` section, holding one link per endpoint (TCP address or
 * serial port) and one poller per device. Its state sums up the devices: connected when all
 * answer, degraded when some do, disconnected when none does.
 */
export class ModbusSource implements Source {
  readonly kind = 'modbus' as const;
  readonly name: string;
  private readonly links = new Map<string, ModbusLink>();
  private readonly devices: DevicePoller[] = [];
  private started = false;
  private closing: Promise<void> | null = null;

  constructor(section: ModbusSectionConfig, plan: SectionPlan, private readonly ctx: SourceContext) {
    this.name = section.name;
    const reconnect: BackoffPolicy = {
      initialMs: section.reconnect.initial_delay,
      maxMs: Math.max(section.reconnect.initial_delay, section.reconnect.max_delay),
      factor: 2,
      jitterRatio: 0.2,
    };
    const throttle = new LogThrottle(ctx.logger, 60_000, () => ctx.clock.monotonic());
    for (const device of plan.devices) {
      const key = endpointKey(device.endpoint);
      let link = this.links.get(key);
      if (!link) {
        const onLink = plan.devices.filter((d) => endpointKey(d.endpoint) === key);
        link = new ModbusLink(device.endpoint, {
          logger: ctx.logger,
          clock: ctx.clock,
          reconnect,
          connectTimeoutMs: Math.min(10_000, Math.max(1_000, ...onLink.map((d) => d.timeoutMs))),
          onReconnectAttempt: () => ctx.stats.reconnecting(),
          onConnectError: (err) => ctx.stats.error(new GatewayError('MODBUS_CONNECT_FAILED', `cannot connect to ${key}: ${describeError(err)}`, { cause: err })),
          onStateChange: (connected) => {
            if (!connected) {
              const at = ctx.clock.now();
              for (const d of this.devices) if (d.link === link) d.linkLost(at);
            }
            this.refreshState();
          },
        });
        this.links.set(key, link);
      }
      this.devices.push(new DevicePoller(device, { sourceName: this.name, ctx, link, reconnect, throttle, onStateChange: () => this.refreshState() }));
    }
  }

  async start(): Promise<void> {
    if (this.started || this.closing) return;
    this.started = true;
    this.ctx.stats.setState('connecting');
    for (const link of this.links.values()) link.start();
    for (const device of this.devices) device.start();
    this.ctx.logger.info(
      { source: this.name, devices: this.devices.map((d) => ({ name: d.plan.name, endpoint: endpointKey(d.plan.endpoint), requests_per_cycle: d.plan.blocks.length, values: d.plan.values.length })) },
      'modbus source started',
    );
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      // Stop the loops first, then close the connections (which fails any request still waiting
      // for an answer), then wait for the loops and their pending buffer appends.
      for (const d of this.devices) d.stop();
      await Promise.allSettled([...this.links.values()].map((l) => l.close()));
      await Promise.allSettled(this.devices.map((d) => d.close()));
      this.ctx.stats.setState('stopped');
    })().catch((err) => {
      this.ctx.logger.warn({ err: describeError(err) }, 'modbus source did not close cleanly');
    });
    return this.closing;
  }

  status(): SourceStatus {
    return this.ctx.stats.snapshot({
      devices: this.devices.map((d) => d.status()),
      connections: [...this.links.values()].map((l) => l.status()),
    });
  }

  /** The pollers, for tests and the status page. */
  devicePollers(): readonly DevicePoller[] {
    return this.devices;
  }

  private refreshState(): void {
    if (this.closing || !this.started) return;
    const states = this.devices.map((d) => d.currentState);
    const up = states.filter((s) => s === 'connected' || s === 'degraded').length;
    if (up === 0) {
      this.ctx.stats.setState(this.devices.some((d) => d.hasBeenUp) ? 'disconnected' : 'connecting');
    } else if (up === states.length && states.every((s) => s === 'connected')) {
      this.ctx.stats.setState('connected');
    } else {
      this.ctx.stats.setState('degraded');
    }
  }
}
