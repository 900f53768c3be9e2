import type { Source, SourceContext, SourceKind } from '../../core/source.js';
import type { OpcuaSection } from './config.js';

/** Builds the opcua sources from the validated section (no I/O). Placeholder until the source lands. */
export function createOpcuaSources(_section: OpcuaSection, _makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  return [];
}
