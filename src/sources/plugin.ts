import type { z } from 'zod';
import type { Source } from '../core/source.js';
import { isRecord } from '../core/untyped.js';
import type { MakeContext } from './context.js';

/** What the configuration says one source delivers (sources/inventory.ts adds the kind). */
export interface SourceFacts {
  /** Configured machine variables of the source (empty when only known as data arrives). */
  variables: string[];
  /** Modbus: device name → its variables. */
  devices: Map<string, string[]>;
  historyAuto: boolean;
}

/**
 * One use of a machine variable in a source section: the index of the section's entry (a
 * generator, a server, a device, a connection), the setting's path (built only when asked for) and
 * the mapping's unit.
 */
export type UseVariable = (id: string, index: number, path: () => string, unit?: string) => void;

/** A name written in a section: a source name (unique across protocols), or a device's name. */
export interface NamedEntry {
  path: Array<string | number>;
  name: string;
  /** A device of a source (Modbus): a new entry should not reuse it, but it labels no source. */
  device?: true;
}

/**
 * Everything the gateway knows about one source protocol, in one place: adding a protocol is its
 * folder and one line in sources/plugins.ts. Every part is required, so a descriptor that forgets
 * one does not compile (test/sources/plugin-contract.test.ts).
 */
export interface SourcePlugin<K extends string = string, S extends z.ZodType = z.ZodType> {
  /** The config section's key, the sources' `kind` and their metric label. */
  readonly kind: K;
  /** How operators read the kind (gap annotations): "OPC UA". */
  readonly label: string;
  /** The section's schema (with its default or optional), owned by the protocol's config.ts. */
  readonly schema: S;
  /**
   * Builds the section's sources (no I/O). The protocol's module is loaded here, only when the
   * section has something to run, so a gateway without OPC UA never loads node-opcua.
   */
  create(section: z.output<S>, makeContext: MakeContext): Promise<Source[]>;
  /** Source name → what the configuration says it delivers. */
  inventory(section: z.output<S>): Array<[string, SourceFacts]>;
  /** Calls `use` for every machine variable the section maps, in config order; returns the open-ended settings. */
  mappedVariables(section: z.output<S>, use: UseVariable): string[];
  /** The source an entry (by mapping index) stands for, and whether it reports on change rather than on a period. */
  mappingSource(section: z.output<S>, index: number): { name: string | null; onChange: boolean } | undefined;
  /** The names written in a section, read from a document that may not be valid yet (the console's editor). */
  names(section: unknown): NamedEntry[];
  /** One line of protocol detail from what a source's status() reports in `detail`, or null. */
  statusSummary(detail: Record<string, unknown>): string | null;
}

/** Declares a descriptor, inferring its section type from the schema. */
export function definePlugin<K extends string, S extends z.ZodType>(plugin: SourcePlugin<K, S>): SourcePlugin<K, S> {
  return plugin;
}

/** `{name}` entries of a list found at `path` in a raw document, each with its path. */
export function namesIn(list: unknown, path: Array<string | number>): NamedEntry[] {
  if (!Array.isArray(list)) return [];
  return list.flatMap((e, i) => (isRecord(e) && typeof e.name === 'string' ? [{ path: [...path, i, 'name'], name: e.name }] : []));
}

