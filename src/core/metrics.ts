import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type GaugeConfiguration } from 'prom-client';

/**
 * A gauge whose value is read when it is scraped, through prom-client's `collect()` hook, instead
 * of written as a side effect of something else (issue 23: `/metrics` called `status()` only to
 * refresh these). The component that owns the figure binds its reader with `readFrom` (and the
 * returned function unbinds it at stop); a reader that throws (a database closing) leaves the last
 * value. Until bound, the gauge reports what was last `set()`.
 */
export type ReadGauge = Gauge & { readFrom(read: () => number): () => void };

function readGauge(config: Omit<GaugeConfiguration<string>, 'collect' | 'labelNames'>): ReadGauge {
  const reader: { read: (() => number) | null } = { read: null };
  const gauge = new Gauge({
    ...config,
    collect() {
      if (!reader.read) return;
      try {
        this.set(reader.read());
      } catch {
        /* keep the last value */
      }
    },
  });
  return Object.assign(gauge, {
    readFrom(read: () => number): () => void {
      reader.read = read;
      return () => {
        if (reader.read === read) reader.read = null;
      };
    },
  });
}

/** One sample of a labelled gauge read at scrape time. */
export interface LabelledValue {
  labels: Record<string, string>;
  value: number;
}

/**
 * A labelled gauge read when scraped, from one reader per key (a source's name): a source built
 * again by a reload replaces its reader, and its values are read afresh at every scrape, so a
 * source that is gone leaves no series behind.
 */
export type KeyedReadGauge = Gauge & { readFrom(key: string, read: () => readonly LabelledValue[]): () => void };

function keyedReadGauge(config: Omit<GaugeConfiguration<string>, 'collect'>): KeyedReadGauge {
  const readers = new Map<string, () => readonly LabelledValue[]>();
  const gauge = new Gauge({
    ...config,
    collect() {
      this.reset();
      for (const read of readers.values()) {
        try {
          for (const v of read()) this.set(v.labels, v.value);
        } catch {
          /* a reader that fails (a source closing) leaves its series out of this scrape */
        }
      }
    },
  });
  return Object.assign(gauge, {
    readFrom(key: string, read: () => readonly LabelledValue[]): () => void {
      readers.set(key, read);
      return () => {
        if (readers.get(key) === read) readers.delete(key);
      };
    },
  });
}

/**
 * The uplink's states in the one vocabulary every surface shows (src/status/uplink-state.ts says
 * what each means): `gateway_uplink_status{state}` is 1 for the state in force, 0 for the others.
 */
export const UPLINK_STATES = ['delivering', 'partial', 'rate_limited', 'unreachable', 'refused'] as const;

/** A state set read at scrape time: 1 for the state `read()` names, 0 for every other of `states`. */
export type ReadStateGauge = Gauge & { readFrom(read: () => string): () => void };

function readStateGauge(config: Omit<GaugeConfiguration<string>, 'collect' | 'labelNames'>, states: readonly string[]): ReadStateGauge {
  const reader: { read: (() => string) | null } = { read: null };
  const gauge = new Gauge({
    ...config,
    labelNames: ['state'],
    collect() {
      if (!reader.read) return;
      try {
        const current = reader.read();
        for (const st of states) this.set({ state: st }, st === current ? 1 : 0);
      } catch {
        /* keep the last value */
      }
    },
  });
  return Object.assign(gauge, {
    readFrom(read: () => string): () => void {
      reader.read = read;
      return () => {
        if (reader.read === read) reader.read = null;
      };
    },
  });
}

/**
 * The one place that defines metric names. Every component receives the `Metrics` object built
 * here; nothing else constructs a prom-client metric. The README's metric table is generated
 * from `METRIC_DOCS` below, so a metric added here is documented by construction.
 *
 * Naming: `gateway_<area>_<what>[_<unit>][_total]`, Prometheus conventions.
 */
export function createMetrics(options: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  const r = [registry];
  if (options.defaultMetrics) collectDefaultMetrics({ register: registry, prefix: 'gateway_process_' });

  const m = {
    registry,

    // --- sources (every protocol reports under the same names; `source` is the configured name) ---
    sourceConnected: new Gauge({ name: 'gateway_source_connected', help: '1 when the source is connected to its device or broker, else 0', labelNames: ['source', 'kind'], registers: r }),
    sourceSamplesRead: new Counter({ name: 'gateway_source_samples_read_total', help: 'Samples read from devices and handed to the buffer', labelNames: ['source', 'kind'], registers: r }),
    sourceSamplesRefused: new Counter({ name: 'gateway_source_samples_refused_total', help: 'Values not turned into samples, by reason (bad status, not numeric, malformed payload ...)', labelNames: ['source', 'kind', 'reason'], registers: r }),
    sourceErrors: new Counter({ name: 'gateway_source_errors_total', help: 'Errors talking to a device or broker, by stable error code', labelNames: ['source', 'kind', 'code'], registers: r }),
    sourceReconnects: new Counter({ name: 'gateway_source_reconnects_total', help: 'Reconnection attempts after a lost or failed connection', labelNames: ['source', 'kind'], registers: r }),
    sourceRequests: new Counter({ name: 'gateway_source_requests_total', help: 'Requests sent to devices (Modbus reads, OPC UA reads), by device and outcome', labelNames: ['source', 'kind', 'device', 'outcome'], registers: r }),
    sourceValuesLost: new Counter({ name: 'gateway_source_values_lost_total', help: 'Values lost before they reached the buffer, by reason (server_overflow: discarded from a full OPC UA monitored-item queue, estimated from the gap between the values around it and the sampling interval, at least 1 per value with the Overflow bit; buffer_full: refused by the source because the buffer did not keep up). Included in status dropped_total', labelNames: ['source', 'kind', 'reason'], registers: r }),
    sourceVariables: keyedReadGauge({ name: 'gateway_source_variables', help: 'Variables of a source by quality (good; uncertain, bad: the device says so, from an OPC UA StatusCode, a Modbus exception, a Sparkplug Quality property; stale: no reading for 3 periods of a polled variable, a Sparkplug NDEATH/DDEATH or a last will, or the source or its device is down; none: no value yet)', labelNames: ['source', 'kind', 'quality'], registers: r }),
    sourceLastSampleAge: new Gauge({ name: 'gateway_source_last_sample_age_seconds', help: 'Seconds since the source last produced a sample', labelNames: ['source', 'kind'], registers: r }),

    // --- OPC UA specific ---
    opcuaSessionRecoveries: new Counter({ name: 'gateway_opcua_session_recoveries_total', help: 'OPC UA sessions re-established or subscriptions re-created after a connection loss or watchdog trip', labelNames: ['source', 'how'], registers: r }),
    opcuaInvalidNodes: new Gauge({ name: 'gateway_opcua_invalid_nodes', help: 'Configured OPC UA nodes that could not be monitored (unknown node id, non-numeric type)', labelNames: ['source'], registers: r }),
    opcuaValuesReceived: new Counter({ name: 'gateway_opcua_values_received_total', help: 'Values (data change notifications) received in the Publish responses of OPC UA subscriptions, before decoding: compare with gateway_source_samples_read_total and the refusals to see where values went', labelNames: ['source'], registers: r }),
    opcuaQueueOverflows: new Counter({ name: 'gateway_opcua_queue_overflows_total', help: 'Values that arrived with the Overflow bit (Part 4 §5.12.1.5): the server\'s queue of that monitored item was full and it discarded at least one older value of the node (a lower bound of the values lost), because Publish responses were not fetched fast enough (raise queue_size, or look at gateway_process_nodejs_eventloop_lag_seconds)', labelNames: ['source'], registers: r }),
    opcuaMissedMessages: new Counter({ name: 'gateway_opcua_missed_messages_total', help: 'OPC UA NotificationMessages skipped in a subscription\'s sequence numbers (Part 4 §5.13.1.1): sent by the server and never received; their values are lost (the gateway does not ask for them again with Republish)', labelNames: ['source'], registers: r }),
    opcuaMonitoredNodes: new Gauge({ name: 'gateway_opcua_monitored_nodes', help: 'OPC UA nodes being read right now (monitored items in subscription mode, polled nodes in polling mode); 0 while disconnected', labelNames: ['source'], registers: r }),

    // --- Modbus specific ---
    modbusExceptions: new Counter({ name: 'gateway_modbus_exceptions_total', help: 'Modbus exception responses, by exception name', labelNames: ['source', 'device', 'exception'], registers: r }),
    modbusCycleSeconds: new Histogram({ name: 'gateway_modbus_cycle_seconds', help: 'Duration of one poll cycle of a Modbus device', labelNames: ['source', 'device'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5], registers: r }),
    modbusRequestsPerCycle: new Gauge({ name: 'gateway_modbus_requests_per_cycle', help: 'Read requests one poll cycle of a Modbus device sends, after joining nearby registers', labelNames: ['source', 'device'], registers: r }),
    modbusDeviceUp: new Gauge({ name: 'gateway_modbus_device_up', help: '1 when the last poll cycle of a Modbus device got answers, else 0 (connecting, offline)', labelNames: ['source', 'device'], registers: r }),
    modbusCycleOverruns: new Counter({ name: 'gateway_modbus_cycle_overruns_total', help: 'Poll ticks skipped because a Modbus device cycle took longer than its poll_interval', labelNames: ['source', 'device'], registers: r }),

    // --- MQTT specific ---
    mqttMessages: new Counter({ name: 'gateway_mqtt_messages_total', help: 'MQTT messages received, by outcome (ok: every value stored; partial: some refused; refused: none stored; ignored: no data by design, e.g. Sparkplug NDEATH; unmatched: no configured subscription)', labelNames: ['source', 'outcome'], registers: r }),
    mqttRefusals: new Counter({ name: 'gateway_mqtt_refusals_total', help: 'MQTT values or messages refused, by subscription topic filter and reason (malformed, oversize, unknown_name, unknown_alias, not_numeric, bad_timestamp ...)', labelNames: ['source', 'subscription', 'reason'], registers: r }),
    mqttPendingMessages: new Gauge({ name: 'gateway_mqtt_pending_messages', help: 'MQTT messages received and not yet committed to the buffer (QoS 1/2 ones are not yet acknowledged)', labelNames: ['source'], registers: r }),
    mqttSparkplugEvents: new Counter({ name: 'gateway_mqtt_sparkplug_events_total', help: 'Sparkplug B session events, by event (nbirth, dbirth, ndeath, ddeath, stale_ndeath, seq_gap, rebirth_requested; with primary_host_id: state_birth, state_republished, state_death)', labelNames: ['source', 'event'], registers: r }),
    brokerClients: new Gauge({ name: 'gateway_broker_clients', help: 'Clients connected to the embedded MQTT broker', registers: r }),
    brokerConnectionsRefused: new Counter({ name: 'gateway_broker_connections_refused_total', help: 'Connections the embedded MQTT broker refused or closed, by reason (bad_credentials, packet_too_large; connect_deadline: not authenticated within connect_deadline; address_unauthenticated_limit, address_limit: max_unauthenticated_per_address or max_clients_per_address reached, the address\'s own oldest connection that had not authenticated closed, or with address_limit the newcomer refused when all of the address\'s are authenticated; unauthenticated_limit, client_limit: max_unauthenticated or max_clients reached, the oldest connection that had not authenticated of the address holding the most closed; too_many_clients: max_clients held by authenticated clients, the newcomer refused)', labelNames: ['reason'], registers: r }),
    brokerMessagesDropped: new Counter({ name: 'gateway_broker_messages_dropped_total', help: 'Messages the embedded MQTT broker refused to keep, by reason (retained_limit: a new retained topic beyond max_retained; queue_limit: a QoS 1/2 message for an offline persistent session beyond max_queued_messages)', labelNames: ['reason'], registers: r }),

    // --- the gateway's SQLite file: space per owner (src/store/README.md) ---
    storeBytes: keyedReadGauge({ name: 'gateway_store_bytes', help: 'Bytes in use in the gateway\'s SQLite file, by owner (samples: the sample buffer, with what the file shares; annotations, alarms, gaps, set_aside, trend: the side tables, each with its own bound). They add up to the pages in use of the whole file', labelNames: ['owner'], registers: r }),
    storeMaxBytes: keyedReadGauge({ name: 'gateway_store_max_bytes', help: 'Bound of each owner\'s space (samples: buffer.max_bytes; the others: store.<owner>_max_bytes; -1: none)', labelNames: ['owner'], registers: r }),
    storeRefusedWrites: new Counter({ name: 'gateway_store_refused_total', help: 'New entries an owner refused because its space was full after its full policy made what room it may (annotations: HTTP 507 or an MQTT trigger message counted as store_full; alarms: a new activation; gaps: a new gap)', labelNames: ['owner'], registers: r }),
    storeRemovedRows: new Counter({ name: 'gateway_store_removed_rows_total', help: 'Rows an owner\'s full policy deleted to stay within its bound (annotations: delivered or refused entries; alarms: ended conditions, links, flags; gaps: closed gaps; set_aside: the oldest set-aside samples; trend: the oldest trend rows)', labelNames: ['owner'], registers: r }),
    storeDiskFull: new Gauge({ name: 'gateway_store_disk_full', help: '1 while the disk holding the buffer is full (the reserve store.disk_reserve is given back, new samples are refused, the backlog is delivered), else 0', registers: r }),

    // --- buffer ---
    bufferRows: new Gauge({ name: 'gateway_buffer_samples', help: 'Samples held in the buffer (not yet acknowledged upstream)', registers: r }),
    bufferBytes: new Gauge({ name: 'gateway_buffer_bytes', help: 'Bytes the samples use in the buffer file (pages in use of the sample buffer\'s tables, excluding free pages and the side tables, which gateway_store_bytes reports by owner): what buffer.max_bytes bounds', registers: r }),
    bufferFileBytes: new Gauge({ name: 'gateway_buffer_file_bytes', help: 'Size on disk of the buffer database and its WAL (free pages beyond buffer.keep_free that stayed unused for a minute are returned to the file system)', registers: r }),
    bufferFreeBytes: new Gauge({ name: 'gateway_buffer_free_bytes', help: 'Free pages inside the buffer file, reused by the next writes or returned to the file system', registers: r }),
    bufferDiskReturnedBytes: new Counter({ name: 'gateway_buffer_disk_returned_bytes_total', help: 'Bytes of free pages the buffer file returned to the file system (incremental vacuum)', registers: r }),
    bufferOldestAge: new Gauge({ name: 'gateway_buffer_oldest_sample_age_seconds', help: 'Age of the oldest unsent sample (by sample timestamp)', registers: r }),
    bufferCommits: new Counter({ name: 'gateway_buffer_commits_total', help: 'Group-commit transactions written', registers: r }),
    bufferCommittedSamples: new Counter({ name: 'gateway_buffer_committed_samples_total', help: 'Samples durably committed to the buffer', registers: r }),
    bufferCommitSeconds: new Histogram({ name: 'gateway_buffer_commit_seconds', help: 'Duration of one group-commit transaction', buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: r }),
    bufferDroppedSamples: new Counter({ name: 'gateway_buffer_dropped_samples_total', help: 'Samples lost on purpose because the buffer was full, by policy (drop_oldest; refuse_new and memory: refused to a source that cannot offer them again; unwritable_at_stop: held in memory when the gateway stopped while the disk refused writes)', labelNames: ['policy'], registers: r }),
    bufferRefusedSamples: new Counter({ name: 'gateway_buffer_refused_samples_total', help: 'Samples the buffer refused to their caller instead of committing them, by reason (buffer_full: refuse_new; pending_limit: too many wait in memory; closed; invalid_sample: an append holding a value or timestamp that is not a finite number). Callers that keep them (MQTT QoS 1/2, set-aside requeue, history backfill) offer them again; the rest also count as dropped', labelNames: ['reason'], registers: r }),
    bufferWriteErrors: new Counter({ name: 'gateway_buffer_write_errors_total', help: 'Failed buffer writes, by SQLite error code (SQLITE_FULL ...)', labelNames: ['code'], registers: r }),
    bufferWritable: new Gauge({ name: 'gateway_buffer_writable', help: '1 when the last buffer write succeeded, else 0', registers: r }),
    bufferSealedChunks: new Counter({ name: 'gateway_buffer_chunks_sealed_total', help: 'Per-variable compressed chunks written by the sealer (buffer v2)', registers: r }),
    bufferSealedSamples: new Gauge({ name: 'gateway_buffer_sealed_samples', help: 'Unsent samples held in sealed (compressed) chunks; the rest are live rows', registers: r }),
    bufferBytesPerSample: new Gauge({ name: 'gateway_buffer_bytes_per_sample', help: 'Bytes per unsent sample now (the samples\' pages in use / samples held; side tables such as set-aside samples are not counted)', registers: r }),
    bufferCompressionRatio: new Gauge({ name: 'gateway_buffer_compression_ratio', help: 'Raw size (16 bytes per sample: timestamp and value) over the size of the sealed chunks', registers: r }),
    bufferCapacitySeconds: new Gauge({ name: 'gateway_buffer_capacity_seconds', help: 'Time until buffer.max_bytes is reached by samples at the current ingest rate and bytes per sample (side tables have their own bounds and do not count; -1 while nothing is ingested)', registers: r }),
    bufferMaintenanceSeconds: new Histogram({ name: 'gateway_buffer_maintenance_seconds', help: 'Duration of one slice of buffer maintenance, by task (chunks: sealing and compaction; disk: giving free pages back and truncating the WAL; trend: keeping the console trend; last_committed: writing the newest committed timestamp of each variable). A slice never runs inside a commit; each aims at 50 ms at most', labelNames: ['task'], buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: r }),
    bufferRecoveredDatabases: new Counter({ name: 'gateway_buffer_recovered_databases_total', help: 'Databases moved aside at start because they failed the integrity check or could not be opened', registers: r }),
    setAsideSamples: readGauge({ name: 'gateway_set_aside_samples', help: 'Samples set aside after the service refused them (see `edge-gateway set-aside list`)', registers: r }),

    // --- uplink ---
    uplinkRequests: new Counter({ name: 'gateway_uplink_requests_total', help: 'Requests to the tracking service, by endpoint and HTTP status (or error code)', labelNames: ['endpoint', 'status'], registers: r }),
    uplinkRequestSeconds: new Histogram({ name: 'gateway_uplink_request_seconds', help: 'Duration of requests to the tracking service', labelNames: ['endpoint'], buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers: r }),
    uplinkDeliveredSamples: new Counter({ name: 'gateway_uplink_delivered_samples_total', help: 'Samples acknowledged by the tracking service, by path (sync, import)', labelNames: ['path'], registers: r }),
    setAsideDroppedSamples: new Counter({ name: 'gateway_set_aside_dropped_samples_total', help: 'Set-aside samples deleted by the gateway itself, by reason (unknown_variable: beyond uplink.unknown_variables.keep_set_aside, oldest first; store_full: beyond store.set_aside_max_bytes, oldest first)', labelNames: ['reason'], registers: r }),
    setAsideRequeuedSamples: new Counter({ name: 'gateway_set_aside_requeued_samples_total', help: 'Set-aside samples put back into the queue by the gateway itself, by reason (variable_created: the catalog lists a variable that was unknown; suspect_cleared: the catalog lists a variable whose item was refused alone, so its held samples are tried again)', labelNames: ['reason'], registers: r }),
    uplinkSetAsideSamples: new Counter({ name: 'gateway_uplink_set_aside_samples_total', help: 'Samples set aside because the service refused them, by path', labelNames: ['path'], registers: r }),
    uplinkRetries: new Counter({ name: 'gateway_uplink_retries_total', help: 'Retried requests, by reason (rate_limited, server_error, network, unauthorized, too_large)', labelNames: ['reason'], registers: r }),
    uplinkBudgetWaitSeconds: new Counter({ name: 'gateway_uplink_budget_wait_seconds_total', help: 'Time spent waiting for the request budget', registers: r }),
    uplinkBudgetPerMinute: new Gauge({ name: 'gateway_uplink_budget_requests_per_minute', help: 'Configured request budget per minute (all calls to the service together): a ceiling, not the pace', registers: r }),
    uplinkPacePerMinute: new Gauge({ name: 'gateway_uplink_pace_requests_per_minute', help: 'Requests per minute the gateway paces at now: the lowest of the configured budget, the fleet share and the rate found from the service\'s 429s', registers: r }),
    uplinkRateFound: new Gauge({ name: 'gateway_uplink_rate_found_requests_per_minute', help: 'Requests per minute the service was found to allow this gateway (from its 429s; probed upward slowly); -1 while no limit was met', registers: r }),
    uplinkState: new Gauge({ name: 'gateway_uplink_state', help: 'Uplink state: 0 ok, 1 retrying (transient errors), 2 halted (credentials or organisation refused; operator action needed)', registers: r }),
    uplinkTokenRenewals: new Counter({ name: 'gateway_uplink_token_renewals_total', help: 'Access tokens fetched from the token endpoint', registers: r }),
    uplinkFreshestAge: new Gauge({ name: 'gateway_uplink_freshest_delivered_age_seconds', help: 'Age (now minus sample timestamp) of the newest sample the service has acknowledged', registers: r }),
    uplinkLastSuccess: new Gauge({ name: 'gateway_uplink_last_success_timestamp_seconds', help: 'Wall-clock time of the last 2xx from the service', registers: r }),
    importJobsInFlight: new Gauge({ name: 'gateway_import_jobs_in_flight', help: 'Import jobs being built, uploaded or processed', registers: r }),
    importJobs: new Counter({ name: 'gateway_import_jobs_total', help: 'Import jobs ended, by outcome (finished, failed, abandoned)', labelNames: ['outcome'], registers: r }),
    importFileBytes: new Counter({ name: 'gateway_import_file_bytes_total', help: 'Bytes of import-job files uploaded', registers: r }),
    uplinkStatus: readStateGauge({ name: 'gateway_uplink_status', help: 'What limits delivery, 1 for the state in force: delivering (everything mapped is delivered), partial (some mapped variables are unknown to the service or refused), rate_limited (the rate found from the service\'s 429s, or the budget while the backlog grows, limits delivery), unreachable, refused (authentication, organisation, every item, endpoint)', registers: r }, UPLINK_STATES),
    uplinkUnknownVariables: readGauge({ name: 'gateway_uplink_unknown_variables', help: 'Mapped machine variables the organisation\'s catalog does not list (their samples are set aside)', registers: r }),
    backlogEtaSeconds: readGauge({ name: 'gateway_backlog_eta_seconds', help: 'Estimated seconds until the backlog is delivered at the current rates (-1 when unknown)', registers: r }),

    // --- annotations ---
    annotationsQueued: new Gauge({ name: 'gateway_annotations_queued', help: 'Annotations waiting in the outbox', registers: r }),
    annotationsDelivered: new Counter({ name: 'gateway_annotations_delivered_total', help: 'Annotations delivered (201, or 409 for an already delivered external_id)', labelNames: ['origin'], registers: r }),
    annotationsRefused: new Counter({ name: 'gateway_annotations_refused_total', help: 'Annotations refused by the service (400) or by local validation', labelNames: ['origin'], registers: r }),
    downtimesOpen: new Gauge({ name: 'gateway_downtimes_open', help: 'Downtimes started and not yet stopped', registers: r }),
    annotationsCreated: new Counter({ name: 'gateway_annotations_created_total', help: 'Annotations queued in the outbox, by origin (api, hmi, mqtt, cli, detector, gap, alarm)', labelNames: ['origin'], registers: r }),
    annotationTriggerMessages: new Counter({ name: 'gateway_annotation_trigger_messages_total', help: 'Messages on the annotation MQTT topic, by outcome (ok; duplicate: a redelivery or a repeated start/stop; invalid: refused by validation; malformed: not JSON or unknown shape; oversize; not_stored: the outbox could not be written, not acknowledged; store_full: the outbox is at store.annotations_max_bytes, acknowledged and refused)', labelNames: ['outcome'], registers: r }),

    // --- gap ledger and OPC UA historical backfill (issue 14) ---
    gapsOpen: readGauge({ name: 'gateway_gaps_open', help: 'Gaps in the data still open: a source or device not delivering now (see `edge-gateway gaps list`)', registers: r }),
    gapSeconds: new Counter({ name: 'gateway_gap_seconds_total', help: 'Seconds of closed gaps in the data, by reason (gateway_stopped, source_disconnected, device_error, buffer_full, values_lost)', labelNames: ['reason'], registers: r }),
    gapFilled: new Counter({ name: 'gateway_gap_filled_total', help: 'Gaps filled from the OPC UA server\'s history, by result (yes: every node; partial: some nodes or part of the window)', labelNames: ['result'], registers: r }),
    historyValues: new Counter({ name: 'gateway_opcua_history_values_total', help: 'Values read from OPC UA history (HistoryRead raw) and handed to the buffer', labelNames: ['source'], registers: r }),
    historyRequests: new Counter({ name: 'gateway_opcua_history_requests_total', help: 'OPC UA HistoryRead requests, by outcome (ok, error)', labelNames: ['source', 'outcome'], registers: r }),

    // --- machine conditions: OPC UA Alarms & Conditions into annotations (issue 26) ---
    alarmEventsReceived: new Counter({ name: 'gateway_alarm_events_received_total', help: 'Condition events (OPC UA Alarms & Conditions) received and decoded, by source', labelNames: ['source'], registers: r }),
    alarmEventsRefused: new Counter({ name: 'gateway_alarm_events_refused_total', help: 'Condition events refused, by source and reason (missing_field, wrong_type, bad_severity: malformed; implausible_time: outside annotations.max_age / max_ahead; not_stored: the annotations component could not take them, a ConditionRefresh follows; store_full: a new activation while the alarms space is at store.alarms_max_bytes)', labelNames: ['source', 'reason'], registers: r }),
    alarmEventsHandled: new Counter({ name: 'gateway_alarm_events_handled_total', help: 'Condition events turned into annotation state, by source and outcome (opened: a range began; closed: a range annotation was queued; updated: acknowledged, confirmed or repeated by a refresh; instant: an instant annotation was queued; ignored: unmapped and below annotations.alarms.instant_min_severity, a branch, or inactive and never seen active)', labelNames: ['source', 'outcome'], registers: r }),
    alarmConditionsOpen: new Gauge({ name: 'gateway_alarm_conditions_open', help: 'Machine conditions active now whose range annotation is queued when they end', registers: r }),
    opcuaConditionRefreshes: new Counter({ name: 'gateway_opcua_condition_refreshes_total', help: 'ConditionRefresh calls (Part 9 §5.5.7) after a (re)connect, a RefreshRequiredEvent, an event queue overflow or a failed delivery, by outcome (ok, failed)', labelNames: ['source', 'outcome'], registers: r }),
    opcuaEventQueueOverflows: new Counter({ name: 'gateway_opcua_event_queue_overflows_total', help: 'EventQueueOverflowEvents (Part 4 §5.12.1.5): the server discarded condition events because the event item\'s queue (events.queue_size as the server revised it, see the log and status) was full; each stands for at least one lost event, and a ConditionRefresh follows', labelNames: ['source'], registers: r }),

    // --- local HTTP (API, HMI page, metrics) ---
    httpRequests: new Counter({ name: 'gateway_http_requests_total', help: 'Requests to the local HTTP server, by route and status', labelNames: ['route', 'status'], registers: r }),
    httpConnectionsRefused: new Counter({ name: 'gateway_http_connections_refused_total', help: 'Connections the local HTTP server refused or closed, by reason (max_connections_per_client: the address already held http.max_connections_per_client, its oldest idle or half-sent connection closed or the newcomer refused; max_connections: http.max_connections open, the oldest idle or half-sent connection of the address holding the most closed, or the newcomer refused when all are in a request; header_timeout: headers not complete within http.header_timeout)', labelNames: ['reason'], registers: r }),
    httpBusy: new Counter({ name: 'gateway_http_busy_total', help: 'Requests the local HTTP server turned away for a connection limit, by reason (streams_per_client: 429, http.max_streams_per_client; streams_total: 503, http.max_streams; reserved_connections: 503, only the connections kept for health checks and the operator page were left)', labelNames: ['reason'], registers: r }),

    // --- fleet (several gateways behind one address, the plant broker) ---
    uplinkBudgetShare: new Gauge({ name: 'gateway_uplink_budget_share_requests_per_minute', help: 'This gateway\'s fair share of the address budget when uplink.budget_sharing is fleet, requests per minute: a ceiling (the pace may be lower after 429s: gateway_uplink_pace_requests_per_minute)', registers: r }),
    fleetBudgetMembers: new Gauge({ name: 'gateway_fleet_budget_members', help: 'Gateways sharing the address budget as this gateway sees them (itself included, at most uplink.budget_sharing.max_gateways)', registers: r }),
    fleetBudgetIgnoredPeers: new Gauge({ name: 'gateway_fleet_budget_ignored_peers', help: 'Gateways announcing demand in this group beyond uplink.budget_sharing.max_gateways, not counted in the division (fake announcements or max_gateways too low)', registers: r }),
    fleetBrokerConnected: new Gauge({ name: 'gateway_fleet_broker_connected', help: '1 when the connection to the plant broker (fleet.mqtt) is up, else 0', registers: r }),
    fleetStatusPublished: new Counter({ name: 'gateway_fleet_status_published_total', help: 'Status messages published to the plant broker', registers: r }),

    // --- process ---
    configReloads: new Counter({ name: 'gateway_config_reloads_total', help: 'Configuration reloads (SIGHUP or a change of the file), by outcome (applied, unchanged, refused)', labelNames: ['outcome'], registers: r }),
    startTime: new Gauge({ name: 'gateway_start_time_seconds', help: 'Wall-clock time the gateway started', registers: r }),
  };
  return m;
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Name, type and help of every metric, for the README table and `--help`. */
export function metricDocs(): Array<{ name: string; type: string; help: string; labels: string[] }> {
  const metrics = createMetrics();
  return metrics.registry.getMetricsAsArray().map((metric) => {
    const any = metric as unknown as { name: string; help: string; labelNames?: string[]; constructor: { name: string } };
    return { name: any.name, type: any.constructor.name.toLowerCase(), help: any.help, labels: any.labelNames ?? [] };
  });
}
