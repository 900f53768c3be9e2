import { describeError } from '../../core/errors.js';

/**
 * Stable error codes for MQTT connection problems, from what mqtt.js and Node report: CONNACK
 * return codes (MQTT 3.1.1 §3.2.2.3) and reason codes (MQTT 5 §3.2.2.2), socket errors and TLS
 * certificate errors. The code is what metrics and status show; the description says what to do.
 */
const CONNACK: Record<number, { code: string; hint: string }> = {
  1: { code: 'MQTT_PROTOCOL_REFUSED', hint: 'the broker does not accept this MQTT version; try protocol_version: 4 or 5' },
  2: { code: 'MQTT_CLIENT_ID_REFUSED', hint: 'the broker refused the client id (too long or not allowed); set client_id' },
  3: { code: 'MQTT_BROKER_UNAVAILABLE', hint: 'the broker says it is unavailable' },
  4: { code: 'MQTT_AUTH_REFUSED', hint: 'the broker refused the user name or password' },
  5: { code: 'MQTT_NOT_AUTHORIZED', hint: 'the broker does not authorise this client (user, client id or certificate)' },
  132: { code: 'MQTT_PROTOCOL_REFUSED', hint: 'the broker does not accept this MQTT version; try protocol_version: 4' },
  133: { code: 'MQTT_CLIENT_ID_REFUSED', hint: 'the broker refused the client id; set client_id' },
  134: { code: 'MQTT_AUTH_REFUSED', hint: 'the broker refused the user name or password' },
  135: { code: 'MQTT_NOT_AUTHORIZED', hint: 'the broker does not authorise this client' },
  136: { code: 'MQTT_BROKER_UNAVAILABLE', hint: 'the broker says it is unavailable' },
  137: { code: 'MQTT_BROKER_UNAVAILABLE', hint: 'the broker is busy' },
  138: { code: 'MQTT_NOT_AUTHORIZED', hint: 'the client is banned by the broker' },
  149: { code: 'MQTT_PACKET_TOO_LARGE', hint: 'a packet exceeded the maximum packet size' },
};

const NETWORK = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ECONNABORTED']);

export function mqttErrorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'number') return CONNACK[code]?.code ?? 'MQTT_CONNECT_REFUSED';
  if (typeof code === 'string') {
    if (NETWORK.has(code)) return 'MQTT_UNREACHABLE';
    if (isTlsCode(code)) return 'MQTT_TLS_ERROR';
    return code.startsWith('MQTT_') ? code : 'MQTT_CONNECTION_ERROR';
  }
  const message = describeError(err).toLowerCase();
  if (message.includes('connack timeout') || message.includes('timeout')) return 'MQTT_TIMEOUT';
  if (message.includes('tls') || message.includes('certificate')) return 'MQTT_TLS_ERROR';
  return 'MQTT_CONNECTION_ERROR';
}

export function describeMqttError(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const base = describeError(err);
  if (typeof code === 'number' && CONNACK[code]) return `${base} (${CONNACK[code].hint})`;
  if (typeof code === 'string') {
    if (code === 'ECONNREFUSED') return `${base} (nothing listens at that address and port: broker down, wrong port?)`;
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `${base} (host name does not resolve)`;
    if (code === 'DEPTH_ZERO_SELF_SIGNED_CERT' || code === 'SELF_SIGNED_CERT_IN_CHAIN' || code === 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' || code === 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY') {
      return `${base} (the broker certificate is not signed by a trusted CA: set tls.ca to the CA file)`;
    }
    if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return `${base} (the broker certificate is for another host name: use that name in url or set tls.servername)`;
    if (code === 'CERT_HAS_EXPIRED') return `${base} (the broker certificate has expired)`;
  }
  return base;
}

function isTlsCode(code: string): boolean {
  return code.startsWith('ERR_SSL') || code.startsWith('ERR_TLS') || code.includes('CERT') || code === 'EPROTO' || code.startsWith('UNABLE_TO');
}
