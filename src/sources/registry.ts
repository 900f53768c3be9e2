import { ConfigError } from '../core/errors.js';
import type { Source, SourceKind } from '../core/source.js';
import type { MakeContext } from './context.js';
import { pluginSections, SOURCE_SECTIONS, type SourceSection, type SourceSections } from './plugins.js';

export { SOURCE_SECTIONS, sourceSections, type SourceSection, type SourceSections } from './plugins.js';

/**
 * Builds the sources of one config section (no I/O). A protocol's module is loaded only when its
 * section is present, so a gateway without OPC UA does not pay for loading node-opcua at every start.
 */
export async function buildSourceSection(section: SourceSection, config: SourceSections, makeContext: MakeContext): Promise<Source[]> {
  const [plugin, own] = pluginSections(config).find(([p]) => p.kind === section)!;
  return plugin.create(own, makeContext);
}

/** Builds every configured source (no I/O). */
export async function buildSources(config: SourceSections, makeContext: MakeContext): Promise<Source[]> {
  const sources: Source[] = [];
  for (const section of SOURCE_SECTIONS) sources.push(...(await buildSourceSection(section, config, makeContext)));
  assertUniqueNames(sources);
  return sources;
}

/** Source names must be unique across protocols because they label metrics and status entries. */
export function assertUniqueNames(sources: ReadonlyArray<Pick<Source, 'name' | 'kind'>>): void {
  const seen = new Map<string, SourceKind>();
  const problems: string[] = [];
  for (const s of sources) {
    const other = seen.get(s.name);
    if (other) problems.push(`source name "${s.name}" is used twice (${other} and ${s.kind}); names label metrics and must be unique`);
    seen.set(s.name, s.kind);
  }
  if (problems.length > 0) throw new ConfigError(problems);
}
