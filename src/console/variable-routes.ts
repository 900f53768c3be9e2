import { once } from 'node:events';
import type { Clock } from '../core/clock.js';
import { HttpError, type LocalHttpServer } from '../http/server.js';
import type { Delivery, VariableDetailResponse, VariableRow, VariablesResponse } from './api/variables.js';
import type { ConsoleBufferReads } from './buffer-reads.js';
import type { ConsoleCatalog } from './catalog.js';
import { entryYaml } from './config-source.js';
import { QualityReads, type QualityTables } from './quality-reads.js';
import type { RefusalLog } from './refusal-log.js';
import type { VariableIndexCache } from './variable-index-cache.js';
import { BUCKET_MS, type ValueRing } from './value-ring.js';

export interface VariableRouteDeps {
  boot: string;
  clock: Clock;
  index: VariableIndexCache;
  ring: ValueRing;
  refusals: RefusalLog;
  /** The running sources' quality tables. */
  quality: QualityTables;
  buffer: ConsoleBufferReads;
  catalog: ConsoleCatalog;
  /** The configuration file's text now (null: no file, or unreadable): the variable's entry is shown as written there. */
  configText: () => string | null;
}

/** Points of the sparkline sent with the variable list: 30 buckets of 10 s, the last 5 minutes. */
const SPARK_POINTS = 30;
/** Rows written to the answer at a time. */
const SLICE = 250;

/** The Variables page: every variable, mapped or seen, and one variable's detail. */
export function registerVariableRoutes(http: LocalHttpServer, deps: VariableRouteDeps): void {
  const { ring, refusals, catalog } = deps;

  /**
   * Every variable, mapped or seen, streamed in slices of rows written as text: 5,000 rows never
   * exist at once as objects or as one big string (the peak of that was most of what the console
   * cost the gateway's memory). Each row is one object of the shared model, serialized at once.
   */
  http.route('GET', '/console/api/variables', async ({ res }) => {
    catalog.warm(); // machine names once the service answers; never blocks
    const catalogMachines = catalog.machines();
    const catalogUnits = catalog.units();
    const info = deps.index.get();
    const now = deps.clock.now();
    const queue = deps.buffer.queue();
    const setAside = deps.buffer.setAsideByVariable();
    const qualities = new QualityReads(deps.quality, now);
    const head: Omit<VariablesResponse, 'variables'> = { boot: deps.boot, now, bucket_ms: BUCKET_MS, oldest_queued_ts: queue.oldestTs };
    let rows: string[] = [];
    let first = true;
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.write(`${JSON.stringify(head).slice(0, -1)},"variables":[`);
    const flush = async () => {
      if (rows.length === 0) return;
      const ok = res.write(`${first ? '' : ','}${rows.join(',')}`);
      first = false;
      rows = [];
      if (!ok) await once(res, 'drain');
    };
    const row = (id: string) => {
      const i = info.source(id);
      const e = ring.get(id);
      const aside = setAside.get(id) ?? 0;
      // Delivered once older than the oldest sample still queued (the queue is sent oldest first).
      const delivery: Delivery = aside ? 'set_aside' : !e ? 'none' : queue.oldestTs === null || e.lastTs < queue.oldestTs ? 'delivered' : 'queued';
      const q = qualities.of(id, i?.source ?? null);
      const r: VariableRow = {
        id,
        idx: e?.idx ?? -1,
        // The running source that holds its quality (a Modbus device's variables belong to the `modbus` source, the device beside it).
        source: q?.source ?? i?.source ?? null,
        machine: catalogMachines?.get(id) ?? info.machineOf(id),
        mapped: i !== undefined,
        on_change: i ? i.onChange : true,
        quality: q?.quality ?? 'none',
        quality_since: q?.since ?? null,
        device: q?.device ?? null,
        value: e ? Number(e.last.toPrecision(7)) : null,
        unit: info.unitOf(id) ?? catalogUnits?.get(id) ?? null,
        ts: e?.lastTs ?? null,
        rate: e ? Number(ring.rate(e, now).toFixed(3)) : 0,
        refused: refusals.of(id)?.byReason ?? null,
        set_aside: aside,
        delivery,
        spark: e ? ring.spark(e, SPARK_POINTS) : [],
      };
      rows.push(JSON.stringify(r));
    };
    for (const id of info.keys()) {
      row(id);
      if (rows.length >= SLICE) await flush();
    }
    for (const e of ring.entries()) {
      if (info.has(e.id)) continue;
      row(e.id);
      if (rows.length >= SLICE) await flush();
    }
    // Variables a source named from its data whose values were all refused (bad, uncertain): they have a quality and no sample.
    for (const id of qualities.unlisted((x) => info.has(x) || ring.get(x) !== undefined)) {
      row(id);
      if (rows.length >= SLICE) await flush();
    }
    await flush();
    res.end(']}');
  }, { name: 'console variables', access: 'confidential' });

  http.route('GET', '/console/api/variables/:id', ({ params }) => {
    const id = params.id;
    const index = deps.index.get();
    const i = index.info(id);
    const e = ring.get(id);
    const now = deps.clock.now();
    const q = new QualityReads(deps.quality, now).of(id, i?.source ?? null);
    if (!i && !e && !q) throw new HttpError(404, 'not_found', `no variable ${id} is mapped or has been seen`);
    const configured = index.unitOf(id);
    const fromCatalog = catalog.unitOf(id);
    const json: VariableDetailResponse = {
      id,
      source: q?.source ?? i?.source ?? null,
      kind: i?.kind ?? null,
      machine: catalog.machineOf(id) ?? i?.machine ?? null,
      settings: i?.settings ?? [],
      config: i?.config ?? null,
      config_yaml: i ? entryYaml(deps.configText(), i) : null,
      value: e?.last ?? null,
      unit: configured ?? fromCatalog,
      unit_configured: configured,
      unit_catalog: fromCatalog,
      quality: q?.quality ?? 'none',
      quality_since: q?.since ?? null,
      device: q?.device ?? null,
      ts: e?.lastTs ?? null,
      total: e?.total ?? 0,
      rate: e ? ring.rate(e, now) : 0,
      bucket_ms: BUCKET_MS,
      trend: e ? ring.trend(e) : [],
      refusals: refusals.of(id) ?? { byReason: {}, last: [] },
    };
    return { json };
  }, { name: 'console variable', access: 'confidential' });
}
