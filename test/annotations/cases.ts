/** Invalid annotation bodies, one per rule of interface §2.3 (and §2.1 for external_id), with the field the error must name. */
export const T0 = '2026-03-01T08:00:00.000Z';
export const T1 = '2026-03-01T09:00:00.000Z';
export const instant = { type: 'instant', occurred_at: T0, text: 'Tool change', machine_variables: [] };
export const range = { type: 'range', started_at: T0, ended_at: T1, text: 'Breakdown', machine_variables: [{ id: 'mvr_press1_state' }] };

export const INVALID_CASES: Array<{ name: string; body: unknown; field: string; message?: RegExp }> = [
  { name: 'body is not an object', body: [1, 2], field: '(body)' },
  { name: 'type missing', body: { text: 'x', machine_variables: [] }, field: 'type' },
  { name: 'type unknown', body: { ...instant, type: 'moment' }, field: 'type', message: /instant, range/ },
  { name: 'instant without occurred_at', body: { type: 'instant', text: 'x', machine_variables: [] }, field: 'occurred_at', message: /required/ },
  { name: 'occurred_at without offset', body: { ...instant, occurred_at: '2026-03-01T08:00:00' }, field: 'occurred_at', message: /offset/ },
  { name: 'occurred_at not a date', body: { ...instant, occurred_at: 'yesterday' }, field: 'occurred_at' },
  { name: 'occurred_at impossible date', body: { ...instant, occurred_at: '2026-02-30T08:00:00Z' }, field: 'occurred_at' },
  { name: 'occurred_at not an integer', body: { ...instant, occurred_at: 1.5 }, field: 'occurred_at' },
  { name: 'instant with started_at', body: { ...instant, started_at: T0 }, field: 'started_at', message: /belongs to "range"/ },
  { name: 'range without started_at', body: { type: 'range', ended_at: T1, text: 'x', machine_variables: [] }, field: 'started_at' },
  { name: 'range without ended_at', body: { type: 'range', started_at: T0, text: 'x', machine_variables: [] }, field: 'ended_at' },
  { name: 'range with occurred_at', body: { ...range, occurred_at: T0 }, field: 'occurred_at', message: /belongs to "instant"/ },
  { name: 'ended_at equal to started_at', body: { ...range, ended_at: T0 }, field: 'ended_at', message: /after started_at/ },
  { name: 'ended_at before started_at', body: { ...range, started_at: T1, ended_at: T0 }, field: 'ended_at', message: /after started_at/ },
  { name: 'ended_at equal at ms precision', body: { ...range, started_at: '2026-03-01T08:00:00.0001Z', ended_at: '2026-03-01T08:00:00.0004Z' }, field: 'ended_at' },
  { name: 'text missing', body: { type: 'instant', occurred_at: T0, machine_variables: [] }, field: 'text', message: /required/ },
  { name: 'text not a string', body: { ...instant, text: 42 }, field: 'text' },
  { name: 'text blank', body: { ...instant, text: ' \n\t ' }, field: 'text', message: /blank/ },
  { name: 'text over 5000 after trimming', body: { ...instant, text: `  ${'x'.repeat(5001)}  ` }, field: 'text', message: /5000/ },
  { name: 'machine_variables missing', body: { type: 'instant', occurred_at: T0, text: 'x' }, field: 'machine_variables', message: /required/ },
  { name: 'machine_variables not a list', body: { ...instant, machine_variables: 'mvr_press1_state' }, field: 'machine_variables' },
  { name: 'machine_variables over 100', body: { ...instant, machine_variables: Array.from({ length: 101 }, (_, i) => ({ id: `mvr_x${i}` })) }, field: 'machine_variables', message: /100/ },
  { name: 'machine variable without id', body: { ...instant, machine_variables: [{ id: 'mvr_a' }, {}] }, field: 'machine_variables[1].id' },
  { name: 'machine variable bad id', body: { ...instant, machine_variables: [{ id: 'mch_press1' }] }, field: 'machine_variables[0].id' },
  { name: 'machine variable extra field', body: { ...instant, machine_variables: [{ id: 'mvr_a', name: 'a' }] }, field: 'machine_variables[0].name' },
  { name: 'machine variable not an object', body: { ...instant, machine_variables: [7] }, field: 'machine_variables[0]' },
  { name: 'site both id and external_id', body: { ...instant, site: { id: 'ste_demo1', external_id: 'plant-demo' } }, field: 'site', message: /not both/ },
  { name: 'site empty', body: { ...instant, site: {} }, field: 'site' },
  { name: 'site not an object', body: { ...instant, site: 'ste_demo1' }, field: 'site' },
  { name: 'site bad id', body: { ...instant, site: { id: 'plant' } }, field: 'site.id' },
  { name: 'site bad external_id', body: { ...instant, site: { external_id: 'plant demo' } }, field: 'site.external_id' },
  { name: 'site unknown field', body: { ...instant, site: { name: 'x' } }, field: 'site.name' },
  { name: 'external_id null', body: { ...instant, external_id: null }, field: 'external_id', message: /null/ },
  { name: 'external_id empty', body: { ...instant, external_id: '' }, field: 'external_id' },
  { name: 'external_id too long', body: { ...instant, external_id: 'a'.repeat(101) }, field: 'external_id', message: /1 to 100/ },
  { name: 'external_id bad characters', body: { ...instant, external_id: 'line3/annot.1' }, field: 'external_id', message: /letters, digits/ },
  { name: 'unknown field', body: { ...instant, colour: 'red' }, field: 'colour', message: /unknown/ },
  { name: 'unknown machine', body: { ...instant, machine: 'lathe9' }, field: 'machine' },
];

