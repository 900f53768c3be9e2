/**
 * The demo's device switch: the simulated devices of `edge-gateway demo` and whether
 * each is up. Built by console/demo-routes.ts, read by console/web/demo-controls.tsx and
 * `edge-gateway demo device`.
 */

export interface DemoDevice {
  /** The name the switch takes: `press1`. */
  name: string;
  /** "Press 1". */
  label: string;
  /** How it reaches the gateway: "OPC UA server opc.tcp://127.0.0.1:4840/UA/Press1". */
  what: string;
  up: boolean;
  /** When it last went down or came up (epoch ms). */
  since: number;
}

/** GET /console/api/demo: `demo: false` on a gateway that does not run the demo. */
export type DemoDevicesResponse = { demo: false; message: string } | { demo: true; devices: DemoDevice[] };

/** POST /console/api/demo/devices/:name (body {state: "down" | "up"}): the device afterwards. */
export interface DemoSwitchResponse {
  device: DemoDevice;
}
