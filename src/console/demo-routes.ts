import { z } from 'zod';
import { describeError } from '../core/errors.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import type { DemoDevice, DemoDevicesResponse, DemoSwitchResponse } from './api/demo.js';
import { parseBody } from './build-tools.js';

/**
 * What the demo (src/commands/demo.ts) hands the gateway it runs: its simulated devices and the
 * switch that takes one down or brings it back. A gateway started any other way has none.
 */
export interface DemoDevices {
  list(): DemoDevice[];
  /** Throws DemoDeviceUnknown for a name the demo does not run. */
  set(name: string, up: boolean): Promise<DemoDevice>;
}

/** A device name the demo does not run (answered 404 with the names it does). */
export class DemoDeviceUnknown extends Error {}

const NOT_DEMO = 'this gateway does not run the demo (edge-gateway demo, npm start): it has no simulated devices to switch';

/**
 * The demo's device switch, for the console's button and `edge-gateway demo device`:
 *
 *   GET  /console/api/demo                    the devices and whether each is up
 *   POST /console/api/demo/devices/:name      {state: "down" | "up"}: really stops the device's
 *                                             server (or MQTT client), or starts it on its port
 *
 * Registered on every gateway so that one not running the demo refuses with a reason (409), not
 * a bare 404. The switch is a write: the server's guards (token, CSRF) apply as to any write.
 */
export function registerDemoRoutes(http: LocalHttpServer, demo: DemoDevices | null): void {
  http.route('GET', '/console/api/demo', () => {
    const json: DemoDevicesResponse = demo ? { demo: true, devices: demo.list() } : { demo: false, message: NOT_DEMO };
    return { json };
  }, { name: 'console demo devices' });

  const body = z.strictObject({ state: z.enum(['down', 'up']) });
  http.route('POST', '/console/api/demo/devices/:name', async (ctx) => {
    const { state } = parseBody(body, await ctx.json());
    if (!demo) throw new HttpError(409, 'not_demo', NOT_DEMO);
    try {
      const json: DemoSwitchResponse = { device: await demo.set(ctx.params.name, state === 'up') };
      return { json };
    } catch (err) {
      if (err instanceof DemoDeviceUnknown) throw new HttpError(404, 'unknown_device', err.message, 'name');
      throw new HttpError(500, 'switch_failed', `${ctx.params.name} could not be brought ${state}: ${describeError(err)}`);
    }
  }, { name: 'console demo device switch' });
}
