/**
 * The numbers and choices of the tracking-service contract the emulator implements, in one place.
 * Tags as in /work/shared/spec/CONTRACT.md: [S] stated in the interface (section given),
 * [V] vendor reference, [A] our assumption (change it here).
 */

/** Path prefix of every API call (§Conventions). */
export const BASE_PATH = '/tracking/v1';
/** Token endpoint, relative to the auth URL (§5.2). */
export const TOKEN_PATH = '/oauth2/token';
/** Inspection and fault-injection API; no auth, no rate limit, no faults [A, emulator only]. */
export const EMULATOR_PATH = '/_emulator';

/** Audience form field of the token request (§5.2). */
export const AUDIENCE = 'com.service.tracking';
/** Organisation header (§5.6, renamed from the vendor's). */
export const ORGANISATION_HEADER = 'service-organisation-id';
/** Request id header on every response (CONTRACT.md, [V] header renamed). */
export const REQUEST_ID_HEADER = 'Service-Request-Id';

/** Requests per minute per client IP, all endpoints together, token endpoint included (§8). */
export const DEFAULT_RATE_LIMIT_PER_MINUTE = 1_500;
/** Exact sliding window of the rate limit (§8 "per minute"; sliding rather than fixed is [A]). */
export const RATE_WINDOW_MS = 60_000;
/** Token lifetime; "short-lived" (§5.3), the value is [A]. */
export const DEFAULT_TOKEN_TTL_SECONDS = 3_600;

/** JSON request body limit: "1 MB" read as 1,000,000 bytes (§8, [A] for the exact number). */
export const MAX_JSON_BODY_BYTES = 1_000_000;
/** Import-job file limit: "128 MB" read as 128,000,000 bytes (§8, CONTRACT.md). */
export const MAX_IMPORT_FILE_BYTES = 128_000_000;
/**
 * Past this many bytes an oversized body is no longer drained (read and thrown away so the client
 * sees the 413 on a healthy connection) and the socket is closed instead [A].
 */
export const MAX_DRAIN_BYTES = 16 * 1024 * 1024;

/** Items per synchronous batch (§8, CONTRACT.md). */
export const MIN_BATCH_ITEMS = 1;
export const MAX_BATCH_ITEMS = 200;
/**
 * Names accepted for the machine variable id of a batch/import item; exactly one per item.
 * CONTRACT.md: `machine_variable_id` [A, from §2.1], the vendor's `machine_data_point_config_id` [V].
 */
export const ITEM_ID_FIELDS = ['machine_variable_id', 'machine_data_point_config_id'] as const;

/** Annotation limits (§2.3, §8). */
export const MAX_ANNOTATION_TEXT = 5_000;
export const MAX_ANNOTATION_VARIABLES = 100;
/** external_id: 1-100 characters of this set (§2.1). */
export const EXTERNAL_ID_PATTERN = /^[A-Za-z0-9\-_]+$/;
export const MAX_EXTERNAL_ID = 100;

/** Page size (§4.2, §8). */
export const MIN_PAGE_LIMIT = 1;
export const MAX_PAGE_LIMIT = 50;
export const DEFAULT_PAGE_LIMIT = 10;
/** Site filter query parameter of the list endpoints; the name is "not shown" in §4.2 [A]. */
export const SITE_FILTER_PARAM = 'site_id';

/** Time an import job stays `accepted`, then at least as long `processing` [A]. */
export const DEFAULT_JOB_PROCESSING_DELAY_MS = 500;
/**
 * At most this many `{index, code, message}` objects are listed in a job's `errors`;
 * `items_rejected` still counts every rejected item [A] (§2.9 leaves the objects "not shown").
 */
export const MAX_JOB_ERRORS = 1_000;

/** Requests kept by the request journal, GET /_emulator/requests [A, emulator only]. */
export const DEFAULT_JOURNAL_SIZE = 500;
