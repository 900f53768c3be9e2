import type { GatewayConfig } from '../config/schema.js';
import { variableIndex, type VariableInfo } from './variable-index.js';

/** The variable index of the configuration in force, built again only when a reload replaced it. */
export class VariableIndexCache {
  private cached: { config: GatewayConfig; map: Map<string, VariableInfo> } | null = null;

  constructor(private readonly config: () => GatewayConfig) {}

  get(): Map<string, VariableInfo> {
    const cfg = this.config();
    if (!this.cached || this.cached.config !== cfg) this.cached = { config: cfg, map: variableIndex(cfg) };
    return this.cached.map;
  }
}
