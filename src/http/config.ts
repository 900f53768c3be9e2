import { isIP } from 'node:net';
import { z } from 'zod';
import { secretSchema } from '../config/secrets.js';
import { byteSize, durationMs } from '../config/units.js';

/** Shorter tokens are guessable by a script on the plant network within the rate limit's patience. */
export const MIN_TOKEN_LENGTH = 16;

export const httpSchema = z
  .strictObject({
    enabled: z.boolean().default(true).meta({ description: 'Serve the operator page, local API, /status, /metrics and health checks' }),
    host: z
      .string()
      .min(1)
      .refine(isHostOrAddress, { error: (iss) => `${JSON.stringify(iss.input)} is not an IP address or a host name (letters, digits, "-" and "." only), e.g. 127.0.0.1, 0.0.0.0, ::1 or gateway.plant.local` })
      .default('127.0.0.1').meta({ description: 'Address to listen on; 0.0.0.0 for every interface (then writes need api_token)', examples: ['0.0.0.0'] }),
    port: z.number().int().min(0).max(65_535).default(8080).meta({ description: 'TCP port (0 picks a free one)', examples: [8080] }),
    api_token: secretSchema()
      .superRefine((token, ctx) => {
        // An unresolved secret (a command that does not need it) is empty: nothing to judge.
        if (token.origin.startsWith('unresolved') || token.reveal().length >= MIN_TOKEN_LENGTH) return;
        // The value is never echoed, only its length.
        ctx.addIssue({ code: 'custom', input: '[secret]', message: `is ${token.reveal().length} character${token.reveal().length === 1 ? '' : 's'} long; use at least ${MIN_TOKEN_LENGTH} (for example the output of "openssl rand -hex 16")` });
      })
      .optional()
      .meta({
        description: `Bearer token (at least ${MIN_TOKEN_LENGTH} characters) for writes to the local API (always needed when it listens beyond localhost) and, with require_token_for_reads, for reads`,
        examples: [{ env: 'GATEWAY_API_TOKEN' }],
      }),
    require_token_for_reads: z
      .boolean()
      .optional()
      .meta({
        description:
          'Reads (/status, /metrics, /api/annotations, /api/set-aside, /api/panel) need the api_token too. Default: on when api_token is set, off otherwise. /healthz, /readyz and the operator page shell stay open; the page asks for the token once',
        examples: [false],
      }),
    allowed_hosts: z
      .array(z.string().min(1).regex(/^[A-Za-z0-9.-]+$/, { error: 'must be a host name (letters, digits, dots, hyphens)' }))
      .default([])
      .meta({
        description:
          'Host names (as typed in a browser\'s address bar) the local HTTP server answers to, besides literal IP addresses, localhost, this machine\'s name and http.host. Other Host headers are refused (protection against DNS rebinding)',
        examples: [['gateway-line3.plant.local']],
      }),
    max_body_bytes: byteSize({ min: 1_000, max: 10_000_000 }).default(64_000).meta({ description: 'Largest request body the local API accepts' }),
    console: z.boolean().default(true).meta({ description: 'Serve the commissioning console at /console (live values, sources, set-aside, building the config); off saves its value ring', examples: [false] }),
    rate_limit_per_minute: z.number().int().min(1).default(600).meta({ description: 'Requests per minute per client address to the local API' }),
    max_connections: z
      .number()
      .int()
      .min(8)
      .max(10_000)
      .default(256)
      .meta({
        description:
          'Most open connections to the local HTTP server at once, so idle or half-sent requests cannot use up the file descriptors the sources and the buffer need. At the limit the oldest idle or half-sent connection of the client address holding the most is closed for a newcomer; a newcomer is refused only when every connection is in a request (counted in gateway_http_connections_refused_total). Lowered at start when the process\'s open-file limit leaves less: of what stays after a reserve for the gateway\'s own files, the HTTP server may hold a quarter (docs/operations.md)',
        examples: [256],
      }),
    max_connections_per_client: z
      .number()
      .int()
      .min(4)
      .max(10_000)
      .default(64)
      .meta({
        description:
          'Most open connections to the local HTTP server at once from one client address (an IPv6 client: its /64). A further one closes that address\'s oldest idle or half-sent connection, or is refused when all of them are in a request; at max_connections the address holding the most gives way first. So one host\'s flood of connections or half-sent requests costs that host, not /healthz or the operator page elsewhere. Raise it when many browsers reach the gateway through one NAT address',
        examples: [64],
      }),
    header_timeout: durationMs({ min: 1_000, max: 120_000 })
      .default(10_000)
      .meta({ description: 'A connection must complete its request headers within this time of opening (a kept-alive one: of starting its next request), however steadily bytes arrive; else it is answered 408 and closed (counted in gateway_http_connections_refused_total{reason="header_timeout"})', examples: ['10s'] }),
    reserved_connections: z
      .number()
      .int()
      .min(0)
      .max(1_000)
      .optional()
      .meta({
        description:
          'The last connections below max_connections, kept for /healthz, /readyz and the operator page (its panel and downtime buttons): once more than max_connections minus this are in a request, every other request is answered 503 and its connection closed, so long-lived requests cannot take the health checks\' and the operators\' slots (idle and half-sent connections do not count: they give way to newcomers). 0 keeps none. Default: 16, or max_connections / 8 when that is smaller',
        examples: [16],
      }),
    max_streams: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .optional()
      .meta({
        description:
          'Most long-lived streams (the console\'s live events) open at once from all clients together; a further one is answered 503. Must stay below max_connections minus reserved_connections. Default: 32, or max_connections / 4 when that is smaller',
        examples: [32],
      }),
    max_streams_per_client: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .optional()
      .meta({ description: 'Most long-lived streams (one per open console tab) open at once from one client address; a further one is answered 429. Default: 4, or max_streams when that is smaller', examples: [4] }),
  })
  .superRefine((h, ctx) => {
    if (h.require_token_for_reads === true && h.api_token === undefined) {
      ctx.addIssue({ code: 'custom', path: ['require_token_for_reads'], input: true, message: 'is true but http.api_token is not set: set the token, or leave this setting out' });
    }
    // Streams never reach the reserved connections, and leave room for ordinary requests.
    const l = connectionLimits(h);
    if (l.maxStreams + l.reservedConnections >= h.max_connections) {
      const setting = h.max_streams !== undefined ? 'max_streams' : 'reserved_connections';
      ctx.addIssue({
        code: 'custom',
        path: [setting],
        input: setting === 'max_streams' ? l.maxStreams : l.reservedConnections,
        message: `max_streams (${l.maxStreams}) plus reserved_connections (${l.reservedConnections}) must stay below max_connections (${h.max_connections}), so streams and the reserve leave room for ordinary requests`,
      });
    }
    if (h.max_streams_per_client !== undefined && h.max_streams_per_client > l.maxStreams) {
      ctx.addIssue({ code: 'custom', path: ['max_streams_per_client'], input: h.max_streams_per_client, message: `is ${h.max_streams_per_client}, more than max_streams (${l.maxStreams})` });
    }
  })
  .meta({ description: 'Local HTTP server: operator (HMI) page, local API, status, metrics, health' });

/** `"not a host!"` passed check and failed at run with a bare getaddrinfo ENOTFOUND. */
export function isHostOrAddress(host: string): boolean {
  if (isIP(host) !== 0) return true;
  return host.length <= 253 && host.split('.').every((label) => /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label));
}

export type HttpConfig = z.output<typeof httpSchema>;

/** The connection limits in force: http.reserved_connections, max_streams and max_streams_per_client with their defaults. */
export interface ConnectionLimits {
  maxConnections: number;
  reservedConnections: number;
  maxStreams: number;
  maxStreamsPerClient: number;
}

/**
 * Defaults scale down with a small max_connections (its minimum is 8), so a configuration that
 * only lowered max_connections stays valid: reserve 16 or an eighth, streams 32 or a quarter.
 */
export function connectionLimits(h: { max_connections: number; reserved_connections?: number; max_streams?: number; max_streams_per_client?: number }): ConnectionLimits {
  const reservedConnections = h.reserved_connections ?? Math.min(16, Math.floor(h.max_connections / 8));
  const maxStreams = h.max_streams ?? Math.min(32, Math.floor(h.max_connections / 4));
  return { maxConnections: h.max_connections, reservedConnections, maxStreams, maxStreamsPerClient: h.max_streams_per_client ?? Math.min(4, maxStreams) };
}

/**
 * The limits at a lower max_connections (the open-file limit leaves less, core/descriptors.ts):
 * the reserve and the streams shrink as their defaults would, so streams and the reserve still
 * leave room for ordinary requests.
 */
export function fitConnectionLimits(l: ConnectionLimits, maxConnections: number): ConnectionLimits {
  if (maxConnections >= l.maxConnections) return l;
  const maxStreams = Math.max(1, Math.min(l.maxStreams, Math.floor(maxConnections / 4)));
  return {
    maxConnections,
    reservedConnections: Math.min(l.reservedConnections, Math.floor(maxConnections / 8)),
    maxStreams,
    maxStreamsPerClient: Math.min(l.maxStreamsPerClient, maxStreams),
  };
}
