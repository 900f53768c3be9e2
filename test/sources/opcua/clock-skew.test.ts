import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OPCUACertificateManager } from 'node-opcua';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ClockTolerantCertificateManager } from '../../../src/sources/opcua/certificate-validity.js';
import { classifyConnectError } from '../../../src/sources/opcua/errors.js';
import { ensureOwnCertificate, OWN_CERTIFICATE_BACKDATE_DAYS } from '../../../src/sources/opcua/own-certificate.js';
import { waitFor } from '../../helpers/wait.js';
import { makeSource, tmpPki, type Harness } from './helpers.js';
import { startSkewedSimulator, type SkewedSimulator } from './skewed-simulator.js';

// The OPC UA simulator runs in a child process whose wall clock is shifted (skewed-clock.mjs); this
// process is the gateway, with the right clock. Issue 4: "clock-skew tolerant session creation".

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Samples are at most this old when checked, so "carries the server clock" is ts ≈ now + offset. */
const TOLERANCE = 60_000;

const open: Harness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
});

// One simulator per clock, all started at once: each child needs seconds to load node-opcua, and
// starting them one after the other would make this file slow on a loaded machine.
const sims = {} as Record<'ahead3h' | 'behind3h' | 'ahead2d' | 'behind30d', SkewedSimulator>;
/** Gateway PKI whose certificate the 30-days-behind server trusts already (no first-use leniency). */
const behind30dClientPki = tmpPki('opcua-skew-30d-client-');
let behind30dOwnCertificate = '';
beforeAll(async () => {
  const cm = new OPCUACertificateManager({ rootFolder: behind30dClientPki, name: 'PKI' });
  await cm.initialize();
  behind30dOwnCertificate = await ensureOwnCertificate(cm, 'edge-gateway');
  await cm.dispose();
  const simPki30d = tmpPki('opcua-skew-30d-sim-');
  mkdirSync(join(simPki30d, 'server', 'trusted', 'certs'), { recursive: true });
  copyFileSync(behind30dOwnCertificate, join(simPki30d, 'server', 'trusted', 'certs', 'gateway.pem'));

  const started = await Promise.allSettled([
    startSkewedSimulator(3 * HOUR, { updateIntervalMs: 200, securityModes: ['None', 'SignAndEncrypt'] }),
    startSkewedSimulator(-3 * HOUR, { updateIntervalMs: 200, securityModes: ['None', 'SignAndEncrypt'] }),
    startSkewedSimulator(2 * DAY, { updateIntervalMs: 200, securityModes: ['SignAndEncrypt'] }),
    startSkewedSimulator(-30 * DAY, { pkiDir: simPki30d, trustUnknownClients: false, securityModes: ['None', 'SignAndEncrypt'] }),
  ]);
  const [a, b, c, d] = started.map((r) => (r.status === 'fulfilled' ? r.value : undefined));
  Object.assign(sims, { ahead3h: a, behind3h: b, ahead2d: c, behind30d: d });
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}, 150_000);
afterAll(async () => {
  await Promise.all(Object.values(sims).map((s) => s?.close()));
});

function start(sim: SkewedSimulator, raw: Record<string, unknown>, pkiDir = tmpPki('opcua-skew-client-')): Harness {
  const h = makeSource(
    {
      endpoint: sim.endpointUrl,
      publishing_interval: 100,
      reconnect: { initial_delay: 200, max_delay: 1_000 },
      nodes: [{ node_id: sim.nodeIds.temperature, variable: 'mvr_temperature' }],
      ...raw,
    },
    { pkiDir },
  );
  open.push(h);
  void h.source.start();
  return h;
}

async function flowing(h: Harness, sim: SkewedSimulator, variable = 'mvr_temperature'): Promise<void> {
  await waitFor(() => h.sink.of(variable).length >= 2, { timeoutMs: 30_000, what: `${variable} values` }).catch((e) => {
    throw new Error(`${e.message}\nlast error: ${JSON.stringify(h.source.status().lastError)}\nsimulator:\n${sim.output().slice(-2_000)}`);
  });
}

const warnings = (h: Harness, code: string) => h.log.lines.filter((l) => l.level === 40 && l.code === code);

/** Pre-trusts the simulator's certificate in a fresh client PKI, as an operator would. */
function trustingPki(sim: SkewedSimulator): string {
  const pki = tmpPki('opcua-skew-trusting-');
  mkdirSync(join(pki, 'trusted', 'certs'), { recursive: true });
  copyFileSync(sim.certificateFile, join(pki, 'trusted', 'certs', 'simulator.pem'));
  return pki;
}

function validFrom(pemFile: string): number {
  return Date.parse(new X509Certificate(readFileSync(pemFile)).validFrom);
}

for (const [label, offset, ahead, key] of [
  ['3 h ahead', 3 * HOUR, '3 h 0 min ahead of', 'ahead3h'],
  ['3 h behind', -3 * HOUR, '3 h 0 min behind', 'behind3h'],
] as const) {
  describe(`OPC UA server clock ${label} of the gateway`, () => {
    let sim: SkewedSimulator;
    beforeAll(() => {
      sim = sims[key];
      expect(Math.abs(sim.measuredOffsetMs - offset)).toBeLessThan(5_000);
    });

    it('security None: connects and reads; source/server timestamps carry the server clock, gateway ones ours; one warning names the server and the offset', async () => {
      const h = start(sim, {
        nodes: [
          { node_id: sim.nodeIds.temperature, variable: 'mvr_temperature', timestamp: 'source' },
          { node_id: sim.nodeIds.pressure, variable: 'mvr_pressure', timestamp: 'server' },
          { node_id: sim.nodeIds.speed, variable: 'mvr_speed', timestamp: 'gateway' },
        ],
      });
      await flowing(h, sim, 'mvr_temperature');
      await flowing(h, sim, 'mvr_pressure');
      await flowing(h, sim, 'mvr_speed');
      const now = Date.now();
      for (const v of ['mvr_temperature', 'mvr_pressure']) {
        for (const s of h.sink.of(v)) expect(Math.abs(s.ts - (now + offset)), `${v} at ${new Date(s.ts).toISOString()}`).toBeLessThan(TOLERANCE);
      }
      for (const s of h.sink.of('mvr_speed')) expect(Math.abs(s.ts - now)).toBeLessThan(TOLERANCE);

      const st = h.source.status();
      expect(st.state).toBe('connected');
      expect(Math.abs((st.detail?.server_clock_offset_ms as number) - offset)).toBeLessThan(5_000);
      const w = warnings(h, 'OPCUA_CLOCK_OFFSET');
      expect(w).toHaveLength(1);
      expect(w[0].msg).toContain(`opcua.servers[0]: the clock of the OPC UA server ${sim.endpointUrl} is ${ahead} the gateway clock`);
      expect(w[0].msg).toContain('2 of 3 node(s) use timestamp "source" or "server"');
      expect(w[0].msg).toContain('opcua.servers[0].timestamp: gateway');
      expect(Math.abs((w[0].server_clock_offset_ms as number) - offset)).toBeLessThan(5_000);
    });

    it('SignAndEncrypt with trust on first use: connects, and connects again with the same trust folder (a reconnect after a PLC restart)', async () => {
      const pki = tmpPki('opcua-skew-tofu-');
      const first = start(sim, { security_mode: 'SignAndEncrypt', trust_on_first_use: true }, pki);
      await flowing(first, sim);
      // A server clock ahead means a certificate that starts in the gateway's future: said once.
      expect(warnings(first, 'OPCUA_SERVER_CERT_NOT_YET_VALID')).toHaveLength(offset > 0 ? 1 : 0);
      await first.close();
      // The second connect meets a server certificate that is now in the trust folder (checked for
      // its validity period) and, on the server, a gateway certificate it trusted on first use.
      const second = start(sim, { security_mode: 'SignAndEncrypt', trust_on_first_use: true }, pki);
      await flowing(second, sim);
      expect(second.source.status().lastError).toBeNull();
      expect(warnings(second, 'OPCUA_SERVER_CERT_NOT_YET_VALID')).toHaveLength(offset > 0 ? 1 : 0);
    });

    if (offset > 0) {
      it('SignAndEncrypt with the server certificate pre-trusted although it starts in the gateway\'s future: connects and says why', async () => {
        const certStart = validFrom(sim.certificateFile);
        expect(certStart).toBeGreaterThan(Date.now() + offset - HOUR);
        const h = start(sim, { security_mode: 'SignAndEncrypt' }, trustingPki(sim));
        await flowing(h, sim);
        const w = warnings(h, 'OPCUA_SERVER_CERT_NOT_YET_VALID');
        expect(w).toHaveLength(1);
        expect(w[0].msg).toContain(`the certificate of the OPC UA server ${sim.endpointUrl} is valid only from ${new Date(certStart).toISOString().replace('.000Z', 'Z')} by the gateway clock`);
        expect(w[0].msg).toContain(`the server clock is ${ahead} the gateway's`);
        expect(w[0].msg).toContain('accepted because it is trusted');
      });
    } else {
      it('the gateway certificate starts a week back, so a server whose clock is behind accepts it', async () => {
        const pki = tmpPki('opcua-skew-own-');
        const h = start(sim, { security_mode: 'SignAndEncrypt', trust_on_first_use: true }, pki);
        await flowing(h, sim);
        const start_ = validFrom(join(pki, 'own', 'certs', 'client_certificate.pem'));
        expect(OWN_CERTIFICATE_BACKDATE_DAYS).toBeGreaterThanOrEqual(7);
        expect(Date.now() - start_).toBeGreaterThan(6 * DAY);
        expect(warnings(h, 'OPCUA_SERVER_CERT_NOT_YET_VALID')).toHaveLength(0);
      });
    }
  });
}

describe('OPC UA server clock 2 days ahead', () => {
  it('SignAndEncrypt with a pre-trusted certificate made by that clock: connects; values stamped 2 days ahead are refused as bad_timestamp, gateway-stamped ones flow (issue 21 §5)', async () => {
    const sim = sims.ahead2d;
    const h = start(
      sim,
      {
        security_mode: 'SignAndEncrypt',
        nodes: [
          { node_id: sim.nodeIds.temperature, variable: 'mvr_temperature' },
          { node_id: sim.nodeIds.pressure, variable: 'mvr_pressure', timestamp: 'gateway' },
        ],
      },
      trustingPki(sim),
    );
    await flowing(h, sim, 'mvr_pressure');
    await waitFor(() => (h.source.status().samplesRefused.bad_timestamp ?? 0) >= 2, { timeoutMs: 30_000, what: 'source-stamped values refused as bad_timestamp' });
    expect(h.sink.of('mvr_temperature')).toHaveLength(0);
    for (const s of h.sink.of('mvr_pressure')) expect(Math.abs(s.ts - Date.now())).toBeLessThan(TOLERANCE);
    const refusal = h.log.lines.find((l) => l.reason === 'bad_timestamp');
    expect(refusal?.detail).toMatch(/^SourceTimestamp \S+Z is more than 24 h in the future \(PLC clock wrong\?\)$/);
    const w = warnings(h, 'OPCUA_CLOCK_OFFSET')[0]?.msg;
    expect(w).toContain('is 2 d 0 h ahead of the gateway clock');
    expect(w).toContain('1 of 2 node(s) use timestamp "source" or "server", and a timestamp more than 24 h ahead is refused (bad_timestamp)');
    expect(warnings(h, 'OPCUA_SERVER_CERT_NOT_YET_VALID')).toHaveLength(1);
  });
});

describe('OPC UA server clock 30 days behind (more than the gateway certificate is back-dated)', () => {
  it('the server refuses the gateway certificate; the error says it is the server clock, with the certificate dates', async () => {
    // The server trusts the gateway certificate already, and still checks its validity period by
    // its own clock, 23 days before the certificate starts.
    const sim = sims.behind30d;
    const own = behind30dOwnCertificate;
    const h = start(sim, { security_mode: 'SignAndEncrypt', trust_on_first_use: true }, behind30dClientPki);
    const err = await waitFor(() => h.source.status().lastError, { timeoutMs: 30_000, what: 'a connect error' });
    expect(err.code).toBe('OPCUA_CLIENT_CERT_TIME_INVALID');
    expect(err.message).toContain(`opcua.servers[0]: the OPC UA server ${sim.endpointUrl} refused the gateway certificate as not valid at the server's time (BadCertificateTimeInvalid)`);
    expect(err.message).toContain(`The gateway certificate "${own}" is valid from ${new Date(validFrom(own)).toISOString().replace('.000Z', 'Z')} until`);
    expect(err.message).toContain("so the server's clock is outside that range: set the server's clock (by NTP)");
    expect(h.sink.samples).toHaveLength(0);
  });
});

describe('server certificate validity periods (no server)', () => {
  it('a trusted certificate that has not started is accepted and reported; an expired one is refused with its dates', async () => {
    const pki = tmpPki('opcua-skew-cm-');
    const cm = new ClockTolerantCertificateManager({ rootFolder: pki, name: 'PKI' });
    await cm.initialize();
    const make = async (name: string, startDate: Date, validity: number) => {
      const file = join(pki, `${name}.pem`);
      await cm.createSelfSignedCertificate({ applicationUri: `urn:test:${name}`, subject: `/CN=${name}`, dns: [], startDate, validity, outputFile: file });
      const der = new X509Certificate(readFileSync(file)).raw;
      await cm.trustCertificate(der);
      return der;
    };
    try {
      const future = await make('future', new Date(Date.now() + 3 * HOUR), 365);
      const expired = await make('expired', new Date(Date.now() - 10 * DAY), 2);
      expect(String(await cm.verifyCertificate(future))).toBe('Good');
      expect(cm.takeAcceptedEarly()?.subject).toContain('CN=future');
      expect(cm.takeAcceptedEarly()).toBeNull();

      expect(String(await cm.verifyCertificate(expired))).toBe('BadCertificateTimeInvalid');
      const e = classifyConnectError(new Error('server Certificate verification failed with err BadCertificateTimeInvalid (0x80140000)'), {
        path: 'opcua.servers[2]',
        endpoint: 'opc.tcp://plc:4840',
        securityMode: 'SignAndEncrypt',
        securityPolicy: 'Basic256Sha256',
        pkiDir: pki,
        serverCertificateTimeInvalid: cm.lastTimeInvalid(),
      });
      expect(e.code).toBe('OPCUA_SERVER_CERT_TIME_INVALID');
      expect(e.message).toMatch(/^opcua\.servers\[2\]: the OPC UA server opc\.tcp:\/\/plc:4840 is refused because its certificate is outside its validity period by the gateway clock \(valid from \S+Z until \S+Z; gateway clock now \S+Z\) \(BadCertificateTimeInvalid\)\. Renew the server certificate/);
    } finally {
      await cm.dispose();
    }
  });
});
