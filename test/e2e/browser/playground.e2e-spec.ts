import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import type { CreatedApiKeyResponse } from '../../../src/auth/api-key.dto';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { parsedContent, sentMessages, startAppWithMockLlm, type SentMessage } from '../../support/agent-fixtures';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { listen } from '../../support/chat-helpers';
import { MockLlmServer, MockReply } from '../../support/mock-llm.server';
import { bodyOf, errorOf } from '../../support/responses';
import { bearer, startTestApp, TestApp } from '../../support/test-app';
import { openWatchedPage, screenshot } from './watched-page';

/** Set by `npm run screenshot:playground`: where to save a picture of the page mid-conversation. */
const SCREENSHOT = process.env.PLAYGROUND_SCREENSHOT;

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

describe('playground at /', () => {
  let t: TestApp;
  let llm: MockLlmServer;
  let baseUrl: string;
  let memberKey: string;
  let chromium: TestBrowser;
  let page: Page;
  /** What the page's console reported as errors, CSP refusals included. */
  let consoleErrors: string[];
  /** What the page's Content-Security-Policy refused. */
  let policyViolations: string[];

  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { SEED: 'true', PLAYGROUND: 'true' } }));
    baseUrl = await listen(t);
    const res = await t.http
      .post('/api/v1/api-keys')
      .set(bearer(t.adminKey))
      .send({ name: 'analyst', role: 'member' })
      .expect(201);
    memberKey = bodyOf<CreatedApiKeyResponse>(res).secret;
    chromium = await launchBrowser();
  });
  afterAll(async () => {
    await chromium?.close();
    await t?.close();
    await llm?.close();
  });

  beforeEach(async () => {
    llm.reset();
    ({ page, consoleErrors, policyViolations } = await openWatchedPage(chromium.browser));
  });
  afterEach(async () => {
    await page.close();
    expect(policyViolations).toEqual([]);
    expect(llm.pendingSteps).toBe(0);
  });

  /** Loads the page and enters the member key, as a person would. */
  async function openWithKey(): Promise<void> {
    await page.goto(`${baseUrl}/`);
    await page.type('#api-key', memberKey);
    await page.click('#key-form button[type=submit]');
    await page.waitForFunction(() => document.querySelector<HTMLSelectElement>('#agent')?.value === 'data_chat');
  }

  const text = (selector: string) => page.$eval(selector, (node) => node.textContent ?? '');
  const rowCount = () => page.$$eval('#grid tbody tr', (rows) => rows.length);

  describe('serving', () => {
    it('serves the page without an API key, with a policy that allows only its own origin', async () => {
      const res = await t.http.get('/').expect(200);
      expect(res.headers['content-type']).toMatch(/^text\/html/);
      expect(res.text).toContain('<script type="module" src="/playground.js"></script>');
      const csp = res.headers['content-security-policy'];
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*|https?:/);
      expect(res.headers).toMatchObject({
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
        'referrer-policy': 'no-referrer',
        'cache-control': 'no-cache',
      });
      // No inline script for the policy to have to allow.
      expect(res.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);

      const script = await t.http.get('/playground.js').expect(200);
      expect(script.headers['content-type']).toMatch(/javascript/);
      expect(script.headers['content-security-policy']).toBe(csp);
    });

    it('leaves every /api route behind its key, without the page headers', async () => {
      const res = await t.http.get('/api/v1/objects').expect(401);
      expect(errorOf(res).code).toBe('unauthorized');
      // The server's own security headers, not the page's stricter policy (which would name no API route).
      const page = (await t.http.get('/').expect(200)).headers['content-security-policy'];
      expect(res.headers['content-security-policy']).not.toBe(page);
      expect(res.headers['x-frame-options']).not.toBe('DENY');
      await t.http.get('/api/v1/objects').set(bearer(memberKey)).expect(200);
    });

    it('serves only the built files: another path is the API 404', async () => {
      const res = await t.http.get('/secrets.txt').expect(404);
      expect(errorOf(res).code).toBeDefined();
      await t.http.get('/../package.json').expect(404);
    });

    it('is absent with PLAYGROUND=false', async () => {
      const off = await startTestApp({ database: t.database, env: { PLAYGROUND: 'false' } });
      try {
        const res = await off.http.get('/').expect(404);
        expect(errorOf(res).code).toBeDefined();
        await off.http.get('/playground.js').expect(404);
      } finally {
        await off.close();
      }
    });
  });

  describe('in a browser', () => {
    it('asks an agent: the tool call shows as a card, then the streamed answer', async () => {
      const [expected] = await t.sql<{ n: string }>(`select count(*) as n from data.deal where stage = 'won'`);
      llm.enqueue(
        MockReply.toolCall('aggregate_data', {
          objectName: 'deal',
          where: { stage: 'won' },
          aggregations: [{ function: 'count', alias: 'won_deals' }],
        }),
        (request) => {
          const tool = (request.body!.messages as SentMessage[]).find((m) => m.role === 'tool')!;
          const [row] = parsedContent<{ rows: Array<{ won_deals: number }> }>(tool).rows;
          return MockReply.text(`We won ${row.won_deals} deals in total.`, { chunkDelayMs: 20 });
        },
      );
      await openWithKey();
      await page.type('#question', 'How many deals did we win?');
      await page.keyboard.press('Enter');

      const answer = `We won ${Number(expected.n)} deals in total.`;
      await page.waitForFunction(
        (wanted) => document.querySelector('.message.assistant .answer')?.textContent === wanted,
        {},
        answer,
      );
      expect(await text('.message.user')).toContain('How many deals did we win?');
      const card = await page.$eval('.message.assistant details.tool-call', (details) => ({
        open: details.open,
        state: (details as HTMLElement).dataset.state,
        summary: details.querySelector('summary')!.textContent,
      }));
      expect(card).toEqual({ open: false, state: 'output-available', summary: 'Tool aggregate_data · done' });
      // Open the card from the keyboard: its input and the tool's real result.
      await page.focus('.message.assistant details.tool-call summary');
      await page.keyboard.press('Enter');
      expect(await page.$eval('details.tool-call', (details) => details.open)).toBe(true);
      expect(JSON.parse(await text('details.tool-call .tool-input'))).toMatchObject({ objectName: 'deal' });
      expect(JSON.parse(await text('details.tool-call .tool-output'))).toMatchObject({
        rows: [{ won_deals: Number(expected.n) }],
      });
      expect(await text('#chat-error')).toBe('');

      // The model saw the question and the tool result; the key went only in the Authorization header.
      expect(sentMessages(llm, 0).at(-1)).toEqual({ role: 'user', content: 'How many deals did we win?' });
      const stored = await page.evaluate(() => ({
        session: sessionStorage.getItem('playground.apiKey'),
        local: localStorage.length,
        url: location.href,
      }));
      expect(stored).toEqual({ session: memberKey, local: 0, url: `${baseUrl}/` });
      expect(consoleErrors).toEqual([]);
    });

    it('keeps a durable chat across a reload mid-turn: the answer completes on the reloaded page', async () => {
      const answer = 'Deals are tracked by stage: lead, qualified, proposal, won and lost. Ask about any of them.';
      llm.enqueue(
        MockReply.toolCall('describe_object', { objectName: 'deal' }),
        // Slow enough for the reload to land mid-answer: one word at a time.
        MockReply.text(answer, { chunkDelayMs: 150 }),
      );
      await openWithKey();
      await page.click('#durable');
      await page.type('#question', 'How are deals tracked?');
      await page.keyboard.press('Enter');
      // Part of the answer is on the page, not all of it: reload now.
      await page.waitForFunction(() => (document.querySelector('.message.assistant .answer')?.textContent ?? '').length > 0);
      expect(await text('.message.assistant .answer')).not.toBe(answer);
      const chatId = await page.evaluate(() => sessionStorage.getItem('playground.chatId'));
      expect(chatId).toMatch(/^[A-Za-z0-9_-]{1,128}$/);
      await page.reload();

      // The toggle and the chat survive; the page resumes the running turn and shows the whole answer once.
      await page.waitForFunction(
        (wanted) => document.querySelector('.message.assistant .answer')?.textContent === wanted,
        { timeout: 30_000 },
        answer,
      );
      expect(await page.$eval('#durable', (box) => (box as HTMLInputElement).checked)).toBe(true);
      expect(await text('.message.user')).toContain('How are deals tracked?');
      expect(await page.$eval('.message.assistant details.tool-call', (d) => (d as HTMLElement).dataset.state)).toBe(
        'output-available',
      );
      expect(llm.requests).toHaveLength(2);
      expect(await text('#chat-error')).toBe('');
      expect(consoleErrors).toEqual([]);
    });

    /** Asks a question and waits until the answer's text contains `until`. */
    async function ask(question: string, until: string): Promise<void> {
      await openWithKey();
      await page.type('#question', question);
      await page.keyboard.press('Enter');
      await page.waitForFunction(
        (wanted) => (document.querySelector('.message.assistant .answer')?.textContent ?? '').includes(wanted),
        {},
        until,
      );
    }

    it('renders the answer as Markdown: a table is a table', async () => {
      llm.enqueue(
        MockReply.text('Deals by **stage**:\n\n| stage | deals |\n| --- | ---: |\n| won | 12 |\n| lost | 7 |\n\nThat is all.'),
      );
      await ask('Deals by stage?', 'That is all.');
      const table = await page.$eval('.message.assistant .answer', (answer) => ({
        strong: answer.querySelector('strong')?.textContent,
        headers: [...answer.querySelectorAll('table thead th')].map((cell) => cell.textContent),
        rows: [...answer.querySelectorAll('table tbody tr')].map((row) => [...row.children].map((cell) => cell.textContent)),
      }));
      expect(table).toEqual({
        strong: 'stage',
        headers: ['stage', 'deals'],
        rows: [
          ['won', '12'],
          ['lost', '7'],
        ],
      });
      expect(consoleErrors).toEqual([]);
    });

    it('renders HTML the model writes inert: no script runs, no handler is attached', async () => {
      llm.enqueue(
        MockReply.text(
          '**Rendered** Markdown. Look: <img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script> ' +
            '[click](javascript:window.__pwned=3) <a href="#" onclick="window.__pwned=4">me</a> done.',
        ),
      );
      await ask('Anything?', 'done.');
      const answer = await page.$eval('.message.assistant .answer', (node) => ({
        pwned: (window as unknown as { __pwned?: number }).__pwned ?? null,
        strong: node.querySelector('strong')?.textContent ?? null,
        scripts: node.querySelectorAll('script').length,
        images: node.querySelectorAll('img').length,
        handlers: [...node.querySelectorAll('*')].filter((el) => [...el.attributes].some((a) => a.name.startsWith('on'))).length,
        scriptLinks: [...node.querySelectorAll('a')].filter((a) => /^javascript:/i.test(a.getAttribute('href') ?? '')).length,
        text: node.textContent,
      }));
      // Clicking every link must not run anything either.
      await page.$$eval('.message.assistant .answer a', (links) => links.forEach((link) => (link as HTMLElement).click()));
      expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(answer).toMatchObject({ pwned: null, strong: 'Rendered', scripts: 0, images: 0, handlers: 0, scriptLinks: 0 });
      // The raw HTML shows as the text the model wrote.
      expect(answer.text).toContain('<img src=x onerror="window.__pwned=1">');
      expect(answer.text).toContain('<script>window.__pwned=2</script>');
    });

    it('draws the chart of a visualize call under the page policy: no eval, no inline style refused', async () => {
      llm.enqueue(
        MockReply.toolCalls([
          {
            id: 'call_src',
            name: 'aggregate_data',
            arguments: { objectName: 'deal', groupBy: ['stage'], aggregations: [{ function: 'count', alias: 'n' }] },
          },
        ]),
        MockReply.toolCalls([
          { id: 'call_bar', name: 'visualize', arguments: { source: 'call_src', type: 'bar', x: 'stage', y: ['n'] } },
        ]),
        MockReply.text('Here are the deals by stage, charted.'),
      );
      await ask('Chart deals by stage', 'charted.');
      await page.waitForSelector('.message.assistant figure.chart svg');
      const chart = await page.$eval('.message.assistant figure.chart', (figure) => ({
        key: figure.dataset.key,
        bars: figure.querySelectorAll('svg .mark-rect path').length,
        labels: [...figure.querySelectorAll('svg text')].map((label) => label.textContent),
      }));
      const stages = await t.sql<{ stage: string }>(`select distinct stage from data.deal where stage is not null`);
      expect(chart.key).toBe('chart:call_bar');
      expect(chart.bars).toBe(stages.length);
      expect(chart.labels).toEqual(expect.arrayContaining(stages.map((row) => row.stage)));
      expect(policyViolations).toEqual([]);
      expect(consoleErrors).toEqual([]);
      if (SCREENSHOT) {
        await page.$eval('#messages', (log) => log.scrollTo(0, log.scrollHeight));
        await screenshot(page, SCREENSHOT);
      }
    });

    it('marks the grounding in the answer: a figure from the data, and one it does not support', async () => {
      const [won] = await t.sql<{ n: string }>(`select count(*) as n from data.deal where stage = 'won'`);
      llm.enqueue(
        MockReply.toolCalls([
          {
            id: 'call_won',
            name: 'aggregate_data',
            arguments: { objectName: 'deal', where: { stage: 'won' }, aggregations: [{ function: 'count', alias: 'won_deals' }] },
          },
        ]),
        MockReply.text(`We won **${Number(won.n)}** deals, and 987,654 more are on the way.`),
      );
      await ask('How many deals did we win?', 'on the way.');
      await page.waitForSelector('.message.assistant .answer mark');
      const marks = await page.$$eval('.message.assistant .answer mark', (nodes) =>
        nodes.map((mark) => ({ className: mark.className, text: mark.textContent, title: mark.title })),
      );
      expect(marks).toEqual([
        { className: 'grounded', text: String(Number(won.n)), title: 'from aggregate_data, row 1, column won_deals' },
        { className: 'unsupported', text: '987,654', title: marks[1]?.title },
      ]);
      expect(marks[1].title).toMatch(/^not supported by the data: [a-z ]+$/);
      // Marking wraps text: the answer reads as before.
      expect(await text('.message.assistant .answer')).toBe(`We won ${Number(won.n)} deals, and 987,654 more are on the way.`);
      expect(consoleErrors).toEqual([]);
    });

    it('shows the API error of a refused chat, with its code', async () => {
      await openWithKey();
      await page.evaluate(() => {
        // An agent the key may not use (or that does not exist): the server's 404 must reach the page.
        const select = document.querySelector<HTMLSelectElement>('#agent')!;
        select.append(new Option('ghost', 'ghost_agent'));
        select.value = 'ghost_agent';
        select.dispatchEvent(new Event('change'));
      });
      await page.type('#question', 'hello?');
      await page.click('#send');
      await page.waitForSelector('#chat-error:not([hidden])');
      expect(await text('#chat-error .error-code')).toBe('agent_not_found');
      expect(llm.requests).toHaveLength(0);
    });

    it('browses records: pages, a where filter that narrows them, a bad filter shown with its code', async () => {
      await openWithKey();
      await page.select('#object', 'deal');
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent === '1–25 of 2000');
      expect(await rowCount()).toBe(25);
      const headers = await page.$$eval('#grid thead th', (cells) => cells.map((cell) => cell.getAttribute('title')));
      expect(headers).toEqual(expect.arrayContaining(['id', 'name', 'stage', 'amount']));
      expect(await page.$eval('#prev', (button) => (button as HTMLButtonElement).disabled)).toBe(true);

      await page.click('#next');
      await page.waitForFunction(() => document.querySelector('#page-info')?.textContent === '26–50 of 2000');
      expect(await page.$eval('#prev', (button) => (button as HTMLButtonElement).disabled)).toBe(false);

      const [won] = await t.sql<{ n: string }>(`select count(*) as n from data.deal where stage = 'won'`);
      await page.type('#where', '{"stage": "won"}');
      await page.click('#apply');
      await page.waitForFunction(
        (wanted) => document.querySelector('#page-info')?.textContent === wanted,
        {},
        `1–25 of ${won.n}`,
      );
      const stageColumn = (await page.$$eval('#grid thead th', (cells) => cells.map((cell) => cell.title))).indexOf('stage');
      const stages = await page.$$eval(
        '#grid tbody tr',
        (rows, column) => rows.map((row) => row.children[column].textContent),
        stageColumn,
      );
      expect(new Set(stages)).toEqual(new Set(['won']));

      await page.$eval('#where', (area) => ((area as HTMLTextAreaElement).value = ''));
      await page.type('#where', '{"nope": 1}');
      await page.click('#apply');
      await page.waitForSelector('#records-error:not([hidden])');
      expect(await text('#records-error .error-code')).toBe('unknown_field');
      expect(await text('#records-error')).toContain('nope');

      await page.$eval('#where', (area) => ((area as HTMLTextAreaElement).value = ''));
      await page.type('#where', '{"stage": ');
      await page.click('#apply');
      await page.waitForFunction(() => document.querySelector('#records-error .error-code')?.textContent !== 'unknown_field');
      expect(await text('#records-error .error-code')).toMatch(/^[a-z_]+$/);
      expect(await page.$eval('#records-error', (box) => (box as HTMLElement).hidden)).toBe(false);
    });
  });
});
