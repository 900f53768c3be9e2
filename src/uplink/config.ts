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

/**
 * Issue 12 §3: `https://user:pw@host/...` was accepted and then logged with the password. The
 * service authenticates with service.auth; credentials in the URL are refused without echoing them.
 */
const noCredentialsInUrl = (u: string, ctx: z.core.$RefinementCtx<string>): void => {
  let url: URL;
  try {
    url = new URL(u);
  } catch {
    return;
  }
  if (url.username || url.password) {
    ctx.addIssue({ code: 'custom', message: 'must not contain a user name or password (user:password@ is not shown here); the service authenticates with service.auth', input: '[url with credentials]', abort: true });
  }
};

export const serviceSchema = z
  .strictObject({
    base_url: z
      .url({ protocol: /^https?$/, error: 'is not an http(s) URL' })
      .superRefine(noCredentialsInUrl)
      .transform((u) => u.replace(/\/+$/, ''))
      .refine((u) => u.endsWith('/tracking/v1'), { error: 'must end in /tracking/v1 (interface conventions)' })
      .meta({ description: 'Base address of the tracking service, ending in /tracking/v1', examples: ['https://api.example.com/tracking/v1'] }),
    auth_url: z
      .url({ protocol: /^https?$/, error: 'is not an http(s) URL' })
      .superRefine(noCredentialsInUrl)
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
    threshold: durationMs({ min: 10_000 })
      .default(120_000)
      .meta({
        description:
          'Import jobs start from what is measured: when the oldest unsent sample is older than this and the backlog cannot drain through the sync path within this time (it grows, or backlog / (the sync path\'s capacity at the pace in force less the deliverable ingest) is longer), the oldest samples go into import files (one request per file plus its polls, where the sync path carries 200 samples a request). The pace is the rate found from the service\'s 429s, not the configured budget. /status backfill.start_rule says why jobs run or not. Once a backfill has started it goes on until the backlog left is within twice what the sync path keeps; the newest backlog (up to a minute of sync capacity, at most half the threshold) always stays on the sync path so live values keep flowing. Minimum 10s',
        examples: ['2m'],
      }),
    max_file_bytes: byteSize({ min: 10_000, max: MAX_IMPORT_FILE_BYTES }).default(MAX_IMPORT_FILE_BYTES).meta({ description: 'Largest import file (the service accepts up to 128 MB)', examples: ['128MB'] }),
    max_jobs_in_flight: z.number().int().min(1).max(16).default(2).meta({ description: 'Import jobs built, uploading or processing at the same time' }),
    poll_interval: durationMs({ min: 100, max: 600_000 }).default(2_000).meta({ description: 'First delay before polling an import job; doubles up to poll_interval_max', examples: ['2s'] }),
    poll_interval_max: durationMs({ min: 100, max: 3_600_000 }).default(60_000).meta({ description: 'Longest delay between polls of one import job', examples: ['1m'] }),
    upload_timeout: durationMs({ min: 1_000 }).default(600_000).meta({ description: 'Timeout of one file upload', examples: ['10m'] }),
  })
  .meta({ description: 'Backfill of old backlog through import jobs' });

export const budgetSharingSchema = z
  .strictObject({
    mode: z
      .enum(['off', 'fleet'])
      .default('off')
      .meta({ description: 'off: requests_per_minute is this gateway\'s own budget. fleet: requests_per_minute is the budget of the whole address (every gateway behind the same NAT/IP), shared fairly among the gateways of the same group through the plant broker (needs fleet.mqtt)' }),
    group: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,60}$/, { error: 'must be 1-60 letters, digits, ".", "_" or "-"' })
      .default('default')
      .meta({ description: 'Gateways that share one address (and so one rate limit) use the same group; give each public address its own', examples: ['plant-a-nat'] }),
    announce_interval: durationMs({ min: 500, max: 60_000 }).default(2_000).meta({ description: 'How often this gateway announces its demand', examples: ['2s'] }),
    lease: durationMs({ min: 2_000, max: 600_000 }).default(15_000).meta({ description: 'An announcement not refreshed within this time is dropped and its share goes to the others', examples: ['15s'] }),
    max_gateways: z
      .number()
      .int()
      .min(2)
      .max(1_000)
      .default(32)
      .meta({
        description:
          'Most gateways of the group counted in the division, this one included (those announcing longest); more are ignored and logged. Also the floor: this gateway never paces below requests_per_minute / max_gateways (or its demand, if lower), whatever the plant broker says. Set it to the number of gateways behind the address plus a margin',
        examples: [8],
      }),
  })
  .meta({ description: 'Sharing the per-address request budget (§8) among the gateways behind one address' });

/** What happens to the samples of machine variables the service does not know (issue 24 §1, §4). */
const unknownVariablesSchema = z
  .strictObject({
    keep_set_aside: z
      .number()
      .int()
      .min(0)
      .max(1_000_000_000)
      .default(1_000_000)
      .meta({
        description:
          'Most samples of unknown machine variables kept in the set-aside list (about 100 bytes each on disk). Beyond it the oldest of them are deleted, counted in gateway_set_aside_dropped_samples_total{reason="unknown_variable"} and logged once a minute, so a mapping to variables the organisation does not have cannot fill the disk (5,000 unknown variables at 1 Hz are 18 million samples an hour). 0 keeps none',
        examples: [1_000_000],
      }),
    requeue_when_created: z
      .boolean()
      .default(true)
      .meta({ description: 'When a catalog read (every 5 minutes while unknown variables exist) lists a variable that was unknown, its set-aside samples go back into the queue by themselves, as `edge-gateway set-aside requeue --variable` would do', examples: [true] }),
  })
  .meta({ description: 'Samples of machine variables the organisation\'s catalog does not list: set aside, bounded, and sent once the variable exists' });

export const uplinkSchema = z
  .strictObject({
    requests_per_minute: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(1_400)
      .meta({ description: `Ceiling of the request rate for every call to the service together, token calls, polls and catalog reads included. The service allows ${SERVICE_RATE_LIMIT_PER_MINUTE} per minute per IP (§8), shared with every other client behind the same address, so the gateway finds its real rate from the service's 429s and paces at the lower of the two (uplink.rate in /status); keep headroom for other clients to avoid even those. With budget_sharing.mode fleet: the budget of the whole address, divided among the gateways behind it`, examples: [1400] }),
    batch_size: z.number().int().min(1).max(MAX_BATCH_ITEMS).default(MAX_BATCH_ITEMS).meta({ description: 'Samples per synchronous batch request (§8: at most 200)', examples: [200] }),
    flush_interval: durationMs({ min: 0, max: 60_000 }).default(1_000).meta({ description: 'How long a partial batch may wait for more samples before it is sent', examples: ['1s'] }),
    max_in_flight: z.number().int().min(1).max(32).default(4).meta({ description: 'Batch requests outstanding at the same time (raise it on slow links)' }),
    max_unsent_age: durationMs({ min: 10_000, max: 86_400_000 }).default(180_000).meta({ description: 'Bound on the age (by sample timestamp) of the oldest unsent sample that no import job will take: beyond it the sync path alternates newest-first and oldest-first batches, so no sample waits behind live data for long', examples: ['3m'] }),
    backfill: backfillSchema.prefault({}),
    budget_sharing: budgetSharingSchema.prefault({}),
    unknown_variables: unknownVariablesSchema.prefault({}),
  })
  .meta({ description: 'Delivery to the tracking service' });

export type ServiceConfig = z.output<typeof serviceSchema>;
export type UplinkConfig = z.output<typeof uplinkSchema>;
export type BudgetSharingConfig = z.output<typeof budgetSharingSchema>;
export type BackfillConfig = z.output<typeof backfillSchema>;
