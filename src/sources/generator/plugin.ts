import { num } from '../../core/untyped.js';
import { definePlugin, namesIn } from '../plugin.js';
import { generatorSectionSchema, generatorVariables } from './config.js';
import { createGeneratorSources } from './index.js';

/** Synthetic samples: small and dependency-free, so built without a lazy import. */
export const generatorPlugin = definePlugin({
  kind: 'generator',
  label: 'generator',
  schema: generatorSectionSchema,
  create: async (section, makeContext) => createGeneratorSources(section, makeContext),
  inventory: (section) => section.map((g) => [g.name, { variables: [...generatorVariables(g)], devices: new Map(), historyAuto: false }]),
  mappedVariables(section, use) {
    section.forEach((g, i) => {
      if (Array.isArray(g.variables)) g.variables.forEach((id, j) => use(id, i, () => `generator[${i}].variables[${j}]`));
      // A {prefix, count} range is one setting; every id of it points back to that setting.
      else for (const id of generatorVariables(g)) use(id, i, () => `generator[${i}].variables`);
    });
    return [];
  },
  mappingSource: (section, index) => (section[index] ? { name: section[index].name, onChange: false } : undefined),
  names: (section) => namesIn(section, ['generator']),
  statusSummary: (d) => `${num(d.variables) ?? '?'} variables every ${num(d.interval_ms) ?? '?'} ms`,
});
