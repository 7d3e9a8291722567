import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { HTTPRequest, Page } from 'puppeteer-core';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { startAppWithMockLlm } from '../../support/agent-fixtures';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { listen } from '../../support/chat-helpers';
import { asAdmin, createObject, fieldSpec } from '../../support/fixtures';
import { MockLlmServer, MockReply } from '../../support/mock-llm.server';
import { OidcIssuer, TEST_AUDIENCE } from '../../support/oidc-issuer';
import { bodyOf } from '../../support/responses';
import { bearer, type TestApp } from '../../support/test-app';
import { watchEachTest, type WatchedPage } from './watched-page';

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

const CLIENT_ID = 'copilot-playground';
/** The provider's access tokens live this long: the page renews them halfway. */
const TOKEN_TTL_S = 8;

describe('playground: a sign-in outlives its access token', () => {
  let idp: OidcIssuer;
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let chromium: TestBrowser;
  let page: Page;
  let watched: WatchedPage;
  let host: string;

  beforeAll(async () => {
    idp = await OidcIssuer.start({ alice: { groups: ['sales'] } }, { accessTokenTtlS: TOKEN_TTL_S });
    host = new URL(idp.issuer).host;
    ({ t, llm } = await startAppWithMockLlm({
      env: {
        PLAYGROUND: 'true',
        AUTH_OIDC_ISSUER: idp.issuer,
        AUTH_OIDC_AUDIENCE: TEST_AUDIENCE,
        PLAYGROUND_OIDC_CLIENT_ID: CLIENT_ID,
        PLAYGROUND_OIDC_SCOPES: 'openid api',
      },
    }));
    baseUrl = await listen(t);
    idp.publicClients.set(CLIENT_ID, [`${baseUrl}/`]);
    await createObject(t, 'deal', [fieldSpec('title', 'text')]);
    await t.http.post('/api/v1/objects/deal/records').set(asAdmin(t)).send({ title: 'Acme' }).expect(201);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'reader', objects: { deal: { read: true } } })
      .expect(201);
    await t.http
      .put('/api/v1/identity/mapping')
      .set(asAdmin(t))
      .send({ policies: { sales: ['reader'] }, claim: 'groups' })
      .expect(200);
    chromium = await launchBrowser();
  });
  afterAll(async () => {
    await chromium?.close();
    await t?.close();
    await llm?.close();
    await idp?.close();
  });

  watchEachTest(
    () => chromium.browser,
    () => llm.pendingSteps,
    (opened) => {
      watched = opened;
      page = opened.page;
    },
  );

  const stored = () => page.evaluate(() => sessionStorage.getItem('playground.apiKey'));
  const keyStatus = (wanted: string) =>
    page.waitForFunction((text) => document.querySelector('#key-status')?.textContent === text, { timeout: 20_000 }, wanted);

  /** Signs in as alice on the provider's login page (the provider's session from an earlier test is gone first). */
  async function signIn(): Promise<string> {
    const cdp = await page.createCDPSession();
    await cdp.send('Network.clearBrowserCookies');
    await page.goto(`${baseUrl}/`);
    await page.waitForSelector('#sign-in:not([hidden])');
    await Promise.all([page.waitForNavigation(), page.click('#sign-in')]);
    await page.waitForSelector('#login');
    await page.type('#login', 'alice');
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#provider-sign-in')]);
    await keyStatus(`Signed in with ${host}.`);
    return (await stored())!;
  }

  it('renews the access token with the refresh token before it expires; the chat then sends the new one', async () => {
    idp.refreshingClients.add(CLIENT_ID);
    const first = await signIn();
    const grant = await page.evaluate(() => sessionStorage.getItem('playground.signIn.grant'));
    const kept = JSON.parse(grant!) as { refreshToken?: unknown; expiresAt?: unknown };
    expect([typeof kept.refreshToken, typeof kept.expiresAt]).toEqual(['string', 'number']);

    await page.waitForFunction((before) => sessionStorage.getItem('playground.apiKey') !== before, { timeout: 20_000 }, first);
    const renewed = (await stored())!;
    expect(renewed.split('.')).toHaveLength(3);
    // Still signed in, with a token the server takes as the same user.
    expect(await page.$eval('#key-status', (node) => node.textContent)).toBe(`Signed in with ${host}.`);
    expect(bodyOf(await t.http.get('/api/v1/me').set(bearer(renewed)).expect(200))).toMatchObject({
      kind: 'user',
      subject: 'alice',
    });

    // The chat, opened with the first token, sends the current one.
    const sent: string[] = [];
    const record = (request: HTTPRequest) => {
      if (request.url().includes('/api/v1/ai/agents/data_chat/chat')) sent.push(request.headers()['authorization'] ?? '');
    };
    page.on('request', record);
    llm.reset();
    llm.enqueue(MockReply.text('Still here.'));
    await page.waitForFunction(() => document.querySelector<HTMLSelectElement>('#agent')?.value === 'data_chat');
    await page.type('#question', 'Are you there?');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => document.querySelector('.message.assistant .answer')?.textContent === 'Still here.', {
      timeout: 15_000,
    });
    page.off('request', record);
    expect(sent.length).toBeGreaterThan(0);
    expect(sent).not.toContain(`Bearer ${first}`);
    expect(watched.policyViolations).toEqual([]);
  });

  it('asks the person to sign in again when the provider gives no refresh token, and signs out when the token expired', async () => {
    idp.refreshingClients.delete(CLIENT_ID);
    await signIn();
    const grant = await page.evaluate(() => sessionStorage.getItem('playground.signIn.grant'));
    expect(JSON.parse(grant!)).not.toHaveProperty('refreshToken');
    await keyStatus(`Your sign-in with ${host} is about to expire: sign in again to go on.`);
    expect(await page.$eval('#sign-in', (button) => (button as HTMLButtonElement).hidden)).toBe(false);
    await keyStatus('No key in use.');
    expect(await stored()).toBeNull();
    expect(await page.$eval('#chat-error', (node) => node.textContent)).toContain(`Your sign-in with ${host} expired`);
    expect(watched.policyViolations).toEqual([]);
  });
});
