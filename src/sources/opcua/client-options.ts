import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { MessageSecurityMode, OPCUAClient, SecurityPolicy, UserTokenType, type OPCUACertificateManager, type OPCUAClientOptions, type UserIdentityInfo } from 'node-opcua';
import { GatewayError } from '../../core/errors.js';
import { effectivePolicy, type OpcuaServerConfig } from './config.js';
import { OpcuaErrorCodes } from './errors.js';

/**
 * node-opcua client options for one configured server.
 *
 * Reconnection: `connectionStrategy.maxRetry: 1` keeps the first connect short (the source's own
 * loop retries with capped backoff and reports each failure); once connected, node-opcua repairs a
 * broken connection itself with infinite retries between `initialDelay` and `maxDelay`
 * (client_base_impl `_recreate_secure_channel`), re-activating the session or creating a new one
 * and transferring or re-creating the subscriptions (reconnection.js, Part 4 §5.13.7). The source's
 * watchdog rebuilds everything when that repair takes longer than the watchdog allows.
 *
 * Clock skew (test/sources/opcua/clock-skew.test.ts runs the server under a clock ±3 h and +2 d
 * off): nothing in session creation compares the two clocks. Session, subscription and secure
 * channel token lifetimes are durations (Part 4 §5.6.2, §5.13.2); the client re-bases a token's
 * createdAt on its own clock and only warns (NODE-OPCUA-W33, node-opcua-secure-channel
 * client_secure_channel_layer.js `_open_secure_channel_request`, maxClockSkew 5 min); the server
 * ignores the request header timestamp (node-opcua-server server_publish_engine.js
 * `timeout_filter`). node-opcua's `ClockAdjustment` is unrelated: it re-anchors its hrtime-based
 * clock on the local wall clock every few seconds (node-opcua-date-time `getCurrentClock`).
 * Where clocks do matter is certificate validity periods, handled by certificate-validity.ts
 * (server clock ahead) and own-certificate.ts (server clock behind); the source measures and
 * reports the offset (clock-offset.ts). Sample timestamps follow the configured `timestamp`.
 *
 * Message size: `max_message_size` goes into the Hello (transportSettings, see transportLimits).
 */
export function clientOptions(cfg: OpcuaServerConfig, certificateManager: OPCUACertificateManager): OPCUAClientOptions {
  return {
    applicationName: cfg.application_name,
    clientName: `edge-gateway:${cfg.name}`,
    clientCertificateManager: certificateManager,
    securityMode: MessageSecurityMode[cfg.security_mode],
    securityPolicy: SecurityPolicy[effectivePolicy(cfg)],
    endpointMustExist: false,
    keepSessionAlive: false,
    requestedSessionTimeout: cfg.session_timeout,
    defaultTransactionTimeout: cfg.request_timeout,
    transportTimeout: cfg.request_timeout,
    connectionStrategy: { maxRetry: 1, initialDelay: cfg.reconnect.initial_delay, maxDelay: cfg.reconnect.max_delay, randomisationFactor: 0.2 },
    transportSettings: transportLimits(cfg.max_message_size),
  };
}

/** The smallest chunk (buffer) size a peer may use, OPC UA Part 6 §7.1.2.3. */
const MIN_CHUNK_BYTES = 8_192;

/**
 * What the gateway announces in its Hello (OPC UA Part 6 §7.1.2.3): MaxMessageSize is "the maximum
 * size for any response message"; the server shall answer a larger one with an error instead
 * (node-opcua: a ServiceFault BadTcpMessageTooLarge, the session stays usable). MaxChunkCount
 * follows from it: chunks are at least 8,192 bytes. node-opcua's client announces 0 (no limit) by
 * default, which let one HistoryRead answer of 1,000,000 values take about 500 MB and block the
 * event loop for seconds.
 */
export function transportLimits(maxMessageSize: number): { maxMessageSize: number; maxChunkCount: number } {
  return { maxMessageSize, maxChunkCount: Math.ceil(maxMessageSize / MIN_CHUNK_BYTES) + 1 };
}

export function createClient(cfg: OpcuaServerConfig, certificateManager: OPCUACertificateManager): OPCUAClient {
  return OPCUAClient.create(clientOptions(cfg, certificateManager));
}

/** The session's user identity (Part 4 §7.41). Files are read at each connect so a renewed user certificate is picked up. */
export function userIdentity(cfg: OpcuaServerConfig, path: string): UserIdentityInfo {
  const user = cfg.user;
  switch (user.type) {
    case 'anonymous':
      return { type: UserTokenType.Anonymous };
    case 'username':
      return { type: UserTokenType.UserName, userName: user.username, password: user.password.reveal() };
    case 'certificate': {
      let certificateData: Buffer;
      let key: ReturnType<typeof createPrivateKey>;
      try {
        certificateData = toDer(readFileSync(user.certificate_file));
      } catch (err) {
        throw new GatewayError(OpcuaErrorCodes.userCertUnreadable, `${path}.user.certificate_file: "${user.certificate_file}" cannot be read as a certificate (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
      }
      try {
        key = createPrivateKey(readFileSync(user.private_key_file));
      } catch (err) {
        throw new GatewayError(OpcuaErrorCodes.userCertUnreadable, `${path}.user.private_key_file: "${user.private_key_file}" cannot be read as a private key (${(err as NodeJS.ErrnoException).code ?? 'not a PEM private key'})`, { cause: err });
      }
      // PEM text: the form node-opcua 2.x takes for a user key (UserIdentityInfoX509.privateKey).
      const privateKey = key.export({ type: 'pkcs8', format: 'pem' }).toString();
      return { type: UserTokenType.Certificate, certificateData, privateKey };
    }
  }
}

/** PEM (one or more certificates) or DER → DER of the first certificate. */
export function toDer(content: Buffer): Buffer {
  const text = content.toString('latin1');
  const m = /-----BEGIN CERTIFICATE-----([\s\S]+?)-----END CERTIFICATE-----/.exec(text);
  if (m) return Buffer.from(m[1].replace(/\s+/g, ''), 'base64');
  if (content[0] === 0x30) return content;
  throw new Error('neither PEM nor DER');
}
