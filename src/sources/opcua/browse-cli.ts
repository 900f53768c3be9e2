import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { EndpointDescription } from 'node-opcua';
import { describeError } from '../../core/errors.js';
import { effectivePolicy, opcuaServerSchema, SECURITY_MODES, SECURITY_POLICIES } from './config.js';

/** Deepest --depth (browse.ts MAX_BROWSE_DEPTH; not imported from there, which loads node-opcua). */
const MAX_BROWSE_DEPTH = 20;

export const BROWSE_USAGE = `Usage: edge-gateway browse --endpoint URL [options]

Prints the address space of an OPC UA server (objects, and variables with their data type, current
value, unit and range) and, with --snippet, a config snippet for the numeric variables. Properties
(EURange, EngineeringUnits, ...) are details of their node, not listed unless --properties.

Options:
  --endpoint URL          opc.tcp:// endpoint of the server (required)
  --root NODE             node id to start from (default i=85, the Objects folder)
  --depth N               levels to descend (default 3)
  --max-nodes N           stop after this many nodes (default 5000)
  --timeout SECONDS       stop browsing after this long (default 60)
  --include-standard      also descend into namespace 0 objects (Server, ...)
  --properties            also list property nodes (EURange, EngineeringUnits, ...)
  --snippet               print an opcua: config snippet for the numeric variables
  --filter REGEX          only variables whose browse path or node id matches go in the snippet
  --name NAME             server name used in the snippet (default plc1)
  --security-mode MODE    None | Sign | SignAndEncrypt (default None)
  --security-policy POL   Basic256Sha256 | Aes128_Sha256_RsaOaep | Aes256_Sha256_RsaPss
  --user NAME             user name (password from --password-env)
  --password-env VAR      environment variable holding the password
  --pki-dir DIR           gateway certificate and trust folder (default ./data/opcua/pki)
  --trust-server          trust the server certificate on first use (written to the trust folder)
  --verbose               print node-opcua's own diagnostics to stderr
  -h, --help              this text

Exit codes: 0 ok, 1 cannot connect or browse, 2 bad arguments.`;

export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: NodeJS.ProcessEnv;
}

const defaultIo: CliIo = {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
  env: process.env,
};

/** `edge-gateway browse`: returns the process exit code. */
export async function runBrowseCli(argv: string[], io: CliIo = defaultIo): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: argv,
      allowPositionals: false,
      options: {
        endpoint: { type: 'string' },
        root: { type: 'string', default: 'i=85' },
        depth: { type: 'string', default: '3' },
        'max-nodes': { type: 'string', default: '5000' },
        timeout: { type: 'string', default: '60' },
        'include-standard': { type: 'boolean', default: false },
        properties: { type: 'boolean', default: false },
        snippet: { type: 'boolean', default: false },
        filter: { type: 'string' },
        name: { type: 'string', default: 'plc1' },
        'security-mode': { type: 'string', default: 'None' },
        'security-policy': { type: 'string' },
        user: { type: 'string' },
        'password-env': { type: 'string' },
        'pki-dir': { type: 'string', default: './data/opcua/pki' },
        'trust-server': { type: 'boolean', default: false },
        verbose: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }).values;
  } catch (err) {
    io.stderr(`browse: ${describeError(err)}\n\n${BROWSE_USAGE}\n`);
    return 2;
  }
  if (values.help) {
    io.stdout(`${BROWSE_USAGE}\n`);
    return 0;
  }
  const problems: string[] = [];
  const endpoint = values.endpoint as string | undefined;
  if (!endpoint) problems.push('--endpoint is required (opc.tcp://host:4840)');
  const depth = Number(values.depth);
  if (!Number.isInteger(depth) || depth < 1 || depth > MAX_BROWSE_DEPTH) problems.push(`--depth: "${values.depth}" is not a whole number from 1 to ${MAX_BROWSE_DEPTH}`);
  const maxNodes = Number(values['max-nodes']);
  if (!Number.isInteger(maxNodes) || maxNodes < 1 || maxNodes > 1_000_000) problems.push(`--max-nodes: "${values['max-nodes']}" is not a whole number from 1 to 1000000`);
  const timeoutS = Number(values.timeout);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0 || timeoutS > 3_600) problems.push(`--timeout: "${values.timeout}" is not a number of seconds from 1 to 3600`);
  const mode = values['security-mode'] as string;
  if (!(SECURITY_MODES as readonly string[]).includes(mode)) problems.push(`--security-mode: "${mode}" is not one of ${SECURITY_MODES.join(', ')}`);
  const policy = values['security-policy'] as string | undefined;
  if (policy !== undefined && !(SECURITY_POLICIES as readonly string[]).includes(policy)) problems.push(`--security-policy: "${policy}" is not one of ${SECURITY_POLICIES.join(', ')}`);
  let filter: RegExp | undefined;
  if (values.filter) {
    try {
      filter = new RegExp(values.filter as string);
    } catch {
      problems.push(`--filter: "${values.filter}" is not a regular expression`);
    }
  }
  let password: string | undefined;
  if (values.user) {
    const envName = values['password-env'] as string | undefined;
    if (!envName) problems.push('--user needs --password-env VAR (the password is never given on the command line)');
    else if (!io.env[envName]) problems.push(`--password-env: environment variable ${envName} is not set`);
    else password = io.env[envName];
  }
  if (problems.length > 0) {
    io.stderr(`browse: ${problems.join('\nbrowse: ')}\n\nRun edge-gateway browse --help for the options.\n`);
    return 2;
  }

  const parsed = opcuaServerSchema.safeParse({
    name: 'browse',
    endpoint,
    security_mode: mode,
    ...(policy ? { security_policy: policy } : {}),
    trust_on_first_use: values['trust-server'],
    user: values.user ? { type: 'username', username: values.user, password } : { type: 'anonymous' },
    nodes: [{ node_id: 'i=2258', variable: 'mvr_browse' }],
  });
  if (!parsed.success) {
    io.stderr(`browse: ${parsed.error.issues.map((i) => `${i.path.join('.') === 'endpoint' ? '--endpoint' : i.path.join('.')}: ${i.message}`).join('\nbrowse: ')}\n`);
    return 2;
  }
  const cfg = parsed.data;
  const pkiDir = resolve(values['pki-dir'] as string);
  mkdirSync(pkiDir, { recursive: true });
  // node-opcua takes seconds to load: it is loaded only once the arguments are good, so --help and
  // usage mistakes answer at once.
  const [{ MessageSecurityMode }, { browseAddressSpace, renderSnippet, renderTree, BrowseRootError }, { createClient, userIdentity }, { installNodeOpcuaLogging }, { classifyConnectError }, { ClockTolerantCertificateManager }, { ensureOwnCertificate }] = await Promise.all([
    import('node-opcua'),
    import('./browse.js'),
    import('./client-options.js'),
    import('./node-opcua-logging.js'),
    import('./errors.js'),
    import('./certificate-validity.js'),
    import('./own-certificate.js'),
  ]);
  installNodeOpcuaLogging();
  // The same certificate handling as the source: a trusted server certificate whose validity starts
  // in the future (server clock ahead) is accepted, and the gateway's own is back-dated.
  const cm = new ClockTolerantCertificateManager({ rootFolder: pkiDir, automaticallyAcceptUnknownCertificate: cfg.trust_on_first_use, name: 'PKI' });
  await cm.initialize();
  await ensureOwnCertificate(cm, cfg.application_name).catch(() => undefined);
  if (values.verbose) {
    const { setWarningLogger, setErrorLogger } = await import('node-opcua');
    setWarningLogger((...a: unknown[]) => io.stderr(`${a.map(String).join(' ')}\n`));
    setErrorLogger((...a: unknown[]) => io.stderr(`${a.map(String).join(' ')}\n`));
  }
  const client = createClient({ ...cfg, reconnect: { initial_delay: 500, max_delay: 1_000 } }, cm);
  // One attempt: a browse is interactive, the operator retries.
  (client as unknown as { connectionStrategy: { maxRetry: number } }).connectionStrategy.maxRetry = 0;
  try {
    await client.connect(cfg.endpoint);
    const endpoints = await client.getEndpoints().catch(() => [] as EndpointDescription[]);
    const session = await client.createSession(userIdentity(cfg, 'browse'));
    try {
      const result = await browseAddressSpace(session, { root: values.root as string, depth, maxNodes, includeStandard: Boolean(values['include-standard']), includeProperties: Boolean(values.properties), timeoutMs: timeoutS * 1000 });
      const out: string[] = [];
      out.push(`Endpoint: ${cfg.endpoint} (connected with ${cfg.security_mode}/${effectivePolicy(cfg)})`);
      if (endpoints.length > 0) out.push(`Offered:  ${[...new Set(endpoints.map((e) => describeEndpoint(e, MessageSecurityMode[e.securityMode])))].join(', ')}`);
      out.push('Namespaces:');
      result.namespaces.forEach((ns, i) => out.push(`  ${i}  ${ns}`));
      out.push('');
      out.push(renderTree(result, `${values.root === 'i=85' ? 'Objects' : values.root}  ${values.root}`));
      if (values.snippet) {
        out.push('');
        out.push(renderSnippet(result, { name: values.name as string, endpoint: cfg.endpoint, securityMode: cfg.security_mode, ...(cfg.security_policy ? { securityPolicy: cfg.security_policy } : {}), ...(values.user ? { user: values.user as string } : {}) }, filter));
      }
      io.stdout(`${out.join('\n')}\n`);
    } finally {
      await session.close().catch(() => undefined);
    }
    return 0;
  } catch (err) {
    if (err instanceof BrowseRootError) {
      io.stderr(`browse: --${err.message}\n`);
      return 2;
    }
    const e = classifyConnectError(err, { path: 'browse', endpoint: cfg.endpoint, securityMode: cfg.security_mode, securityPolicy: effectivePolicy(cfg), pkiDir, ...(values.user ? { user: values.user as string } : {}) });
    const message = e.message.replace(/browse\.trust_on_first_use: true/, '--trust-server').replace(/^browse(\.user)?: /, '');
    io.stderr(`browse: ${message}\n`);
    return 1;
  } finally {
    await client.disconnect().catch(() => undefined);
    await cm.dispose().catch(() => undefined);
  }
}

function describeEndpoint(e: EndpointDescription, mode: string): string {
  const policy = (e.securityPolicyUri ?? '').split('#')[1] ?? 'None';
  return `${mode}/${policy}`;
}

