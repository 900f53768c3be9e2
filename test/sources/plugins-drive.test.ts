import { describe, expect, it, vi } from 'vitest';

/**
 * Everything that needs every source protocol is driven by the one list (src/sources/plugins.ts):
 * a fake protocol added to the list, and nowhere else, is configured, validated, built, inventoried,
 * mapped, reloaded, labelled, summarised in status and known to the console.
 */
vi.mock('../../src/sources/plugins.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/sources/plugins.js')>();
  const { z } = await import('zod');
  const { definePlugin, namesIn } = await import('../../src/sources/plugin.js');
  const fake = definePlugin({
    kind: 'fake',
    label: 'Fake bus',
    schema: z.array(z.strictObject({ name: z.string(), variable: z.string(), unit: z.string().optional() })).default([]),
    create: async (section, makeContext) =>
      section.map((e) => {
        const ctx = makeContext(e.name, 'fake');
        return { name: e.name, kind: 'fake', start: async () => undefined, close: async () => undefined, status: () => ctx.stats.snapshot({ fake_detail: 7 }) };
      }),
    inventory: (section) => section.map((e) => [e.name, { variables: [e.variable], devices: new Map(), historyAuto: false }]),
    mappedVariables(section, use) {
      section.forEach((e, i) => use(e.variable, i, () => `fake[${i}].variable`, e.unit));
      return section.map((_, i) => `fake[${i}]`);
    },
    mappingSource: (section, index) => (section[index] ? { name: section[index].name, onChange: true } : undefined),
    names: (section) => namesIn(section, ['fake']),
    statusSummary: (d) => `fake detail ${String(d.fake_detail)}`,
  });
  (real.SOURCE_PLUGINS as unknown as unknown[]).push(fake);
  return { ...real, SOURCE_SECTIONS: [...real.SOURCE_SECTIONS, 'fake'] };
});

const { validateConfig } = await import('../../src/config/load.js');
const { ConfigError } = await import('../../src/core/errors.js');
const { SourceStats } = await import('../../src/core/source.js');
const { createMetrics } = await import('../../src/core/metrics.js');
const { systemClock } = await import('../../src/core/clock.js');
const { silentLogger } = await import('../../src/core/logger.js');
const { buildSources } = await import('../../src/sources/registry.js');
const { describeSources } = await import('../../src/sources/inventory.js');
const { mappedVariables } = await import('../../src/sources/mapped-variables.js');
const { kindLabel, pluginOf } = await import('../../src/sources/plugins.js');
const { appliedConfig, planReload } = await import('../../src/runtime/reload-plan.js');
const { VariableIndex } = await import('../../src/console/variable-index.js');
const { mergeOpcuaNodes } = await import('../../src/console/config-merge.js');
const { testConfigInput } = await import('../helpers/gateway.js');

const EMULATOR = { baseUrl: 'http://127.0.0.1:1/tracking/v1', authUrl: 'http://127.0.0.1:1' };
const input = (fake: unknown, more: Record<string, unknown> = {}) => testConfigInput(EMULATOR, '/tmp/unused', { generator: [{ name: 'gen', variables: ['mvr_gen'] }], ...more, fake } as never);

describe('a protocol added only to the descriptor list', () => {
  const config = validateConfig(input([{ name: 'bus1', variable: 'mvr_bus', unit: 'bar' }])).config as ReturnType<typeof validateConfig>['config'] & { fake: unknown };

  it('has its section in the configuration schema, defaulted and with unique names across protocols', () => {
    expect(config.fake).toEqual([{ name: 'bus1', variable: 'mvr_bus', unit: 'bar' }]);
    expect((validateConfig(input(undefined)).config as { fake?: unknown }).fake).toEqual([]);
    expect(() => validateConfig(input([{ name: 'gen', variable: 'mvr_x' }]))).toThrow(ConfigError);
    expect(() => validateConfig(input([{ name: 'gen', variable: 'mvr_x' }]))).toThrow(/fake\[0\]\.name.*"gen" is already the name of generator\[0\]\.name/s);
  });

  it('is built with the others, in the inventory and in the mapped variables', async () => {
    const metrics = createMetrics();
    const sources = await buildSources(config, (name, kind) => ({ sink: { append: async () => undefined }, logger: silentLogger(), stats: new SourceStats(name, kind, metrics, systemClock), metrics, clock: systemClock, dataDir: '/nonexistent' }));
    expect(sources.map((s) => [s.name, s.kind])).toEqual([['gen', 'generator'], ['bus1', 'fake']]);
    expect(describeSources(config).get('bus1')).toEqual({ kind: 'fake', variables: ['mvr_bus'], devices: new Map(), historyAuto: false });
    const mapped = mappedVariables(config);
    expect(mapped.variables.get('mvr_bus')).toEqual(['fake[0].variable']);
    expect(mapped.units.get('mvr_bus')).toEqual([{ unit: 'bar', setting: 'fake[0].unit' }]);
    expect(mapped.openEnded).toEqual(['fake[0]']);
    // Its status detail is summarised by its own descriptor.
    expect(pluginOf('fake')?.statusSummary(sources[1].status().detail as Record<string, unknown>)).toBe('fake detail 7');
  });

  it('is reloaded in place, and labelled for operators', () => {
    const next = validateConfig(input([{ name: 'bus2', variable: 'mvr_bus' }])).config as typeof config;
    const plan = planReload(config, next);
    expect(plan.sourceSections).toEqual(['fake']);
    expect(plan.restartRequired).toEqual([]);
    expect((appliedConfig(config, next) as typeof config).fake).toEqual([{ name: 'bus2', variable: 'mvr_bus' }]);
    expect(kindLabel('fake')).toBe('Fake bus');
  });

  it('is known to the console: its variables have a source, its names are taken', () => {
    expect(new VariableIndex(config).source('mvr_bus')).toEqual({ source: 'bus1', kind: 'fake', onChange: true });
    const merged = mergeOpcuaNodes('fake:\n  - name: bus1\n    variable: mvr_bus\n', { name: 'bus1', endpoint: 'opc.tcp://127.0.0.1:4840' }, [{ node_id: 'ns=1;s=A', variable: 'mvr_a' }]);
    expect(merged.yaml).toMatch(/name: bus1_2/);
  });
});
