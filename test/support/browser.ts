import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';

/**
 * The Chromium the browser tests drive: CHROMIUM_PATH when set (e.g. Debian's `/usr/bin/chromium`), otherwise the
 * one shipped inside the `@sparticuz/chromium` npm package, unpacked to the temp folder on first use, so that
 * `npm ci && npm test` needs nothing outside npm.
 */
async function chromiumPath(): Promise<string> {
  const fromEnv = process.env.CHROMIUM_PATH;
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`CHROMIUM_PATH names no file: ${fromEnv}`);
    return fromEnv;
  }
  // ESM-only package: TypeScript keeps this a real import() in CommonJS output under nodenext.
  const { default: packaged } = await import('@sparticuz/chromium');
  return packaged.executablePath();
}

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
  const executablePath = await chromiumPath();
  const profile = await mkdtemp(join(tmpdir(), 'data-copilot-chromium-'));
  const browser = await puppeteer.launch({
    executablePath,
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
