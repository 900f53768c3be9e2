import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describeError, GatewayError } from '../../core/errors.js';
import { certificateFileValidity, type CertificateValidity } from './certificate-validity.js';
import { describeOffset, isoSeconds } from './clock-offset.js';

/**
 * Stable error codes of the OPC UA source, and the translation of node-opcua's error texts into
 * sentences an operator can act on (what happened, which setting or file, what to do).
 */
export const OpcuaErrorCodes = {
  /** TCP connect refused / timed out / host unknown. */
  unreachable: 'OPCUA_UNREACHABLE',
  /** The server's certificate is not in the trust folder. */
  serverCertUntrusted: 'OPCUA_SERVER_CERT_UNTRUSTED',
  /** The server refused the gateway's certificate. */
  clientCertRejected: 'OPCUA_CLIENT_CERT_REJECTED',
  /** The server refused the gateway's certificate as outside its validity period by the server's clock. */
  clientCertTimeInvalid: 'OPCUA_CLIENT_CERT_TIME_INVALID',
  /** The server's certificate (or its issuer's) has expired by the gateway's clock. */
  serverCertTimeInvalid: 'OPCUA_SERVER_CERT_TIME_INVALID',
  /** Wrong user name/password, or user certificate refused. */
  authFailed: 'OPCUA_AUTH_FAILED',
  /** The server offers no endpoint with the configured security mode and policy. */
  endpointNotFound: 'OPCUA_ENDPOINT_NOT_FOUND',
  /** The user certificate or key file cannot be read. */
  userCertUnreadable: 'OPCUA_USER_CERT_UNREADABLE',
  /** The server has no free session slot (BadTooManySessions, Part 4 §5.6.2). */
  tooManySessions: 'OPCUA_TOO_MANY_SESSIONS',
  /** Session or subscription creation failed for another reason. */
  sessionFailed: 'OPCUA_SESSION_FAILED',
  /** The connection broke and node-opcua gave up repairing it. */
  connectionLost: 'OPCUA_CONNECTION_LOST',
  /** Neither data nor keep-alives arrived in time; the connection was rebuilt. */
  watchdog: 'OPCUA_WATCHDOG',
  /** The event subscription (events:) could not be created: unknown notifier or event type. */
  eventsUnavailable: 'OPCUA_EVENTS_UNAVAILABLE',
  /** The namespace array changed after a reconnect (nsu= ids would point elsewhere). */
  namespaceChanged: 'OPCUA_NAMESPACE_CHANGED',
  /** A read in polling mode failed. */
  readFailed: 'OPCUA_READ_FAILED',
  /** A configured node cannot be monitored (unknown id, not numeric, array ...). */
  invalidNode: 'OPCUA_INVALID_NODE',
} as const;

export interface ErrorContext {
  /** Config path of the server, e.g. `opcua.servers[0]`. */
  path: string;
  endpoint: string;
  securityMode: string;
  securityPolicy: string;
  pkiDir: string;
  /** Seconds until the next retry, for the "what happens now" part of the message. */
  retryHint?: string;
  /** Dates of the server certificate the gateway last refused for its validity period. */
  serverCertificateTimeInvalid?: CertificateValidity | null;
  /** Server clock minus gateway clock measured at the last successful connect, ms. */
  clockOffsetMs?: number | null;
  /** The session timeout the gateway requests (opcua.servers[].session_timeout), ms. */
  sessionTimeoutMs?: number;
  /** User name of a username identity: named when the server refuses it (the password never is). */
  user?: string;
}

const AUTH = /BadUserAccessDenied|BadIdentityTokenRejected|BadIdentityTokenInvalid|BadUserSignatureInvalid/;
const UNREACHABLE = /ECONNREFUSED|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|EAI_AGAIN|ECONNRESET|ECONNABORTED|connection cannot be established|socket has been disconnected|Connection has been aborted|premature socket termination/i;

/** Translates an error from connect/createSession into a GatewayError with a stable code. */
export function classifyConnectError(err: unknown, c: ErrorContext): GatewayError {
  const text = describeError(err);
  const retry = c.retryHint ? ` ${c.retryHint}` : '';
  // Validity-period errors come first: both directions also match the generic patterns below,
  // and "not trusted" or "trust the gateway certificate" would send the operator the wrong way.
  const timeInvalid = /Bad(?:CertificateIssuer|Certificate)TimeInvalid/.exec(text)?.[0];
  if (timeInvalid && /server Certificate verification failed/i.test(text)) {
    const v = c.serverCertificateTimeInvalid;
    const dates = v ? ` (valid from ${iso(v.validFrom)} until ${iso(v.validTo)}; gateway clock now ${iso(new Date())})` : '';
    const what = timeInvalid === 'BadCertificateIssuerTimeInvalid' ? 'the certificate of its issuer (CA) is' : 'its certificate is';
    return new GatewayError(
      OpcuaErrorCodes.serverCertTimeInvalid,
      `${c.path}: the OPC UA server ${c.endpoint} is refused because ${what} outside its validity period by the gateway clock${dates} (${timeInvalid}). Renew the server certificate and trust the new one; if its dates look right, check the gateway's clock.${retry}`,
      { cause: err, details: v ? { valid_from: v.validFrom.toISOString(), valid_to: v.validTo.toISOString() } : {} },
    );
  }
  if (timeInvalid) {
    const own = join(c.pkiDir, 'own', 'certs', 'client_certificate.pem');
    const v = certificateFileValidity(own);
    const now = Date.now();
    const measured = typeof c.clockOffsetMs === 'number' ? ` (at the last connect its clock was ${describeOffset(c.clockOffsetMs)} the gateway's)` : '';
    const advice = !v
      ? `Check the server's clock (set it by NTP).`
      : v.validTo.getTime() <= now
        ? `The gateway certificate "${own}" expired on ${iso(v.validTo)}: delete it (the gateway makes a new one at its next start) and trust the new one on the server.`
        : `The gateway certificate "${own}" is valid from ${iso(v.validFrom)} until ${iso(v.validTo)}, so the server's clock is outside that range${measured}: set the server's clock (by NTP).`;
    return new GatewayError(
      OpcuaErrorCodes.clientCertTimeInvalid,
      `${c.path}: the OPC UA server ${c.endpoint} refused the gateway certificate as not valid at the server's time (${timeInvalid}). ${advice}${retry}`,
      { cause: err, details: v ? { certificate_file: own, valid_from: v.validFrom.toISOString(), valid_to: v.validTo.toISOString() } : { certificate_file: own } },
    );
  }
  if (/BadCertificateUntrusted|server Certificate verification failed/i.test(text)) {
    const rejected = newestRejectedCertificate(join(c.pkiDir, 'rejected'));
    const trusted = join(c.pkiDir, 'trusted', 'certs');
    const move = rejected ? `move "${rejected}" to "${trusted}/"` : `copy the server certificate into "${trusted}/"`;
    return new GatewayError(
      OpcuaErrorCodes.serverCertUntrusted,
      `${c.path}: the certificate of the OPC UA server ${c.endpoint} is not trusted. To trust it, ${move}, or set ${c.path}.trust_on_first_use: true.${retry}`,
      { cause: err, details: { rejected_file: rejected ?? null, trusted_folder: trusted } },
    );
  }
  if (/BadSecurityChecksFailed|BadCertificate(?!Untrusted)|BadSecurityPolicyRejected|BadNoValidCertificates/.test(text)) {
    const own = join(c.pkiDir, 'own', 'certs', 'client_certificate.pem');
    return new GatewayError(
      OpcuaErrorCodes.clientCertRejected,
      `${c.path}: the OPC UA server ${c.endpoint} refused the gateway certificate (${statusName(text) ?? 'security checks failed'}). Trust "${own}" on the server (most servers list it under their rejected certificates: move it to trusted).${retry}`,
      { cause: err },
    );
  }
  if (AUTH.test(text)) {
    const status = statusName(text) ?? 'access denied';
    const message =
      c.user !== undefined
        ? `${c.path}.user: the OPC UA server ${c.endpoint} refused the user "${c.user}" (${status}): check the user name and its password, and that the user may log in.${retry}`
        : `${c.path}.user: the OPC UA server ${c.endpoint} refused the user identity (${status}): check the user name and password (or user certificate) and that the user may log in.${retry}`;
    return new GatewayError(OpcuaErrorCodes.authFailed, message, { cause: err, ...(c.user !== undefined ? { details: { user: c.user } } : {}) });
  }
  // node-opcua refuses before asking the server when the endpoint lists no user token policy of
  // the identity's kind (Part 4 §7.41 UserTokenPolicy): "Cannot find ANONYMOUS user token policy".
  const noPolicy = /Cannot find (\w+) user token policy/i.exec(text)?.[1]?.toUpperCase();
  if (noPolicy) {
    const advice =
      noPolicy === 'ANONYMOUS'
        ? 'does not accept anonymous sessions (its endpoint offers no anonymous user token policy): give a user name and password, or a user certificate'
        : `offers no ${noPolicy.toLowerCase()} user token policy on this endpoint (security_mode ${c.securityMode}, security_policy ${c.securityPolicy}): use an identity it accepts, or another endpoint`;
    return new GatewayError(OpcuaErrorCodes.authFailed, `${c.path}.user: the OPC UA server ${c.endpoint} ${advice}.${retry}`, { cause: err });
  }
  if (/BadTooManySessions/.test(text)) {
    // A gateway killed without closing its session leaves it on the server until the
    // session times out (Part 4 §5.6.2 CreateSession: revisedSessionTimeout); PLCs with few slots
    // then refuse the restarted gateway. The connect loop retries with backoff until a slot frees.
    const timeout = c.sessionTimeoutMs ? ` (this gateway requests ${Math.round(c.sessionTimeoutMs / 1000)} s, ${c.path}.session_timeout; other clients may hold theirs longer)` : '';
    return new GatewayError(
      OpcuaErrorCodes.tooManySessions,
      `${c.path}: the OPC UA server ${c.endpoint} has no free session slot (BadTooManySessions). Sessions of clients that went away without closing them, such as an earlier run of this gateway that was killed, stay until their session timeout${timeout}; the gateway keeps retrying with backoff until a slot is free. Raise the server's session limit if this persists.${retry}`,
      { cause: err },
    );
  }
  if (/cannot find endpoint|No endpoint found|BadSecurityModeRejected/i.test(text)) {
    return new GatewayError(
      OpcuaErrorCodes.endpointNotFound,
      `${c.path}: the OPC UA server ${c.endpoint} offers no endpoint with security_mode ${c.securityMode} and security_policy ${c.securityPolicy}; run "edge-gateway browse --endpoint ${c.endpoint}" to list what it offers.${retry}`,
      { cause: err },
    );
  }
  if (UNREACHABLE.test(text)) {
    return new GatewayError(OpcuaErrorCodes.unreachable, `${c.path}: cannot reach the OPC UA server ${c.endpoint} (${firstLine(text)}).${retry}`, { cause: err });
  }
  return new GatewayError(OpcuaErrorCodes.sessionFailed, `${c.path}: connecting to the OPC UA server ${c.endpoint} failed: ${firstLine(text)}.${retry}`, { cause: err });
}

function iso(d: Date): string {
  return isoSeconds(d.getTime());
}

function statusName(text: string): string | undefined {
  return /\b(Bad[A-Za-z]+)/.exec(text)?.[1];
}

function firstLine(text: string): string {
  const line = text.split('\n').map((l) => l.trim()).filter(Boolean).join(' ');
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
}

/** node-opcua writes an unknown server certificate to `<pki>/rejected/<name>[<thumbprint>].pem`. */
export function newestRejectedCertificate(dir: string): string | undefined {
  try {
    let best: { path: string; mtime: number } | undefined;
    for (const name of readdirSync(dir)) {
      if (!/\.(pem|der)$/i.test(name)) continue;
      const path = join(dir, name);
      const mtime = statSync(path).mtimeMs;
      if (!best || mtime > best.mtime) best = { path, mtime };
    }
    return best?.path;
  } catch {
    return undefined;
  }
}

/**
 * The server could not send its answer within the MaxMessageSize the gateway announced (Part 6
 * §7.1.2.3, client-options.ts transportLimits; node-opcua answers a ServiceFault
 * BadTcpMessageTooLarge, other servers BadResponseTooLarge or BadEncodingLimitsExceeded).
 */
export function isResponseTooLarge(err: unknown): boolean {
  const serviceResult = (err as { response?: { responseHeader?: { serviceResult?: unknown } } } | null)?.response?.responseHeader?.serviceResult;
  return /BadTcpMessageTooLarge|BadResponseTooLarge|BadEncodingLimitsExceeded/.test(`${describeError(err)} ${serviceResult === undefined ? '' : String(serviceResult)}`);
}
