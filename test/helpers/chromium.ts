import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** Debian's chromium, which `.ci/run` installs (scripts/install-test-deps); driven by playwright-core. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Whether the Chromium tests named `what` run: skipped with a visible notice without the browser,
 * except under CI, where a missing browser must fail the run.
 */
export function chromiumAvailable(what: string): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI) throw new Error(`${CHROMIUM} is missing but CI is set: ${what} must run in CI (apt-get install chromium)`);
  console.warn(`\n*** SKIPPING ${what} in Chromium: ${CHROMIUM} is not installed (apt-get install chromium) ***\n`);
  return false;
}

/** Headless, without anything that would reach the network by itself. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/**
 * A fresh profile (empty localStorage, no token) the size of a 1024x600 touch panel, and its page.
 * `cleanup` gets its closing and the check that the page threw nothing.
 */
export async function panelPage(browser: Browser, cleanup: Array<() => Promise<unknown>>): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1024, height: 600 }, hasTouch: true });
  cleanup.push(() => context.close());
  const page = await context.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  cleanup.push(async () => expect(pageErrors).toEqual([]));
  return { context, page };
}
