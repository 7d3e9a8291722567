import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { parsedContent, startAppWithMockLlm, type SentMessage } from '../../support/agent-fixtures';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { eventually, listen } from '../../support/chat-helpers';
import { asAdmin, createObject, fieldSpec } from '../../support/fixtures';
import { MockLlmServer, MockReply } from '../../support/mock-llm.server';
import { OidcIssuer, TEST_AUDIENCE } from '../../support/oidc-issuer';
import { bodyOf } from '../../support/responses';
import type { TestApp } from '../../support/test-app';
import { watchEachTest, type WatchedPage } from './watched-page';

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

const CLIENT_ID = 'copilot-playground';

describe('playground: sign in with the identity provider (authorization code with PKCE)', () => {
  let idp: OidcIssuer;
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let chromium: TestBrowser;
  let page: Page;
  let watched: WatchedPage;

  beforeAll(async () => {
    idp = await OidcIssuer.start({ alice: { groups: ['sales'], region: 'emea' } });
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
    await createObject(t, 'deal', [fieldSpec('title', 'text'), fieldSpec('region', 'text')]);
    for (const [title, region] of [
      ['Acme', 'emea'],
      ['Globex', 'amer'],
      ['Initech', 'emea'],
      ['Umbrella', 'amer'],
      ['Hooli', 'amer'],
    ]) {
      await t.http.post('/api/v1/objects/deal/records').set(asAdmin(t)).send({ title, region }).expect(201);
    }
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'regional', objects: { deal: { read: true, rowFilter: { region: '$attr.region' } } } })
      .expect(201);
    await t.http
      .put('/api/v1/identity/mapping')
      .set(asAdmin(t))
      .send({ subject: 'sub', attributes: { region: 'region' }, policies: { sales: ['regional'] }, claim: 'groups' })
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

  const text = (selector: string) => page.$eval(selector, (node) => node.textContent ?? '');
  const gridTitles = () =>
    page.$$eval('#grid tbody td[data-field="title"]', (cells) => cells.map((cell) => cell.textContent ?? '').sort());

  it('publishes the public sign-in settings and lets the page reach the provider, and nothing else', async () => {
    const settings = bodyOf(await t.http.get('/playground/sign-in').expect(200));
    expect(settings).toEqual({
      enabled: true,
      issuer: idp.issuer,
      clientId: CLIENT_ID,
      scopes: ['openid', 'api'],
      resource: TEST_AUDIENCE,
    });
    const csp = (await t.http.get('/').expect(200)).headers['content-security-policy'];
    expect(csp).toContain(`connect-src 'self' ${new URL(idp.issuer).origin}`);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  });

  it('signs in on the provider’s login page, then chat and grid run as the user: only its rows', async () => {
    llm.reset();
    llm.enqueue(
      MockReply.toolCall('aggregate_data', {
        objectName: 'deal',
        aggregations: [{ function: 'count', alias: 'deals' }],
      }),
      (request) => {
        const tool = (request.body!.messages as SentMessage[]).find((m) => m.role === 'tool')!;
        const [row] = parsedContent<{ rows: Array<{ deals: number }> }>(tool).rows;
        return MockReply.text(`You can see ${row.deals} deals.`);
      },
    );
    await page.goto(`${baseUrl}/`);
    const host = new URL(idp.issuer).host;
    await page.waitForSelector('#sign-in:not([hidden])');
    expect(await text('#sign-in')).toBe(`Sign in with ${host}`);

    // Off to the provider: its own page, where the person logs in.
    await Promise.all([page.waitForNavigation(), page.click('#sign-in')]);
    const authorize = new URL(page.url());
    expect(authorize.origin).toBe(new URL(idp.issuer).origin);
    await page.waitForSelector('#login');
    await page.type('#login', 'alice');
    // Back on the playground with a code, which the page exchanges for the access token.
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#provider-sign-in')]);
    await page.waitForFunction(
      (wanted) => document.querySelector('#key-status')?.textContent === wanted,
      { timeout: 15_000 },
      `Signed in with ${host}.`,
    );
    // The code and state left the address bar; the token is in this tab's session storage only.
    expect(page.url()).toBe(`${baseUrl}/`);
    const stored = await page.evaluate(() => sessionStorage.getItem('playground.apiKey'));
    expect(stored?.split('.')).toHaveLength(3);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await page.$eval('#sign-out', (button) => (button as HTMLButtonElement).hidden)).toBe(false);

    // The grid: the user's region only.
    await page.waitForFunction(
      () =>
        document.querySelector<HTMLSelectElement>('#object')?.value === 'deal' &&
        document.querySelectorAll('#grid tbody td[data-field="title"]').length > 0,
    );
    expect(await gridTitles()).toEqual(['Acme', 'Initech']);

    // The chat: the model's tool ran as the user, under its row filter.
    await page.waitForFunction(() => document.querySelector<HTMLSelectElement>('#agent')?.value === 'data_chat');
    await page.type('#question', 'How many deals can I see?');
    await page.keyboard.press('Enter');
    await page.waitForFunction(
      () => document.querySelector('.message.assistant .answer')?.textContent === 'You can see 2 deals.',
      { timeout: 15_000 },
    );
    // Audited under the user's own principal.
    const [user] = await t.sql<{ id: string }>(`select id from api_keys where kind = 'user' and subject = 'alice'`);
    const toolCalls = async () => (await t.sql(`select 1 from audit_log where key_id = $1 and kind = 'tool'`, [user.id])).length;
    await eventually(async () => (await toolCalls()) > 0);

    // Sign out: the token leaves the tab.
    await page.click('#sign-out');
    expect(await page.evaluate(() => sessionStorage.getItem('playground.apiKey'))).toBeNull();
    expect(await text('#key-status')).toBe('No key in use.');
    expect(watched.policyViolations).toEqual([]);
  });
});
