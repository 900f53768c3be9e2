import { z } from 'zod';
import { secretSchema } from '../config/secrets.js';
import { byteSize, durationMs } from '../config/units.js';

/** Service limit on requests per minute per IP, all endpoints together (interface §8). */
export const SERVICE_RATE_LIMIT_PER_MINUTE = 1_500;
/** Items per synchronous batch (interface §8). */
export const MAX_BATCH_ITEMS = 200;
/** JSON request body limit (interface §8). */
export const MAX_JSON_BODY_BYTES = 1_000_000;
/** Import-job file limit; "128 MB" read as 128,000,000 bytes (CONTRACT.md). */
export const MAX_IMPORT_FILE_BYTES = 128_000_000;

const clientCredentials = z.strictObject({
  mode: z.literal('client_credentials'),
  client_id: z.string().min(1).meta({ description: 'OAuth 2.0 client id (§5.2)', examples: ['plant-a-gateway'] }),
  client_secret: secretSchema('GATEWAY_CLIENT_SECRET').meta({
    description: 'OAuth 2.0 client secret. Default: environment variable GATEWAY_CLIENT_SECRET or the file named by GATEWAY_CLIENT_SECRET_FILE',
    examples: [{ env: 'GATEWAY_CLIENT_SECRET' }],
  }),
  audience: z.string().min(1).default('com.service.tracking').meta({ description: 'Audience form field of the token request (§5.2)' }),
});

const apiKey = z.strictObject({
  mode: z.literal('api_key'),
  api_key: secretSchema('GATEWAY_API_KEY').meta({
    description: 'Static API key sent as a bearer credential (§5.8). Default: GATEWAY_API_KEY or GATEWAY_API_KEY_FILE',
    examples: [{ env: 'GATEWAY_API_KEY' }],
  }),
  secondary_api_key: secretSchema()
    .optional()
    .meta({ description: 'The secondary key of the same scope (§5.8); used when the primary is refused (401), so keys can be rotated without downtime', examples: [{ env: 'GATEWAY_API_KEY_SECONDARY' }] }),
});

export const serviceSchema = z
  .strictObject({
    base_url: z
      .url({ protocol: /^https?$/, error: 'is not an http(s) URL' })
      .transform((u) => u.replace(/\/+$/, ''))
      .refine((u) => u.endsWith('/tracking/v1'), { error: 'must end in /tracking/v1 (interface conventions)' })
      .meta({ description: 'Base address of the tracking service, ending in /tracking/v1', examples: ['https://api.example.com/tracking/v1'] }),
    auth_url: z
      .url({ protocol: /^https?$/, error: 'is not an http(s) URL' })
      .transform((u) => u.replace(/\/+$/, ''))
      .optional()
      .meta({ description: 'Address of the token service; the token endpoint is {auth_url}/oauth2/token. Required for client_credentials', examples: ['https://auth.example.com'] }),
    organisation_id: z
      .string()
      .regex(/^org_[A-Za-z0-9]+$/, { error: 'is not an organisation id (org_...)' })
      .meta({ description: 'Organisation the gateway writes for, sent as Service-Organisation-Id (§5.6)', examples: ['org_01hplant'] }),
    auth: z.discriminatedUnion('mode', [clientCredentials, apiKey]).meta({ description: 'Credentials: client_credentials (§5.1-5.4) or api_key (§5.8)' }),
    item_id_field: z
      .string()
      .regex(/^[a-z][a-z0-9_]*$/, { error: 'must be a snake_case field name' })
      .default('machine_variable_id')
      .meta({ description: 'Name of the machine variable id field in batch items (CONTRACT.md: machine_variable_id; the vendor reference calls it machine_data_point_config_id)', examples: ['machine_variable_id'] }),
    request_timeout: durationMs({ min: 1_000, max: 600_000 }).default(30_000).meta({ description: 'Timeout of one request to the service (ms, or with a unit: 30s)', examples: ['30s'] }),
  })
  .superRefine((s, ctx) => {
    if (s.auth.mode === 'client_credentials' && !s.auth_url) {
      ctx.issues.push({ code: 'custom', path: ['auth_url'], message: 'required setting is missing (the token endpoint lives there when auth.mode is client_credentials)', input: undefined });
    }
  })
  .meta({ description: 'The tracking service and the credentials to reach it' });

export const backfillSchema = z
  .strictObject({
    enabled: z.boolean().default(true).meta({ description: 'Drain large backlogs through import-job files (§4.7) beside the live sync path' }),
    threshold: durationMs({ min: 10_000 }).default(300_000).meta({ description: 'Use import jobs when the backlog would take longer than this to send through the sync path at the current budget', examples: ['5m'] }),
    max_file_bytes: byteSize({ min: 10_000, max: MAX_IMPORT_FILE_BYTES }).default(MAX_IMPORT_FILE_BYTES).meta({ description: 'Largest import file (the service accepts up to 128 MB)', examples: ['128MB'] }),
    max_jobs_in_flight: z.number().int().min(1).max(16).default(2).meta({ description: 'Import jobs built, uploading or processing at the same time' }),
    poll_interval: durationMs({ min: 100, max: 600_000 }).default(2_000).meta({ description: 'First delay before polling an import job; doubles up to poll_interval_max', examples: ['2s'] }),
    poll_interval_max: durationMs({ min: 100, max: 3_600_000 }).default(60_000).meta({ description: 'Longest delay between polls of one import job', examples: ['1m'] }),
    upload_timeout: durationMs({ min: 1_000 }).default(600_000).meta({ description: 'Timeout of one file upload', examples: ['10m'] }),
  })
  .meta({ description: 'Backfill of old backlog through import jobs' });

export const uplinkSchema = z
  .strictObject({
    requests_per_minute: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(1_400)
      .meta({ description: `Request budget for every call to the service together, token calls and polls included. The service allows ${SERVICE_RATE_LIMIT_PER_MINUTE} per minute per IP (§8); keep headroom for other clients behind the same IP`, examples: [1400] }),
    batch_size: z.number().int().min(1).max(MAX_BATCH_ITEMS).default(MAX_BATCH_ITEMS).meta({ description: 'Samples per synchronous batch request (§8: at most 200)', examples: [200] }),
    flush_interval: durationMs({ min: 0, max: 60_000 }).default(1_000).meta({ description: 'How long a partial batch may wait for more samples before it is sent', examples: ['1s'] }),
    max_in_flight: z.number().int().min(1).max(32).default(4).meta({ description: 'Batch requests outstanding at the same time (raise it on slow links)' }),
    max_unsent_age: durationMs({ min: 10_000, max: 86_400_000 }).default(180_000).meta({ description: 'Bound on the age (by sample timestamp) of the oldest unsent sample that no import job will take: beyond it the sync path alternates newest-first and oldest-first batches, so no sample waits behind live data for long', examples: ['3m'] }),
    backfill: backfillSchema.prefault({}),
  })
  .meta({ description: 'Delivery to the tracking service' });

export type ServiceConfig = z.output<typeof serviceSchema>;
export type UplinkConfig = z.output<typeof uplinkSchema>;
export type BackfillConfig = z.output<typeof backfillSchema>;
