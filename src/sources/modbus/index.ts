import type { Source, SourceContext, SourceKind } from '../../core/source.js';
import type { ModbusSection } from './config.js';

/** Builds the modbus sources from the validated section (no I/O). Placeholder until the source lands. */
export function createModbusSources(_section: ModbusSection, _makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  return [];
}
