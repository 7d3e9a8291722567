import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it). CHROMIUM_PATH names another. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Flags for a quiet headless Chromium that talks to nothing but the page's own server. */
const FLAGS = [
  '--no-sandbox', // root in CI and here: Chromium's sandbox refuses to start as root
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--window-size=1400,900',
];

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

/** A real headless Chromium with a fresh profile, driven by puppeteer-core (which never downloads a browser). */
export async function launchBrowser(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`No Chromium at ${CHROMIUM_PATH}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  }
  const profile = await mkdtemp(join(tmpdir(), 'data-copilot-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    userDataDir: profile,
    args: FLAGS,
    defaultViewport: { width: 1400, height: 900 },
  });
  return {
    browser,
    async close() {
      await browser.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
