import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { startAppWithMockLlm } from '../../support/agent-fixtures';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { listen } from '../../support/chat-helpers';
import { match } from '../../support/matchers';
import { asAdmin, createApiKey } from '../../support/fixtures';
import { BY_OWNER, createOwnerDeals, OWN_DEALS } from '../../support/owner-deals';
import { MockLlmServer, MockReply } from '../../support/mock-llm.server';
import { TestApp } from '../../support/test-app';
import { screenshot, watchEachTest } from './watched-page';

/** Where to save a picture of an open receipt after a re-run (e.g. RECEIPT_SCREENSHOT=/tmp/receipt.png). */
const SCREENSHOT = process.env.RECEIPT_SCREENSHOT;

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

/** What a key under the row filter sees of pat's deals, once the server filled the references in. */
const PATS_ANSWER = 'You won $2,500,000.50 over 3 deals; your margin is hidden.';

let t: TestApp;
let llm: MockLlmServer;
let baseUrl: string;
/** A member key whose policy filters deals to its own (owner = pat) and hides their margin. */
let patKey: string;
let chromium: TestBrowser;
let page: Page;
let consoleErrors: string[];

/** The receipt under the answer as a person reads it. */
const receipt = () =>
  page.$eval('.message.assistant .receipt', (panel) => ({
    hidden: (panel as HTMLElement).hidden,
    title: panel.querySelector('.receipt-title')?.textContent,
    tool: panel.querySelector('.receipt-tool')?.textContent,
    args: panel.querySelector('.receipt-args')?.textContent,
    rowLabel: [...panel.querySelectorAll('dt')].map((term) => term.textContent).find((label) => label?.startsWith('Row')),
    headers: [...panel.querySelectorAll('.receipt-row th')].map((cell) => cell.textContent),
    cells: [...panel.querySelectorAll('.receipt-row td')].map((cell) => cell.textContent),
    cited: [...panel.querySelectorAll('.receipt-row .cited')].map((cell) => cell.textContent),
    column: panel.querySelector('.receipt-column')?.textContent,
    value: panel.querySelector('.receipt-value')?.parentElement?.textContent,
  }));

/** Clicks Re-run and waits for what it found: its state, and its lines (each changed figure, or why not). */
async function rerun(): Promise<{ state?: string; ran?: string; lines: string[] }> {
  await page.click('.message.assistant .receipt-rerun');
  await page.waitForFunction(() => {
    const state = document.querySelector<HTMLElement>('.message.assistant .receipt-replay')?.dataset.state;
    return state !== undefined && state !== 'running';
  });
  return page.$eval('.message.assistant .receipt-replay', (node) => {
    const found = {
      state: (node as HTMLElement).dataset.state,
      ran: node.querySelector('.receipt-ran')?.textContent ?? undefined,
      lines: [...node.querySelectorAll('li, .receipt-failure')].map((line) => line.textContent ?? ''),
    };
    // The next re-run is told apart from this one by its state.
    delete (node as HTMLElement).dataset.state;
    return found;
  });
}

/** Opens the page with a key, in a durable chat or not, and asks; resolves once the answer and its grounding are in. */
async function ask(key: string, durable: boolean, question: string, answer: string): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await page.type('#api-key', key);
  await page.click('#key-form button[type=submit]');
  await page.waitForFunction(() => document.querySelector<HTMLSelectElement>('#agent')?.value === 'data_chat');
  if (durable) await page.click('#durable');
  await page.waitForFunction(() => !document.querySelector<HTMLButtonElement>('#send')?.disabled);
  await page.type('#question', question);
  await page.keyboard.press('Enter');
  await page.waitForFunction(
    (wanted) => {
      const node = document.querySelector('.message.assistant .answer');
      return node?.textContent === wanted && node.querySelector('mark.referenced') !== null;
    },
    { timeout: 30_000 },
    answer,
  );
}

/** The playground's receipts: a figure filled in from a reference opens where it came from, and re-runs. */
describe('playground: receipts of referenced figures', () => {
  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { PLAYGROUND: 'true', CHAT_POLL_INTERVAL_MS: '200' } }));
    baseUrl = await listen(t);
    await createOwnerDeals(t);
    patKey = (await createApiKey(t, { name: 'pat', role: 'member', subject: 'pat', policies: ['own-deals'] })).secret;
    chromium = await launchBrowser();
  });
  afterAll(async () => {
    await chromium?.close();
    await t?.close();
    await llm?.close();
  });
  beforeEach(() => llm.reset());
  watchEachTest(
    () => chromium.browser,
    () => llm.pendingSteps,
    (watched) => ({ page, consoleErrors } = watched),
  );

  it('marks referenced figures, opens a receipt with the call and its row, re-runs it after a record changes, and names the access that shaped the answer', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_mine', name: 'aggregate_data', arguments: BY_OWNER }]),
      MockReply.text('You won {{r1.1.total}} over {{r1.1.n}} deals; your margin is hidden.'),
    );
    await ask(patKey, true, 'What did I win, and my margin?', PATS_ANSWER);

    // Each figure filled in from a reference is marked as such, and is a control the keyboard reaches.
    const marks = await page.$$eval('.message.assistant .answer mark', (nodes) =>
      nodes.map((mark) => ({
        className: mark.className,
        text: mark.textContent,
        tabIndex: mark.tabIndex,
        role: mark.getAttribute('role'),
        expanded: mark.getAttribute('aria-expanded'),
      })),
    );
    expect(marks).toEqual([
      { className: 'grounded referenced', text: '$2,500,000.50', tabIndex: 0, role: 'button', expanded: 'false' },
      { className: 'grounded referenced', text: '3', tabIndex: 0, role: 'button', expanded: 'false' },
    ]);
    // Under the answer: the key's row filter and the hidden field its question named.
    expect(await page.$$eval('.message.assistant .caveats li', (items) => items.map((item) => item.textContent))).toEqual([
      'Results for deal were limited by your access (row filter; hidden fields: margin).',
    ]);
    expect(await page.$eval('.message.assistant .caveats', (list) => (list as HTMLElement).hidden)).toBe(false);

    // Opened from the keyboard: the tool, the arguments of its call, the row with the cited column, the value.
    await page.focus('.message.assistant mark.referenced');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.message.assistant .receipt:not([hidden])');
    const opened = await receipt();
    expect(opened).toMatchObject({
      title: 'Receipt of $2,500,000.50 r1.1.total',
      tool: 'aggregate_data',
      rowLabel: 'Row 1',
      headers: ['owner', 'total', 'n'],
      cells: ['pat', '2500000.5', '3'],
      cited: ['total', '2500000.5'],
      column: 'total',
      value: '2500000.5 shown as $2,500,000.50',
    });
    // One line per argument (`groupBy: ["owner"]`): the arguments of the call as it was made.
    const args = opened.args!.split('\n').map((line) => /^(\w+): (.*)$/.exec(line)!);
    expect(Object.fromEntries(args.map(([, name, value]) => [name, JSON.parse(value)]))).toEqual(BY_OWNER);
    expect(await page.evaluate(() => document.activeElement?.className)).toBe('receipt-title');
    expect(await page.$eval('.message.assistant mark.referenced', (mark) => mark.getAttribute('aria-expanded'))).toBe('true');

    expect(await rerun()).toEqual({
      state: 'unchanged',
      ran: match.stringMatching(/^Ran again at .+:$/),
      lines: ['Unchanged: the 2 figures from this call are the same now.'],
    });

    // Another key changes one of pat's deals through the records API: Re-run shows the figure then and now.
    const deals = await t.http.get('/api/v1/objects/deal/records?limit=10').set(asAdmin(t)).expect(200);
    const pats = (deals.body as { records: Array<{ id: string; owner: string; amount: number }> }).records.find(
      (deal) => deal.owner === 'pat' && deal.amount === 500_000,
    )!;
    await t.http.patch(`/api/v1/objects/deal/records/${pats.id}`).set(asAdmin(t)).send({ amount: 510_000 }).expect(200);
    expect(await rerun()).toMatchObject({
      state: 'changed',
      lines: ['r1.1.total: then $2,500,000.50, now $2,510,000.50', '1 other figure unchanged.'],
    });
    if (SCREENSHOT) {
      // Tall enough for the whole answer and its receipt in the conversation's scrolling log.
      await page.setViewport({ width: 1400, height: 1400 });
      await screenshot((await page.$('.message.assistant'))!, SCREENSHOT);
    }

    // Once the key's policy narrows, the stored result is not its to replay: the page says so.
    await t.http
      .put('/api/v1/policies/own-deals')
      .set(asAdmin(t))
      .send({ objects: { deal: { ...OWN_DEALS.deal, hiddenFields: ['margin', 'amount'] } } })
      .expect(200);
    expect(await rerun()).toMatchObject({
      state: 'failed',
      lines: [
        'Nothing to re-run: this key may not see the result of this call (its access changed since the answer), ' +
          'or the call holds no data rows (receipt_not_found).',
      ],
    });
    expect(consoleErrors).toEqual([expect.stringContaining('status of 404')]);
    consoleErrors.length = 0;
    await t.http.put('/api/v1/policies/own-deals').set(asAdmin(t)).send({ objects: OWN_DEALS }).expect(200);

    // Escape closes it, and the focus goes back to the figure.
    await page.focus('.message.assistant .receipt-rerun');
    await page.keyboard.press('Escape');
    expect(await page.$eval('.message.assistant .receipt', (panel) => (panel as HTMLElement).hidden)).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('$2,500,000.50');
  });

  it('opens a receipt in a stateless chat too, where Re-run is off: nothing of the chat is stored to run again', async () => {
    llm.enqueue(
      MockReply.toolCalls([{ id: 'call_all', name: 'aggregate_data', arguments: BY_OWNER }]),
      MockReply.text('sam has {{r1.2.total}}.'),
    );
    await ask(t.adminKey, false, 'How much has sam?', 'sam has $1,250,000.');
    await page.click('.message.assistant mark.referenced');
    await page.waitForSelector('.message.assistant .receipt:not([hidden])');
    expect(await receipt()).toMatchObject({ rowLabel: 'Row 2', cells: ['sam', '1250000', '2'], cited: ['total', '1250000'] });
    expect(await page.$eval('.message.assistant .receipt-rerun', (button) => (button as HTMLButtonElement).disabled)).toBe(true);
    expect(await page.$eval('.message.assistant .receipt-actions', (node) => node.textContent)).toContain('durable chat');
    // An admin key: no row filter, no hidden field, no caveat.
    expect(await page.$eval('.message.assistant .caveats', (list) => (list as HTMLElement).hidden)).toBe(true);
    // A second click on the figure closes its receipt.
    await page.click('.message.assistant mark.referenced');
    expect(await page.$eval('.message.assistant .receipt', (panel) => (panel as HTMLElement).hidden)).toBe(true);
  });
});
