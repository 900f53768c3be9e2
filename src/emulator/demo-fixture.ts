/**
 * The emulator's built-in demo fixture: one organisation with two sites, the machines of the
 * simulated plant (src/sim/) and their machine variables. `config/demo.yaml` and the simulators
 * use these ids, so `npm start` works with no outside services.
 *
 * Credentials here are the emulator's own lab credentials, not secrets of any real service.
 */
export const DEMO_ORGANISATION_ID = 'org_demo';
export const DEMO_CLIENT_ID = 'demo-gateway';
export const DEMO_CLIENT_SECRET = 'demo-secret';
export const DEMO_API_KEY = 'demo-api-key';
export const DEMO_SITE_ID = 'ste_demo1';
export const DEMO_SITE_EXTERNAL_ID = 'plant-demo';

const variablesOf = (machine: string, names: Array<[string, string]>) =>
  names.map(([name, unit]) => ({ id: `mvr_${machine}_${name}`, name, machine: `mch_${machine}`, unit }));

export const DEMO_FIXTURE = {
  clients: [{ client_id: DEMO_CLIENT_ID, client_secret: DEMO_CLIENT_SECRET, organisations: [DEMO_ORGANISATION_ID] }],
  api_keys: [{ key: DEMO_API_KEY, organisation: DEMO_ORGANISATION_ID, sites: [DEMO_SITE_ID, 'ste_demo2'] }],
  organisations: [
    { id: DEMO_ORGANISATION_ID, name: 'Demo Manufacturing' },
    { id: 'org_other', name: 'Another Organisation' },
  ],
  sites: [
    { id: DEMO_SITE_ID, external_id: DEMO_SITE_EXTERNAL_ID, organisation: DEMO_ORGANISATION_ID },
    { id: 'ste_demo2', external_id: 'plant-demo-2', organisation: DEMO_ORGANISATION_ID },
    { id: 'ste_other', external_id: 'other-plant', organisation: 'org_other' },
  ],
  machines: [
    { id: 'mch_press1', name: 'Press 1 (OPC UA)', site: DEMO_SITE_ID },
    { id: 'mch_mixer1', name: 'Mixer 1 (Modbus)', site: DEMO_SITE_ID },
    { id: 'mch_packer1', name: 'Packer 1 (MQTT JSON)', site: DEMO_SITE_ID },
    { id: 'mch_oven1', name: 'Oven 1 (Sparkplug B)', site: DEMO_SITE_ID },
    { id: 'mch_gen1', name: 'Synthetic generator', site: DEMO_SITE_ID },
    { id: 'mch_lathe1', name: 'Lathe 1 (second site)', site: 'ste_demo2' },
    { id: 'mch_other1', name: 'Machine of another organisation', site: 'ste_other' },
  ],
  machine_variables: [
    ...variablesOf('press1', [['temperature', '°C'], ['pressure', 'bar'], ['speed', 'rpm'], ['state', 'state'], ['count', 'parts']]),
    ...variablesOf('mixer1', [['temperature', '°C'], ['speed', 'rpm'], ['power', 'kW'], ['running', 'bool'], ['energy', 'kWh'], ['level', '%']]),
    ...variablesOf('packer1', [['rate', 'parts/min'], ['state', 'state'], ['rejects', 'parts'], ['temperature', '°C']]),
    ...variablesOf('oven1', [['temperature', '°C'], ['setpoint', '°C'], ['state', 'state'], ['gas_flow', 'm³/h']]),
    ...Array.from({ length: 20 }, (_, i) => ({ id: `mvr_gen_${i + 1}`, name: `generated ${i + 1}`, machine: 'mch_gen1', unit: '' })),
    ...variablesOf('lathe1', [['speed', 'rpm']]),
    { id: 'mvr_other1_speed', name: 'speed', machine: 'mch_other1', unit: 'rpm' },
  ],
};
