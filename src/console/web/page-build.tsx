import { h } from 'preact';
import { useRef, useState } from 'preact/hooks';
import type { MergeRequest, MergeResponse } from '../api/build.js';
import { ConfigEditor } from './build-editor.js';
import { ModbusProbe } from './build-modbus.js';
import { OpcuaBrowse } from './build-opcua.js';
import { api } from './lib.js';

/**
 * "Add to configuration": merges a selection into the editor's text on the gateway
 * (console/config-merge.ts keeps the file's comments and layout), puts the result in the editor
 * and opens it with the diff of what was added. Nothing is written until Apply.
 */
export type AddToConfig = (what: Omit<MergeRequest, 'yaml'>) => Promise<MergeResponse>;

/** What the last "Add to configuration" did, shown above the editor. */
export interface Added {
  diff: string;
  target: string;
  created: boolean;
  added: number;
  skipped: MergeResponse['skipped'];
}

type Tab = 'opcua' | 'modbus' | 'config';

export function Build() {
  const [tab, setTab] = useState<Tab>('opcua');
  // The editor's text lives here so that the OPC UA and Modbus tabs can merge into it.
  const [text, setText] = useState('');
  const current = useRef(text);
  current.current = text;
  const [added, setAdded] = useState<Added | null>(null);
  const addToConfig: AddToConfig = async (what) => {
    const r = await api<MergeResponse>('/console/api/config/merge', { method: 'POST', body: { ...what, yaml: current.current } satisfies MergeRequest });
    setText(r.yaml);
    setAdded({ diff: r.diff, target: r.target, created: r.created, added: r.added, skipped: r.skipped });
    setTab('config');
    return r;
  };
  const tabs: Array<[Tab, string]> = [
    ['opcua', 'OPC UA'],
    ['modbus', 'Modbus probe'],
    ['config', 'Configuration'],
  ];
  return (
    <div class="stack">
      <div class="seg big">
        {tabs.map(([k, l]) => (
          <button class={tab === k ? 'on' : ''} onClick={() => setTab(k)} data-testid={`tab-${k}`}>
            {l}
          </button>
        ))}
      </div>
      <div hidden={tab !== 'opcua'}>
        <OpcuaBrowse addToConfig={addToConfig} />
      </div>
      <div hidden={tab !== 'modbus'}>
        <ModbusProbe addToConfig={addToConfig} text={text} />
      </div>
      <div hidden={tab !== 'config'}>
        <ConfigEditor
          text={text}
          setText={(t) => {
            setText(t);
            setAdded(null);
          }}
          added={added}
        />
      </div>
    </div>
  );
}
