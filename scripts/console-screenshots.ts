/**
 * Regenerates the console screenshots in docs/console/ from a running gateway (the demo):
 *
 *   npm start                                   # or: edge-gateway demo --ports-from 27000
 *   npx tsx scripts/console-screenshots.ts [--url http://127.0.0.1:8080] [--out docs/console]
 *
 * Give the demo a minute first, so the charts have points. Needs Chromium at /usr/bin/chromium
 * (apt-get install chromium), driven by playwright-core.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const { values } = parseArgs({ options: { url: { type: 'string', default: 'http://127.0.0.1:8080' }, out: { type: 'string', default: 'docs/console' }, chromium: { type: 'string', default: '/usr/bin/chromium' } } });
const base = values.url!.replace(/\/$/, '');
mkdirSync(values.out!, { recursive: true });

const browser = await chromium.launch({
  executablePath: values.chromium,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 900 }, deviceScaleFactor: 1 })).newPage();
  const shot = async (name: string, hash: string, ready: () => Promise<unknown>) => {
    await page.goto(`${base}/console#/${hash}`);
    await ready();
    await page.waitForTimeout(1_500); // one or two live ticks, so values and ages are current
    await page.screenshot({ path: join(values.out!, `${name}.png`) });
    console.log(`wrote ${join(values.out!, `${name}.png`)}`);
  };
  await shot('overview', 'overview', () => page.getByTestId('sources-table').waitFor());
  await shot('variables', 'variables', () => page.getByTestId('var-mvr_press1_temperature').waitFor());
  await shot('variable', 'variables/mvr_press1_temperature', () => page.getByTestId('trend-chart').waitFor());
  await shot('sources', 'sources', () => page.getByTestId('source-card-press1').waitFor());
  await shot('set-aside', 'set-aside', () => page.getByTestId('set-aside-total').waitFor());
  await shot('gaps', 'gaps', () => page.getByTestId('gaps-table').waitFor());
  await shot('annotations', 'annotations', () => page.locator('main').waitFor());
  await page.goto(`${base}/console#/build`);
  await page.getByTestId('opcua-browse').click();
  await page.getByTestId('opcua-tree').waitFor({ timeout: 30_000 });
  // The tree is loaded one level at a time: open Press1 and tick three of its variables.
  await page.getByTestId('expand-Press1').click();
  await page.getByTestId('node-Press1/Temperature').waitFor({ timeout: 30_000 });
  // Temperature is mapped already (flagged, left out on Add); the setpoint and Running are new.
  for (const n of ['Temperature', 'TemperatureSetpoint', 'Running']) await page.getByTestId(`tick-Press1/${n}`).check();
  await page.screenshot({ path: join(values.out!, 'build-opcua.png'), fullPage: false });
  console.log(`wrote ${join(values.out!, 'build-opcua.png')}`);
  // Add to configuration: the editor opens with the diff of what was added (nothing written yet).
  await page.getByTestId('add-opcua').click();
  await page.getByTestId('added-to-config').waitFor({ timeout: 15_000 });
  await page.screenshot({ path: join(values.out!, 'build-added.png') });
  console.log(`wrote ${join(values.out!, 'build-added.png')}`);
  await page.getByTestId('tab-modbus').click();
  // The probe starts on the demo's configured Mixer 1; its power (float32, word-swapped) picked as a mapping line.
  await page.getByTestId('probe-configured').waitFor({ timeout: 15_000 });
  await page.getByTestId('probe-run').click();
  await page.getByTestId('probe-table').waitFor({ timeout: 15_000 });
  await page.getByTestId('cell-3-float32-CDAB').click();
  await page.getByTestId('pick-var-holding-3').fill('mvr_mixer1_power');
  await page.getByTestId('pick-flags-holding-3').waitFor({ timeout: 15_000 });
  await page.screenshot({ path: join(values.out!, 'build-modbus.png') });
  console.log(`wrote ${join(values.out!, 'build-modbus.png')}`);
} finally {
  await browser.close();
}
