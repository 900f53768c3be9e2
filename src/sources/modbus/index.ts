import { formatPath } from '../../config/issues.js';
import { ConfigError } from '../../core/errors.js';
import type { Source, SourceKind } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import type { ModbusSection } from './config.js';
import { planSection } from './plan.js';
import { ModbusSource } from './source.js';

export { ModbusSource } from './source.js';

/**
 * Builds the Modbus source from the validated section (no I/O). The schema already reports the
 * problems `planSection` finds; they are checked again here so a section built in code cannot
 * start half-planned.
 */
export function createModbusSources(section: ModbusSection, makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  if (!section) return [];
  const plan = planSection(section);
  if (plan.problems.length > 0) throw new ConfigError(plan.problems.map((p) => `${formatPath(['modbus', ...p.path])}: ${p.message}`));
  const ctx = makeContext(section.name, 'modbus');
  for (const w of plan.warnings) ctx.logger.warn({ setting: formatPath(['modbus', ...w.path]) }, `${formatPath(['modbus', ...w.path])}: ${w.message}`);
  return [new ModbusSource(section, plan, ctx)];
}
