import { isIP } from 'node:net';
import { z } from 'zod';
import { secretSchema } from '../config/secrets.js';
import { byteSize } from '../config/units.js';

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
      .optional()
      .meta({ description: 'Bearer token required for writes to the local API when it listens beyond localhost', examples: [{ env: 'GATEWAY_API_TOKEN' }] }),
    max_body_bytes: byteSize({ min: 1_000, max: 10_000_000 }).default(64_000).meta({ description: 'Largest request body the local API accepts' }),
    rate_limit_per_minute: z.number().int().min(1).default(600).meta({ description: 'Requests per minute per client address to the local API' }),
    max_connections: z
      .number()
      .int()
      .min(8)
      .max(10_000)
      .default(256)
      .meta({ description: 'Most open connections to the local HTTP server at once; further ones are closed at once (counted in gateway_http_connections_refused_total), so idle or half-sent requests cannot use up the file descriptors the sources and the buffer need', examples: [256] }),
  })
  .meta({ description: 'Local HTTP server: operator (HMI) page, local API, status, metrics, health' });

/** Issue 12 §4: `"not a host!"` passed check and failed at run with a bare getaddrinfo ENOTFOUND. */
export function isHostOrAddress(host: string): boolean {
  if (isIP(host) !== 0) return true;
  return host.length <= 253 && host.split('.').every((label) => /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(label));
}

export type HttpConfig = z.output<typeof httpSchema>;
