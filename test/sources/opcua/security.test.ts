import { copyFileSync, existsSync, mkdirSync, readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { OPCUACertificateManager } from 'node-opcua';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startOpcuaSimulator, type OpcuaSimulator } from '../../../src/sim/opcua-server.js';
import { waitFor } from '../../helpers/wait.js';
import { makeSource, tmpPki, type Harness } from './helpers.js';

const PASSWORD = 'pa55-w0rd-for-tests';
let sim: OpcuaSimulator;
// One client PKI for the file (its certificate is generated once, by the first test).
const clientPki = tmpPki('opcua-sec-client-');
const open: Harness[] = [];

beforeAll(async () => {
  sim = await startOpcuaSimulator({
    pkiDir: tmpPki('opcua-sec-sim-'),
    securityModes: ['Sign', 'SignAndEncrypt'],
    users: [{ username: 'gateway', password: PASSWORD }],
    allowAnonymous: false,
    updateIntervalMs: 200,
  });
  // The shared client PKI trusts the simulator up front, as an operator would have done once.
  mkdirSync(join(clientPki, 'trusted', 'certs'), { recursive: true });
  copyFileSync(sim.certificateFile, join(clientPki, 'trusted', 'certs', 'press1-simulator.pem'));
});
afterAll(async () => {
  await sim?.close();
});
afterEach(async () => {
  for (const h of open.splice(0)) await h.close();
});

function start(raw: Record<string, unknown>, pkiDir = clientPki): Harness {
  const h = makeSource(
    {
      endpoint: sim.endpointUrl,
      publishing_interval: 100,
      reconnect: { initial_delay: 200, max_delay: 1_000 },
      nodes: [{ node_id: sim.nodeIds.temperature, variable: 'mvr_press1_temperature' }],
      ...raw,
    },
    { pkiDir },
  );
  open.push(h);
  void h.source.start();
  return h;
}

const userPass = { type: 'username', username: 'gateway', password: PASSWORD };

describe('OPC UA security', () => {
  it('refuses an unknown server certificate, names the file to move, and connects once it is trusted', async () => {
    const pki = tmpPki('opcua-sec-fresh-');
    const h = start({ security_mode: 'SignAndEncrypt', security_policy: 'Basic256Sha256', user: userPass }, pki);
    const err = await waitFor(() => h.source.status().lastError, { what: 'a connect error' });
    expect(err.code).toBe('OPCUA_SERVER_CERT_UNTRUSTED');
    const rejectedDir = join(pki, 'rejected');
    const files = readdirSync(rejectedDir).filter((f) => f.endsWith('.pem'));
    expect(files).toHaveLength(1);
    const rejected = join(rejectedDir, files[0]);
    const trusted = join(pki, 'trusted', 'certs');
    expect(err.message).toContain(`move "${rejected}" to "${trusted}/"`);
    expect(err.message).toContain('opcua.servers[0].trust_on_first_use: true');
    expect(h.sink.samples).toHaveLength(0);
    // The application instance certificate was generated in the data directory on first start.
    expect(existsSync(join(pki, 'own', 'certs', 'client_certificate.pem'))).toBe(true);

    // The operator moves the file; the running source picks it up at its next retry.
    mkdirSync(trusted, { recursive: true });
    renameSync(rejected, join(trusted, files[0]));
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2, { timeoutMs: 30_000, what: 'data after trusting the server' });
    expect(h.source.status().state).toBe('connected');
  });

  it('connects once trusted even when the trust folders are never re-read by a file watcher', async () => {
    // node-opcua-pki indexes trusted/ and rejected/ in memory and learns of changes from file
    // watchers. Polling every 10 minutes stands for a watcher that has not reported the new
    // rejected file yet (a busy machine, or an operator quicker than the watcher): the source
    // must read the folders afresh after a refusal, or the certificate stays "rejected" forever.
    const saved = { poll: process.env.OPCUA_PKI_USE_POLLING, interval: process.env.OPCUA_PKI_POLLING_INTERVAL };
    process.env.OPCUA_PKI_USE_POLLING = 'true';
    process.env.OPCUA_PKI_POLLING_INTERVAL = '600000';
    try {
      const pki = tmpPki('opcua-sec-nowatch-');
      const h = start({ security_mode: 'SignAndEncrypt', security_policy: 'Basic256Sha256', user: userPass }, pki);
      const err = await waitFor(() => h.source.status().lastError, { what: 'a connect error' });
      expect(err.code).toBe('OPCUA_SERVER_CERT_UNTRUSTED');
      const files = readdirSync(join(pki, 'rejected')).filter((f) => f.endsWith('.pem'));
      expect(files).toHaveLength(1);
      mkdirSync(join(pki, 'trusted', 'certs'), { recursive: true });
      renameSync(join(pki, 'rejected', files[0]), join(pki, 'trusted', 'certs', files[0]));
      await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2, { timeoutMs: 30_000, what: 'data after trusting the server' });
      expect(h.source.status().state).toBe('connected');
    } finally {
      for (const [k, v] of [['OPCUA_PKI_USE_POLLING', saved.poll], ['OPCUA_PKI_POLLING_INTERVAL', saved.interval]] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  for (const policy of ['Basic256Sha256', 'Aes128_Sha256_RsaOaep', 'Aes256_Sha256_RsaPss'] as const) {
    it(`reads with SignAndEncrypt / ${policy} and username authentication`, async () => {
      const h = start({ security_mode: 'SignAndEncrypt', security_policy: policy, user: userPass });
      await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2, { what: `data over ${policy}` });
      expect(h.source.status().detail?.security).toBe(`SignAndEncrypt/${policy}`);
    });
  }

  it('reads with Sign only (default policy Basic256Sha256)', async () => {
    const h = start({ security_mode: 'Sign', user: userPass });
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2, { what: 'data over Sign' });
    expect(h.source.status().detail?.security).toBe('Sign/Basic256Sha256');
  });

  it('gives a clear error for a wrong password and never shows the password', async () => {
    const h = start({ security_mode: 'SignAndEncrypt', user: { type: 'username', username: 'gateway', password: 'not-the-password' } });
    const err = await waitFor(() => h.source.status().lastError, { what: 'auth error' });
    expect(err.code).toBe('OPCUA_AUTH_FAILED');
    expect(err.message).toMatch(/^opcua\.servers\[0\]\.user: the OPC UA server opc\.tcp:\/\/127\.0\.0\.1:\d+\/UA\/Press1 refused the user "gateway" \(BadUserAccessDenied\): check the user name and its password/);
    expect(h.source.status().state).not.toBe('connected');
    expect(h.sink.samples).toHaveLength(0);
    const everything = JSON.stringify(h.source.status()) + h.log.text();
    expect(everything).not.toContain('not-the-password');
    expect(everything).toContain('refused the user \\"gateway\\"'); // JSON-escaped
  });

  it('says that the server does not accept anonymous sessions when no user is configured', async () => {
    const h = start({ security_mode: 'SignAndEncrypt' });
    const err = await waitFor(() => h.source.status().lastError, { what: 'the anonymous refusal' });
    expect(err.code).toBe('OPCUA_AUTH_FAILED');
    expect(err.message).toMatch(/^opcua\.servers\[0\]\.user: the OPC UA server opc\.tcp:\/\/127\.0\.0\.1:\d+\/UA\/Press1 does not accept anonymous sessions \(its endpoint offers no anonymous user token policy\): give a user name and password, or a user certificate\. Retrying in /);
  });

  it('authenticates with an X.509 user certificate', async () => {
    const userPki = tmpPki('opcua-sec-user-');
    const cm = new OPCUACertificateManager({ rootFolder: userPki });
    await cm.initialize();
    const certificateFile = join(userPki, 'user.pem');
    await cm.createSelfSignedCertificate({ applicationUri: 'urn:edge-gateway:test-user', subject: '/CN=gateway-user', dns: [], startDate: new Date(), validity: 30, outputFile: certificateFile });
    await cm.dispose();
    const h = start({
      security_mode: 'SignAndEncrypt',
      user: { type: 'certificate', certificate_file: certificateFile, private_key_file: join(userPki, 'own', 'private', 'private_key.pem') },
    });
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2, { what: 'data with a user certificate' }).catch((e) => {
      throw new Error(`${e.message}: ${JSON.stringify(h.source.status().lastError)}`);
    });
  });

  it('trusts the server on first use when opted in', async () => {
    const pki = tmpPki('opcua-sec-tofu-');
    const h = start({ security_mode: 'SignAndEncrypt', trust_on_first_use: true, user: userPass }, pki);
    await waitFor(() => h.sink.of('mvr_press1_temperature').length >= 2, { what: 'data with trust on first use' });
    expect(readdirSync(join(pki, 'trusted', 'certs')).length).toBe(1);
  });

  it('says so when the server refuses the gateway certificate', async () => {
    const strict = await startOpcuaSimulator({ pkiDir: tmpPki('opcua-sec-strict-'), trustUnknownClients: false, securityModes: ['SignAndEncrypt'] });
    try {
      const h = makeSource(
        { endpoint: strict.endpointUrl, security_mode: 'SignAndEncrypt', trust_on_first_use: true, reconnect: { initial_delay: 200, max_delay: 1_000 }, nodes: [{ node_id: strict.nodeIds.temperature, variable: 'mvr_t' }] },
        { pkiDir: clientPki },
      );
      open.push(h);
      void h.source.start();
      const err = await waitFor(() => h.source.status().lastError, { what: 'client certificate refused' });
      expect(err.code).toBe('OPCUA_CLIENT_CERT_REJECTED');
      expect(err.message).toContain(join(clientPki, 'own', 'certs', 'client_certificate.pem'));
      await h.close();
    } finally {
      await strict.close();
    }
  });
});
