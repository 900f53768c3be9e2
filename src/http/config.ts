import { z } from 'zod';
import { secretSchema } from '../config/secrets.js';
import { byteSize } from '../config/units.js';

export const httpSchema = z
  .strictObject({
    enabled: z.boolean().default(true).meta({ description: 'Serve the operator page, local API, /status, /metrics and health checks' }),
    host: z.string().min(1).default('127.0.0.1').meta({ description: 'Address to listen on; 0.0.0.0 for every interface (then writes need api_token)', examples: ['0.0.0.0'] }),
    port: z.number().int().min(0).max(65_535).default(8080).meta({ description: 'TCP port (0 picks a free one)', examples: [8080] }),
    api_token: secretSchema()
      .optional()
      .meta({ description: 'Bearer token required for writes to the local API when it listens beyond localhost', examples: [{ env: 'GATEWAY_API_TOKEN' }] }),
    max_body_bytes: byteSize({ min: 1_000, max: 10_000_000 }).default(64_000).meta({ description: 'Largest request body the local API accepts' }),
    console: z.boolean().default(true).meta({ description: 'Serve the commissioning console at /console (live values, sources, set-aside, building the config); off saves its value ring', examples: [false] }),
    rate_limit_per_minute: z.number().int().min(1).default(600).meta({ description: 'Requests per minute per client address to the local API' }),
  })
  .meta({ description: 'Local HTTP server: operator (HMI) page, local API, status, metrics, health' });

export type HttpConfig = z.output<typeof httpSchema>;
