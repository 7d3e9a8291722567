import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { HTTPRequest, Page } from 'puppeteer-core';
import type { CreatedApiKeyResponse } from '../../../src/auth/api-key.dto';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { listen } from '../../support/chat-helpers';
import { bodyOf } from '../../support/responses';
import { bearer, startTestApp, TestApp } from '../../support/test-app';
import { openWatchedPage, screenshot } from './watched-page';

/** Set by `npm run screenshot:grid`: where to save a picture of the grid asking which value wins. */
const SCREENSHOT = process.env.GRID_SCREENSHOT;
const TICKETS = 30;
/** Waits that depend on the change feed: generous, as the machine may be busy; the test fails if it never comes. */
const FEED_WAIT = { timeout: 15_000 };

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

interface Ticket {
  id: string;
  title: string;
  priority: string | null;
  hours: number | null;
}

describe('the grid of the playground', () => {
  let t: TestApp;
  let baseUrl: string;
  /** The key the page uses. */
  let gridKey: string;
  /** Another person's key, writing through the API while the page is open. */
  let otherKey: string;
  let chromium: TestBrowser;
  let page: Page;
  let consoleErrors: string[];
  let policyViolations: string[];

  async function newKey(name: string, policies?: string[]): Promise<string> {
    const res = await t.http
      .post('/api/v1/api-keys')
      .set(bearer(t.adminKey))
      .send({ name, role: 'member', ...(policies && { policies }) })
      .expect(201);
    return bodyOf<CreatedApiKeyResponse>(res).secret;
  }

  beforeAll(async () => {
    // Stream tokens expire at once, so that a stream the server ends must be reopened with a new one.
    t = await startTestApp({ env: { PLAYGROUND: 'true', STREAM_TOKEN_TTL_MS: '1000' } });
    baseUrl = await listen(t);
    await t.http
      .post('/api/v1/objects')
      .set(bearer(t.adminKey))
      .send({
        name: 'ticket',
        label: 'Ticket',
        fields: [
          { name: 'title', label: 'Title', type: 'text', required: true, searchable: true },
          { name: 'priority', label: 'Priority', type: 'select', options: ['low', 'normal', 'high'] },
          { name: 'hours', label: 'Hours spent', type: 'number', indexed: true },
        ],
      })
      .expect(201);
    const priorities = ['low', 'normal', 'high'];
    const operations = Array.from({ length: TICKETS }, (_, i) => ({
      op: 'create',
      record: { title: `Ticket ${String(i + 1).padStart(2, '0')}`, priority: priorities[i % 3], hours: i + 1 },
    }));
    await t.http.post('/api/v1/objects/ticket/records/batch').set(bearer(t.adminKey)).send({ operations }).expect(200);
    gridKey = await newKey('grid user');
    otherKey = await newKey('colleague');
    chromium = await launchBrowser();
  });
  afterAll(async () => {
    await chromium?.close();
    await t?.close();
  });

  beforeEach(async () => {
    ({ page, consoleErrors, policyViolations } = await openWatchedPage(chromium.browser));
  });
  afterEach(async () => {
    await page.close();
    expect(policyViolations).toEqual([]);
  });

  /** Loads the page, enters `key` as a person would, and waits for the tickets and their live changes. */
  async function openGrid(key = gridKey): Promise<void> {
    await page.goto(`${baseUrl}/`);
    await page.type('#api-key', key);
    await page.click('#key-form button[type=submit]');
    await page.waitForFunction(
      () =>
        document.querySelector<HTMLSelectElement>('#object')?.value === 'ticket' &&
        document.querySelectorAll('#grid tbody tr').length > 0,
    );
    await page.waitForSelector('#feed-status[data-state="live"]', FEED_WAIT);
  }

  const text = (selector: string) => page.$eval(selector, (node) => node.textContent ?? '');
  const headerNames = () => page.$$eval('#grid thead th', (cells) => cells.map((cell) => cell.title));
  const rowIds = () => page.$$eval('#grid tbody tr', (rows) => rows.map((row) => (row as HTMLElement).dataset.id!));
  const cellSelector = (id: string, field: string) => `#grid tr[data-id="${id}"] td[data-field="${field}"]`;
  const columnValues = (field: string) =>
    page.$$eval(`#grid tbody td[data-field="${field}"]`, (cells) => cells.map((cell) => cell.textContent ?? ''));

  async function stored(id: string): Promise<Ticket> {
    return bodyOf<Ticket>(await t.http.get(`/api/v1/objects/ticket/records/${id}`).set(bearer(t.adminKey)).expect(200));
  }

  /** The API requests that write (anything but GET), as the page sent them. */
  function recordWrites(): Array<{ method: string; url: string; headers: Record<string, string> }> {
    const writes: Array<{ method: string; url: string; headers: Record<string, string> }> = [];
    page.on('request', (request: HTTPRequest) => {
      const url = new URL(request.url());
      if (url.pathname.startsWith('/api/v1/objects/') && request.method() !== 'GET') {
        writes.push({ method: request.method(), url: url.pathname, headers: request.headers() });
      }
    });
    return writes;
  }

  /** Opens the editor of a cell and waits until it has read the record's version (the GET that gives its ETag). */
  async function openEditor(id: string, field: string): Promise<void> {
    const read = page.waitForResponse(
      (response) => response.request().method() === 'GET' && new URL(response.url()).pathname.endsWith(`/records/${id}`),
    );
    await page.click(cellSelector(id, field), { count: 2 });
    await page.waitForSelector(`${cellSelector(id, field)} input.cell-editor`);
    expect((await read).status()).toBe(200);
  }

  /** Replaces the editor's text and presses Enter. */
  async function typeAndEnter(value: string): Promise<void> {
    await page.$eval('input.cell-editor', (input) => (input.value = ''));
    await page.type('input.cell-editor', value);
    await page.keyboard.press('Enter');
  }

  /** Pastes text into a cell as the browser does for Ctrl+V (a paste event carrying the clipboard's text). */
  async function pasteInto(selector: string, clipboard: string): Promise<void> {
    await page.click(selector);
    await page.$eval(
      selector,
      (cell, data) => {
        const transfer = new DataTransfer();
        transfer.setData('text/plain', data);
        cell.dispatchEvent(new ClipboardEvent('paste', { clipboardData: transfer, bubbles: true, cancelable: true }));
      },
      clipboard,
    );
  }

  const cellShows = (id: string, field: string, value: string) =>
    page.waitForFunction(
      (selector, wanted) => {
        const cell = document.querySelector(selector);
        return cell?.textContent === wanted && !cell.matches('.saving, .editing');
      },
      FEED_WAIT,
      cellSelector(id, field),
      value,
    );

  it('edits a cell in place: a PATCH with the If-Match of the version read, stored, on Enter or on leaving the cell', async () => {
    await openGrid();
    const writes = recordWrites();
    const [id] = await rowIds();
    await openEditor(id, 'title');
    await typeAndEnter('Renamed in the grid');
    await cellShows(id, 'title', 'Renamed in the grid');
    await page.waitForFunction(
      (wanted) => document.querySelector('#grid-status')?.textContent === wanted,
      {},
      `Saved title of ${id}.`,
    );

    expect((await stored(id)).title).toBe('Renamed in the grid');
    expect(writes.map((write) => `${write.method} ${write.url}`)).toEqual([`PATCH /api/v1/objects/ticket/records/${id}`]);
    expect(writes[0].headers['if-match']).toMatch(/^"\d+"$/);
    // A number typed into a number field goes as a number; leaving the editor (a click elsewhere) saves it too,
    // and the focus stays where the click put it.
    await openEditor(id, 'hours');
    await page.$eval('input.cell-editor', (input) => (input.value = ''));
    await page.type('input.cell-editor', '7.25');
    await page.click('#search');
    await cellShows(id, 'hours', '7.25');
    expect((await stored(id)).hours).toBe(7.25);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('search');
    expect(await text('#records-error')).toBe('');
    expect(consoleErrors).toEqual([]);
  });

  it("offers a select field's options in its cell editor, and stores the one chosen", async () => {
    await openGrid();
    const [id] = await rowIds();
    const offered = () =>
      page.$eval('input.cell-editor', (input) => [...(input.list?.options ?? [])].map((option) => option.value));
    await openEditor(id, 'title');
    expect(await offered()).toEqual([]);
    await page.keyboard.press('Escape');
    await openEditor(id, 'priority');
    expect(await offered()).toEqual(['low', 'normal', 'high']);
    await typeAndEnter('high');
    await cellShows(id, 'priority', 'high');
    expect((await stored(id)).priority).toBe('high');
    expect(consoleErrors).toEqual([]);
  });

  it('shows a conflicting edit of another key as a choice: keep mine, or take theirs', async () => {
    await openGrid();
    const [, first, second] = await rowIds();

    // Keep mine: written again, on the newer version.
    await openEditor(first, 'title');
    await t.http
      .patch(`/api/v1/objects/ticket/records/${first}`)
      .set(bearer(otherKey))
      .send({ title: 'Their title' })
      .expect(200);
    await typeAndEnter('My title');
    await page.waitForSelector('#grid-conflict:not([hidden])');
    expect(await text('#grid-conflict dd.theirs')).toBe('Their title');
    expect(await text('#grid-conflict dd.mine')).toBe('My title');
    expect(await page.$eval(cellSelector(first, 'title'), (cell) => cell.classList.contains('conflict'))).toBe(true);
    // The grid's panel alone: the chat beside it is the playground's picture.
    if (SCREENSHOT) await screenshot((await page.$('#records'))!, SCREENSHOT);
    await page.click('#grid-conflict button.keep-mine');
    await cellShows(first, 'title', 'My title');
    expect(await page.$eval('#grid-conflict', (box) => (box as HTMLElement).hidden)).toBe(true);
    await page.waitForFunction(
      (wanted) => document.querySelector('#grid-status')?.textContent === wanted,
      {},
      `Saved title of ${first}.`,
    );
    expect((await stored(first)).title).toBe('My title');

    // Take theirs: nothing written, the cell shows their value.
    await openEditor(second, 'title');
    await t.http
      .patch(`/api/v1/objects/ticket/records/${second}`)
      .set(bearer(otherKey))
      .send({ title: 'Their other title' })
      .expect(200);
    await typeAndEnter('My other title');
    await page.waitForSelector('#grid-conflict:not([hidden])');
    expect(await text('#grid-conflict dd.theirs')).toBe('Their other title');
    await page.click('#grid-conflict button.take-theirs');
    await cellShows(second, 'title', 'Their other title');
    expect(await page.$eval(cellSelector(second, 'title'), (cell) => cell.classList.contains('conflict'))).toBe(false);
    expect((await stored(second)).title).toBe('Their other title');

    // The two 412 answers are the only errors the browser logged.
    expect(consoleErrors).toHaveLength(2);
    for (const error of consoleErrors) expect(error).toMatch(/412/);
  });

  it("shows another key's writes from the change feed: a changed cell flashes, a deleted row is struck through", async () => {
    await openGrid();
    const id = (await rowIds())[3];
    const before = await page.$eval(cellSelector(id, 'hours'), (cell) => cell.textContent);
    expect(before).not.toBe('99.5');
    await t.http.patch(`/api/v1/objects/ticket/records/${id}`).set(bearer(otherKey)).send({ hours: 99.5 }).expect(200);
    await page.waitForFunction(
      (selector) => {
        const cell = document.querySelector(selector);
        return cell?.textContent === '99.5' && cell.classList.contains('flash');
      },
      FEED_WAIT,
      cellSelector(id, 'hours'),
    );
    // Only the changed cell lights up.
    expect(await page.$$eval('#grid td.flash', (cells) => cells.map((cell) => (cell as HTMLElement).dataset.field))).toEqual([
      'hours',
    ]);

    // A record another key deletes stays in view, struck through, and can no longer be edited.
    const gone = (await rowIds())[4];
    await t.http.delete(`/api/v1/objects/ticket/records/${gone}`).set(bearer(otherKey)).expect(204);
    await page.waitForSelector(`#grid tr.deleted[data-id="${gone}"]`, FEED_WAIT);
    await page.click(cellSelector(gone, 'title'), { count: 2 });
    expect(await page.$$eval('input.cell-editor', (inputs) => inputs.length)).toBe(0);
    expect(consoleErrors).toEqual([]);
  });

  it('reopens a stream the server ended with a new stream token, and misses none of the changes in between', async () => {
    const policy = (read: boolean) => ({ objects: { ticket: { read, update: read } } });
    await t.http
      .post('/api/v1/policies')
      .set(bearer(t.adminKey))
      .send({ name: 'ticket-followers', ...policy(true) })
      .expect(201);
    let tokenRequests = 0;
    page.on('request', (request) => {
      if (request.method() === 'POST' && new URL(request.url()).pathname === '/api/v1/stream-tokens') tokenRequests++;
    });
    await openGrid(await newKey('follower', ['ticket-followers']));
    const [, , , , , a, b, c] = await rowIds();
    const patch = (id: string, hours: number) =>
      t.http.patch(`/api/v1/objects/ticket/records/${id}`).set(bearer(otherKey)).send({ hours }).expect(200);
    await patch(a, 61);
    await cellShows(a, 'hours', '61');

    // The key may no longer read tickets: the server ends its stream at the next change.
    await t.http.put('/api/v1/policies/ticket-followers').set(bearer(t.adminKey)).send(policy(false)).expect(200);
    await patch(b, 62);
    await page.waitForSelector('#feed-status:not([data-state="live"])', FEED_WAIT);
    await patch(c, 63);
    // Readable again; the token the stream opened with has expired by now.
    await t.http.put('/api/v1/policies/ticket-followers').set(bearer(t.adminKey)).send(policy(true)).expect(200);
    await page.waitForSelector('#feed-status[data-state="live"]', FEED_WAIT);
    await cellShows(b, 'hours', '62');
    await cellShows(c, 'hours', '63');
    // One token to open the stream, at least one more to reopen it.
    expect(tokenRequests).toBeGreaterThan(1);
    // The refusals of the expired token (and of the stream while the key could not read) are all the browser logged.
    for (const error of consoleErrors) expect(error).toMatch(/status of (401|404)/);
  });

  it('builds its columns from what the key may see: no column for a field its policy hides', async () => {
    await t.http
      .post('/api/v1/policies')
      .set(bearer(t.adminKey))
      .send({ name: 'tickets-without-hours', objects: { ticket: { read: true, update: true, hiddenFields: ['hours'] } } })
      .expect(201);
    await openGrid(await newKey('restricted', ['tickets-without-hours']));
    expect(await headerNames()).toEqual(['id', 'title', 'priority']);
    expect(await page.$$eval('#grid td[data-field="hours"]', (cells) => cells.length)).toBe(0);
    expect((await columnValues('title')).every((title) => title.length > 0)).toBe(true);
    expect(consoleErrors).toEqual([]);
  });

  it('sorts by a clicked header, both ways, and pages on with the cursor in that order', async () => {
    await openGrid();
    const hours = async () => (await columnValues('hours')).map(Number);
    const ascending = (values: number[]) => values.every((value, i) => i === 0 || values[i - 1] <= value);

    await page.click('#grid th[title="hours"] button');
    await page.waitForSelector('#grid th[title="hours"][aria-sort="ascending"]');
    const firstPage = await hours();
    const [{ min }] = await t.sql<{ min: number }>(`select min(hours)::float as min from data.ticket`);
    expect(firstPage[0]).toBe(min);
    expect(ascending(firstPage)).toBe(true);
    const firstIds = await rowIds();

    await page.click('#next');
    await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.startsWith('26–'));
    const secondPage = await hours();
    expect(secondPage.length).toBeGreaterThan(0);
    expect(ascending([...firstPage, ...secondPage])).toBe(true);
    await page.click('#prev');
    await page.waitForFunction(() => document.querySelector('#page-info')?.textContent?.startsWith('1–25 of'));
    expect(await rowIds()).toEqual(firstIds);

    await page.click('#grid th[title="hours"] button');
    await page.waitForSelector('#grid th[title="hours"][aria-sort="descending"]');
    const descending = await hours();
    expect(ascending([...descending].reverse())).toBe(true);
    const [{ max }] = await t.sql<{ max: number }>(`select max(hours)::float as max from data.ticket`);
    expect(descending[0]).toBe(max);
    expect(consoleErrors).toEqual([]);
  });

  it('narrows the records to a saved view, and to a search', async () => {
    await t.http
      .post('/api/v1/objects/ticket/views')
      .set(bearer(gridKey))
      .send({
        name: 'long_tickets',
        label: 'Long tickets',
        where: { hours: { $gt: 20 } },
        orderBy: [{ field: 'hours', order: 'desc' }],
        fields: ['title', 'hours'],
      })
      .expect(201);
    await openGrid();
    await page.select('#view', 'long_tickets');
    await page.waitForFunction(() => document.querySelector('#grid-caption')?.textContent?.includes('Long tickets'));
    expect(await headerNames()).toEqual(['id', 'title', 'hours']);
    const [long] = await t.sql<{ n: string }>(`select count(*) as n from data.ticket where hours > 20`);
    const hours = (await columnValues('hours')).map(Number);
    expect(hours).toHaveLength(Number(long.n));
    expect(hours.every((value) => value > 20)).toBe(true);
    expect(await page.$eval('#grid th[title="hours"]', (th) => th.getAttribute('aria-sort'))).toBe('descending');

    await page.select('#view', '');
    await page.type('#search', 'ticket 1');
    await page.keyboard.press('Enter');
    const [found] = await t.sql<{ n: string }>(`select count(*) as n from data.ticket where title ilike '%ticket 1%'`);
    expect(Number(found.n)).toBeGreaterThan(0);
    await page.waitForFunction(
      (wanted) => document.querySelector('#page-info')?.textContent === wanted,
      {},
      `1–${found.n} of ${found.n}`,
    );
    expect((await columnValues('title')).every((title) => title.toLowerCase().includes('ticket 1'))).toBe(true);
    expect(consoleErrors).toEqual([]);
  });

  it('pastes rows from a spreadsheet as one batch: the rows from the cell down updated, those past the end (or in the new row) created', async () => {
    await openGrid();
    const writes = recordWrites();
    const ids = await rowIds();
    expect(ids).toHaveLength(25);
    const [secondLast, last] = ids.slice(-2);
    // As a spreadsheet copies it: tab-separated, a cell with quotes in double quotes.
    await pasteInto(
      cellSelector(secondLast, 'title'),
      'Pasted one\thigh\t1.5\r\nPasted two\tlow\t2.5\r\n"Pasted ""three"""\tnormal\t3.5\r\n',
    );
    await page.waitForFunction(
      () => document.querySelector('#grid-status')?.textContent === 'Pasted 3 rows in one batch: 2 updated, 1 created.',
    );
    expect(writes.map((write) => `${write.method} ${write.url}`)).toEqual(['POST /api/v1/objects/ticket/records/batch']);

    expect(await stored(secondLast)).toMatchObject({ title: 'Pasted one', priority: 'high', hours: 1.5 });
    expect(await stored(last)).toMatchObject({ title: 'Pasted two', priority: 'low', hours: 2.5 });
    const created = await t.sql<Ticket>(`select id, priority, hours::float as hours from data.ticket where title = $1`, [
      'Pasted "three"',
    ]);
    expect(created).toEqual([{ id: expect.any(String) as unknown, priority: 'normal', hours: 3.5 }]);
    // The new record is on the page, after the others.
    expect((await rowIds()).slice(-1)).toEqual([created[0].id]);
    expect(await text(cellSelector(created[0].id, 'title'))).toBe('Pasted "three"');

    // Into the new row below the records: every pasted row is a new record.
    await pasteInto('#grid tfoot tr.new-row td[data-field="title"]', 'Pasted four\tlow\nPasted five\thigh');
    await page.waitForFunction(
      () => document.querySelector('#grid-status')?.textContent === 'Pasted 2 rows in one batch: 0 updated, 2 created.',
    );
    const added = await t.sql<{ title: string; priority: string }>(
      `select title, priority from data.ticket where title like 'Pasted f%' order by title`,
    );
    expect(added).toEqual([
      { title: 'Pasted five', priority: 'high' },
      { title: 'Pasted four', priority: 'low' },
    ]);
    expect(writes).toHaveLength(2);
    expect(consoleErrors).toEqual([]);
  });
});
