import type { GatewayConfig } from '../config/schema.js';
import { VariableIndex } from './variable-index.js';

/** The variable index of the configuration in force, built again only when a reload replaced it. */
export class VariableIndexCache {
  private cached: { config: GatewayConfig; index: VariableIndex } | null = null;

  constructor(private readonly config: () => GatewayConfig) {}

  get(): VariableIndex {
    const cfg = this.config();
    if (!this.cached || this.cached.config !== cfg) this.cached = { config: cfg, index: new VariableIndex(cfg) };
    return this.cached.index;
  }
}
