import type { Source, SourceKind } from '../../core/source.js';
import type { SourceContext } from '../context.js';
import type { OpcuaSection } from './config.js';
import { OpcuaSource } from './source.js';

export { OpcuaSource } from './source.js';
export type { OpcuaSection, OpcuaServerConfig, OpcuaNodeConfig } from './config.js';

/**
 * Builds one source per configured OPC UA server (no I/O: certificates are created and the server
 * contacted only when the source starts).
 */
export function createOpcuaSources(section: OpcuaSection, makeContext: (name: string, kind: SourceKind) => SourceContext): Source[] {
  return section.servers.map((cfg, i) => new OpcuaSource(cfg, makeContext(cfg.name, 'opcua'), { path: `opcua.servers[${i}]`, pkiDir: section.pki_dir }));
}
