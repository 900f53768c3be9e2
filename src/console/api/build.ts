/**
 * The Build page's model (Build the config → OPC UA, Modbus probe): the organisation's catalog,
 * the OPC UA browse and snippet, the Modbus probe. Built by console/build-routes.ts,
 * console/build-tools.ts and console/catalog.ts; read by console/web/page-build.tsx.
 */
import type { CandidateRow } from '../../sources/modbus/probe-format.js';

/** GET /console/api/catalog, POST /console/api/catalog/refresh: the organisation's catalog (GET /machines, /machine-variables, every page). */
export interface Catalog {
  machines: Array<{ id: string; name: string }>;
  variables: Array<{ id: string; name: string; machine: string | null; unit: string | null }>;
  /** When it was read from the service (epoch ms). */
  read_at: number;
}

/**
 * A node of the browse (sources/opcua/browse.ts BrowsedNode) with its `nsu=` form (what the snippet
 * writes) and whether it can be mapped. Spelled out rather than imported: browse.ts loads
 * node-opcua's types, which the browser code's typecheck need not read; build-tools.ts assigns a
 * BrowsedNode to it, so a field renamed there fails the typecheck all the same.
 */
export interface BrowseNode {
  nodeId: string;
  browseName: string;
  displayName: string;
  nodeClass: 'Object' | 'Variable';
  depth: number;
  /** Slash-separated browse names from the root. */
  path: string;
  dataType?: string;
  numeric?: boolean;
  scalar?: boolean;
  value?: string;
  /** Children other than properties (an object or variable the tree can expand); undefined: not known (the browse stopped early). */
  hasChildren?: boolean;
  /** Browse names of its properties (EURange, EngineeringUnits ...), not listed as nodes unless include_properties. */
  properties?: string[];
  /** A variable's EngineeringUnits (`°C`) and EURange. */
  unit?: string;
  range?: { low: number; high: number };
  nsu: string;
  mappable: boolean;
  /** The comment written after the node id when it is mapped: `Press1/Temperature (Double, °C)`. */
  comment: string;
}

export type SecurityMode = 'None' | 'Sign' | 'SignAndEncrypt';
export const SECURITY_MODE_CHOICES: readonly SecurityMode[] = ['None', 'Sign', 'SignAndEncrypt'];
/**
 * The policies the browse form offers: those opcua.servers[].security_policy accepts
 * (sources/opcua/config.ts SECURITY_POLICIES, which build-tools.ts checks this list against at
 * compile time; written out here because the browser code cannot load the config schema).
 */
export const SECURITY_POLICY_CHOICES = ['None', 'Basic256Sha256', 'Aes128_Sha256_RsaOaep', 'Aes256_Sha256_RsaPss'] as const;

/**
 * POST /console/api/opcua/browse: the children of `root` (the tree asks one level at a time), on a
 * session of its own with the given security and user. The password is used for that session and
 * nowhere else: never stored, logged or sent back (build-tools.ts browseOpcua).
 */
export interface BrowseRequest {
  endpoint: string;
  /** Node id (`ns=`, `i=` or `nsu=` form); default i=85, the Objects folder. */
  root?: string;
  /** Levels below root (default 1). */
  depth?: number;
  max_nodes?: number;
  security_mode?: SecurityMode;
  /** Default: None with mode None, Basic256Sha256 otherwise. */
  security_policy?: (typeof SECURITY_POLICY_CHOICES)[number];
  /** User name; anonymous when absent. */
  user?: string;
  password?: string;
  /** Trust an unknown server certificate and remember it in the console's trust folder (<data_dir>/console/pki). */
  trust_server?: boolean;
  /** List property nodes too (default: they are details of their parent). */
  include_properties?: boolean;
  /** Browse path of root, put before the paths of the nodes found (the tree asks one level at a time). */
  path?: string;
}

/** POST /console/api/opcua/browse. */
export interface BrowseResponse {
  endpoint: string;
  security_mode: SecurityMode;
  security_policy: string;
  /** The user name the session logged in with (absent: anonymous). */
  user?: string;
  /** The node whose children these are (as asked). */
  root: string;
  namespaces: string[];
  truncated: boolean;
  /** Why the browse stopped early (issue 21 §2): the node limit or the time limit; null when it ran to the end. */
  stopped_by: 'max_nodes' | 'timeout' | null;
  nodes: BrowseNode[];
}

/** One ticked node sent for the snippet. */
export interface SnippetNode {
  node_id: string;
  variable: string;
  comment?: string;
}

/** POST /console/api/opcua/snippet: the request and the answer. */
export interface SnippetRequest {
  name: string;
  endpoint: string;
  security_mode?: 'None' | 'Sign' | 'SignAndEncrypt';
  nodes: SnippetNode[];
}
export interface SnippetResponse {
  yaml: string;
}

export type ModbusTable = 'coil' | 'discrete_input' | 'holding' | 'input';

/** POST /console/api/modbus/probe: the request and the answer. */
export interface ProbeRequest {
  device: string;
  unit_id?: number;
  table?: ModbusTable;
  address: number;
  count?: number;
  timeout_ms?: number;
}
export type { CandidateRow };
export interface ProbeResponse {
  device: string;
  table: ModbusTable;
  /** Coils and discrete inputs: one 0/1 per address. */
  bits?: number[];
  /** Registers: the raw words, and every type × byte order decoded. */
  registers: number[];
  candidates: CandidateRow[];
}

/**
 * GET /console/api/modbus/devices: the Modbus devices of the running configuration, for the
 * probe's device list (issue 24 §3: the probe starts on the configured device). Addresses are
 * protocol addresses (0-65535), as the probe reads them.
 */
export interface ConfiguredModbusDevice {
  name: string;
  /** The probe's device URL: tcp://host:port, rtu-over-tcp://host:port, rtu:PATH?baud=...&parity=... */
  url: string;
  transport: 'tcp' | 'rtu' | 'rtu_over_tcp';
  unit_id: number;
  address_base: 0 | 1;
  /** Byte order of the device's registers when a register does not say. */
  byte_order: string;
  /** What the device reads now. */
  registers: Array<{ variable: string; table: ModbusTable; address: number; count: number; type: string; bit?: number }>;
}
export interface ModbusDevicesResponse {
  devices: ConfiguredModbusDevice[];
}

/** A device for the merge: its address settings, or the probe's device URL (parsed as `modbus-probe --device` reads it). */
export type MergeModbusDevice =
  | { name: string; transport: 'tcp' | 'rtu' | 'rtu_over_tcp'; host?: string; port?: number; path?: string; unit_id: number }
  | { name: string; url: string; unit_id: number };

/**
 * POST /console/api/config/merge: "Add to configuration" (issue 24 §3). The editor's text and
 * what to add (OPC UA nodes of one server, or Modbus registers of one device); the answer is the
 * merged text (console/config-merge.ts) and the diff from the posted text. Nothing is written:
 * the text goes back into the editor, and Apply shows the diff against the file again.
 */
export interface MergeRequest {
  yaml: string;
  opcua?: {
    server: { name: string; endpoint: string; security_mode?: 'None' | 'Sign' | 'SignAndEncrypt'; security_policy?: string; user?: string };
    /** `unit`: written as the node's unit setting (the server's EngineeringUnits, else the catalog's). */
    nodes: Array<{ node_id: string; variable: string; unit?: string; comment?: string }>;
  };
  modbus?: {
    device: MergeModbusDevice;
    /** `address` is the protocol address; the merge writes it in the device's address_base. */
    registers: Array<{ variable: string; table: ModbusTable; address: number; type?: string; bit?: number; byte_order?: string; scale?: number; offset?: number; unit?: string; comment?: string }>;
  };
}
export interface MergeResponse {
  yaml: string;
  /** Unified diff from the posted text to the merged one ('' when nothing was added). */
  diff: string;
  /** Setting that received the mappings (`opcua.servers[1]`), and whether the merge created it. */
  target: string;
  created: boolean;
  added: number;
  /** Left out, and why; `index` is the position in the request's nodes or registers. */
  skipped: Array<{ what: string; reason: string; index: number }>;
}

/**
 * POST /console/api/config/mappings: the mappings of the editor's text (docs/mappings-csv.md).
 * `mapped` is every variable a source feeds, with the setting that feeds it, so the Build page
 * can flag a variable mapped twice before it is added.
 */
export interface MappingsRequest {
  yaml: string;
}
export interface MappingsResponse {
  /** The mappings as CSV, the header first (comma-separated, CRLF, no byte order mark). */
  csv: string;
  rows: number;
  mapped: Record<string, string>;
}

/**
 * POST /console/api/config/import-csv: CSV rows merged into the editor's text; nothing is written.
 * Rows that change a mapping the text has are listed in `changes`, and made only with `update`.
 */
export interface ImportCsvRequest {
  yaml: string;
  csv: string;
  update?: boolean;
}
export interface ImportCsvResponse {
  yaml: string;
  /** Unified diff from the posted text ('' when nothing was added). */
  diff: string;
  rows: number;
  added: number;
  /** Mappings changed in the text (only with `update`). */
  updated: number;
  unchanged: number;
  /** Rows left out: row number as the spreadsheet shows it (header = 1), the column and value at fault. */
  problems: Array<{ row: number; field: string | null; value: string | null; message: string }>;
  more_problems: number;
  /** Rows that change a mapping of the same source: what it was, what it becomes, whether the text has it now. */
  changes: Array<{ row: number; variable: string; setting: string; before: string; after: string; applied: boolean }>;
  more_changes: number;
  /** Rows whose variable the organisation's catalog does not list; null: the catalog has not been read. */
  not_in_catalog: Array<{ row: number; variable: string }> | null;
  more_not_in_catalog: number;
  /** Rows whose unit is not the one the catalog gives their variable; null: the catalog has not been read. */
  other_units: Array<{ row: number; variable: string; unit: string; catalog: string }> | null;
  more_other_units: number;
  targets: Array<{ source: string; target: string; created: boolean; added: number }>;
}
