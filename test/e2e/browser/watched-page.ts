import { mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';

/** A page whose console errors and Content-Security-Policy refusals are collected, across reloads too. */
export interface WatchedPage {
  page: Page;
  /** What the page's console reported as errors, uncaught exceptions and CSP refusals included. */
  consoleErrors: string[];
  /** What the page's Content-Security-Policy refused (an eval, an inline style). */
  policyViolations: string[];
}

export async function openWatchedPage(browser: Browser): Promise<WatchedPage> {
  const page = await browser.newPage();
  const watched: WatchedPage = { page, consoleErrors: [], policyViolations: [] };
  page.on('console', (message) => {
    if (message.type() === 'error') watched.consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => watched.consoleErrors.push(String(error)));
  await page.exposeFunction('reportPolicyViolation', (violation: string) => watched.policyViolations.push(violation));
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      const report = (window as unknown as { reportPolicyViolation: (violation: string) => void }).reportPolicyViolation;
      report(`${event.violatedDirective}: ${event.blockedURI} at ${event.sourceFile}:${event.lineNumber}:${event.columnNumber}`);
    });
  });
  return watched;
}

/** Saves a picture of a page (its viewport) or of one element, for the README (`npm run screenshot:*`). */
export async function screenshot(
  target: { screenshot(options: { path: string }): Promise<unknown> },
  path: string,
): Promise<void> {
  const file = resolve(path);
  await mkdir(dirname(file), { recursive: true });
  await target.screenshot({ path: file });
}

/**
 * For each test: a watched page of `browser()` handed to `use` before, and after it no CSP refusal, no console error
 * and no scripted model step left over (`pendingSteps()`), then the page closed.
 */
export function watchEachTest(browser: () => Browser, pendingSteps: () => number, use: (watched: WatchedPage) => void): void {
  let watched: WatchedPage;
  beforeEach(async () => {
    watched = await openWatchedPage(browser());
    use(watched);
  });
  afterEach(async () => {
    await watched.page.close();
    expect(watched.policyViolations).toEqual([]);
    expect(watched.consoleErrors).toEqual([]);
    expect(pendingSteps()).toBe(0);
  });
}
