import type { Source, SourceContext, SourceKind } from '../../core/source.js';
import type { MqttSection } from './config.js';

/** Builds the mqtt sources from the validated section (no I/O). Placeholder until the source lands. */
export function createMqttSources(_section: MqttSection, _makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  return [];
}
