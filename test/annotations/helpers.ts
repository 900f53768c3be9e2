import { request } from 'undici';
import { startEmulator, type EmulatorHandle } from '../../src/emulator/index.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

export { waitFor, delay } from '../helpers/wait.js';

/** The annotations section most tests use: the demo site and two machines of the demo fixture. */
export const ANNOTATIONS = {
  site: { external_id: 'plant-demo' },
  machines: [
    { key: 'press1', name: 'Press 1', machine_variables: ['mvr_press1_state', 'mvr_press1_speed'] },
    { key: 'mixer1', name: 'Mixer 1', machine_variables: ['mvr_mixer1_running'], reasons: ['Cleaning', 'No material'] },
  ],
  reasons: ['Material shortage', 'Tool change', 'Breakdown'],
};

export interface Harness {
  emu: EmulatorHandle;
  gw: TestGateway;
  url: string;
  close(): Promise<void>;
}

/** Emulator + gateway with the local HTTP server on a free port and `annotations` merged over ANNOTATIONS. */
export async function startHarness(
  options: { annotations?: Record<string, unknown>; sections?: Record<string, unknown>; emu?: EmulatorHandle; dir?: string } = {},
): Promise<Harness> {
  const emu = options.emu ?? (await startEmulator({ port: 0 }));
  const gw = await startTestGateway(
    emu,
    {
      http: { enabled: true, port: 0 },
      annotations: { ...ANNOTATIONS, ...(options.annotations ?? {}) },
      ...(options.sections ?? {}),
    },
    { dir: options.dir },
  );
  return {
    emu,
    gw,
    url: gw.handle.httpUrl!,
    close: async () => {
      await gw.destroy();
      if (!options.emu) await emu.close();
    },
  };
}

export interface Answer {
  status: number;
  body: any;
}

/** One request to the gateway's local API. */
export async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const h: Record<string, string> = { ...headers };
  let payload: string | undefined;
  if (body !== undefined) {
    h['content-type'] ??= 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await request(`${base}${path}`, { method: method as 'GET', headers: h, body: payload });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON (the HMI page)
  }
  return { status: res.statusCode, body: parsed };
}

/** Annotations the emulator stored with this external id. */
export function stored(emu: EmulatorHandle, externalId: string) {
  return emu.annotations().filter((a) => a.external_id === externalId);
}
