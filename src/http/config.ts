import { isIP } from 'node:net';
import { z } from 'zod';
import { secretSchema } from '../config/secrets.js';
import { byteSize } from '../config/units.js';

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
      .meta({ description: 'Most open connections to the local HTTP server at once; further ones are closed at once (counted in gateway_http_connections_refused_total), so idle or half-sent requests cannot use up the file descriptors the sources and the buffer need', examples: [256] }),
  })
  .superRefine((h, ctx) => {
    if (h.require_token_for_reads === true && h.api_token === undefined) {
      ctx.addIssue({ code: 'custom', path: ['require_token_for_reads'], input: true, message: 'is true but http.api_token is not set: set the token, or leave this setting out' });
    }
  })
  .meta({ description: 'Local HTTP server: operator (HMI) page, local API, status, metrics, health' });

/** Issue 12 §4: `"not a host!"` passed check and failed at run with a bare getaddrinfo ENOTFOUND. */
export function isHostOrAddress(host: string): boolean {
  if (isIP(host) !== 0) return true;
  return host.length <= 253 && host.split('.').every((label) => /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label));
}

export type HttpConfig = z.output<typeof httpSchema>;
