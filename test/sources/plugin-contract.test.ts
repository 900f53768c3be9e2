import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * A source protocol's descriptor (src/sources/plugin.ts) must name every part the gateway needs of
 * it: one that forgets a part does not compile. Each fixture below is a complete descriptor less
 * one part, type-checked in memory with the project's compiler options.
 */
const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');

const PARTS: Record<string, string> = {
  kind: `kind: 'fake'`,
  label: `label: 'Fake'`,
  schema: `schema`,
  create: `create: async (section) => section.map(() => { throw new Error('not built in this test'); })`,
  inventory: `inventory: (section) => section.map((e) => [e.name, { variables: [e.variable], devices: new Map(), historyAuto: false }])`,
  mappedVariables: `mappedVariables(section, use) { section.forEach((e, i) => use(e.variable, i, () => \`fake[\${i}].variable\`)); return []; }`,
  mappingSource: `mappingSource: (section, index) => (section[index] ? { name: section[index].name, onChange: false } : undefined)`,
  names: `names: () => []`,
  statusSummary: `statusSummary: (detail) => String(detail.x ?? '')`,
};

function fixture(without: string | null): string {
  const parts = Object.entries(PARTS).filter(([k]) => k !== without).map(([, v]) => `  ${v},`);
  return [
    `import { z } from 'zod';`,
    `import { definePlugin } from '../../src/sources/plugin.js';`,
    `const schema = z.array(z.strictObject({ name: z.string(), variable: z.string() })).default([]);`,
    `export const fake = definePlugin({`,
    ...parts,
    `});`,
  ].join('\n');
}

/** Type-checks each fixture (virtual files beside this test) and returns its diagnostics as text. */
function check(fixtures: Record<string, string>): Record<string, string[]> {
  const configFile = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  // The fixtures live beside this test, outside src/ (the project's rootDir); nothing is emitted.
  const { rootDir: _rootDir, outDir: _outDir, ...options } = ts.parseJsonConfigFileContent(configFile.config, ts.sys, ROOT).options;
  const files = Object.fromEntries(Object.entries(fixtures).map(([name, text]) => [join(HERE, `${name}.fixture.ts`), text]));
  const host = ts.createCompilerHost({ ...options, noEmit: true });
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (file, lang, ...rest) => (file in files ? ts.createSourceFile(file, files[file], lang) : getSourceFile(file, lang, ...rest));
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (file) => file in files || fileExists(file);
  const program = ts.createProgram(Object.keys(files), { ...options, noEmit: true }, host);
  return Object.fromEntries(
    Object.entries(files).map(([file]) => [
      file.slice(HERE.length + 1).replace('.fixture.ts', ''),
      [...program.getSyntacticDiagnostics(program.getSourceFile(file)), ...program.getSemanticDiagnostics(program.getSourceFile(file))].map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    ]),
  );
}

describe('source plugin descriptors', () => {
  it('compile when complete, and not when any one part is missing', () => {
    const without = Object.keys(PARTS);
    const result = check({ complete: fixture(null), ...Object.fromEntries(without.map((k) => [`without-${k}`, fixture(k)])) });
    // The complete one compiles: the section's type comes from the schema (e.name, e.variable).
    expect(result.complete).toEqual([]);
    for (const part of without) {
      const errors = result[`without-${part}`];
      expect(errors.length, `a descriptor without ${part} compiles`).toBeGreaterThan(0);
      expect(errors.join('\n'), part).toMatch(new RegExp(`\\b${part}\\b`));
    }
  }, 60_000);
});
