import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { HTTPRequest, Page } from 'puppeteer-core';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { listen } from '../../support/chat-helpers';
import { asAdmin, createObject, fieldSpec, memberSecret } from '../../support/fixtures';
import { bodyOf } from '../../support/responses';
import { bearer, startTestApp, TestApp } from '../../support/test-app';
import { watchEachTest } from './watched-page';

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

/** Waits that depend on the change feed or a re-read: generous, as the machine may be busy; failing if never met. */
const WAIT = { timeout: 15_000 };

interface Account {
  id: string;
  name: string;
  target: number | null;
  pipeline: number;
  gap: number | null;
}

let t: TestApp;
let baseUrl: string;
/** The key at the page. */
let viewerKey: string;
/** Another person's key, writing deals and accounts through the API while the page is open. */
let sellerKey: string;
let chromium: TestBrowser;
let page: Page;
let consoleErrors: string[];
let acme: string;
let beta: string;

const cellSelector = (id: string, field: string) => `#grid tr[data-id="${id}"] td[data-field="${field}"]`;
const cellText = (id: string, field: string) => page.$eval(cellSelector(id, field), (cell) => cell.textContent ?? '');

const cellShows = (id: string, field: string, value: string) =>
  page.waitForFunction(
    (selector, wanted) => document.querySelector(selector)?.textContent === wanted,
    WAIT,
    cellSelector(id, field),
    value,
  );

const statusIs = (text: string) =>
  page.waitForFunction((wanted) => document.querySelector('#grid-status')?.textContent === wanted, WAIT, text);

async function createDeal(title: string, account: string, amount: number, stage = 'open'): Promise<string> {
  const res = await t.http
    .post('/api/v1/objects/deal/records')
    .set(bearer(sellerKey))
    .send({ title, account, amount, stage })
    .expect(201);
  return bodyOf<{ id: string }>(res).id;
}

async function patchDeal(id: string, values: Record<string, unknown>): Promise<void> {
  await t.http.patch(`/api/v1/objects/deal/records/${id}`).set(bearer(sellerKey)).send(values).expect(200);
}

/** The accounts as the API computes them for the page's key. */
async function accounts(): Promise<Map<string, Account>> {
  const res = await t.http.get('/api/v1/objects/account/records?limit=100').set(bearer(viewerKey)).expect(200);
  return new Map(bodyOf<{ records: Account[] }>(res).records.map((account) => [account.id, account]));
}

/** Loads the page with the viewer's key, shows `object`'s grid, and waits for its rows and live changes. */
async function openGrid(object: string): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await page.type('#api-key', viewerKey);
  await page.click('#key-form button[type=submit]');
  await page.waitForFunction(() => document.querySelectorAll('#grid tbody tr').length > 0, WAIT);
  if ((await page.$eval('#object', (select) => (select as HTMLSelectElement).value)) !== object) {
    await page.select('#object', object);
  }
  await page.waitForFunction(
    (name) =>
      document.querySelector('#grid-caption')?.textContent === `Records of ${name}` &&
      document.querySelectorAll('#grid tbody tr').length > 0,
    WAIT,
    object,
  );
  await page.waitForSelector('#feed-status[data-state="live"]', WAIT);
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

/** The API requests that write (anything but GET), with their bodies, as the page sent them. */
function recordWrites(): Array<{ method: string; url: string; body: unknown }> {
  const writes: Array<{ method: string; url: string; body: unknown }> = [];
  page.on('request', (request: HTTPRequest) => {
    const url = new URL(request.url());
    if (url.pathname.startsWith('/api/v1/objects/') && request.method() !== 'GET') {
      const data = request.postData();
      writes.push({ method: request.method(), url: url.pathname, body: data ? (JSON.parse(data) as unknown) : undefined });
    }
  });
  return writes;
}

describe('playground: computed fields in the grid', () => {
  beforeAll(async () => {
    t = await startTestApp({ env: { PLAYGROUND: 'true' } });
    baseUrl = await listen(t);
    await createObject(t, 'account', [
      fieldSpec('name', 'text', { required: true }),
      fieldSpec('target', 'currency', { label: 'Target' }),
    ]);
    await createObject(t, 'deal', [
      fieldSpec('title', 'text', { required: true }),
      fieldSpec('amount', 'currency', { label: 'Amount' }),
      fieldSpec('stage', 'select', { options: ['open', 'won', 'lost'] }),
      fieldSpec('account', 'lookup', { reference: 'account' }),
    ]);
    const addField = (object: string, spec: Record<string, unknown>) =>
      t.http.post(`/api/v1/objects/${object}/fields`).set(asAdmin(t)).send(spec).expect(201);
    await addField('account', {
      name: 'pipeline',
      label: 'Open pipeline',
      type: 'rollup',
      relation: 'deal.account',
      function: 'sum',
      field: 'amount',
      filter: { stage: 'open' },
    });
    // A formula over the rollup: it changes with the deals too.
    await addField('account', {
      name: 'gap',
      label: 'Gap to target',
      type: 'formula',
      expression: '{target} - {pipeline}',
      resultType: 'currency',
    });
    await addField('deal', {
      name: 'account_name',
      label: 'Account name',
      type: 'lookup_value',
      through: 'account',
      field: 'name',
    });
    // A value computed from a value computed from the deals themselves.
    await addField('deal', {
      name: 'account_pipeline',
      label: 'Account pipeline',
      type: 'lookup_value',
      through: 'account',
      field: 'pipeline',
    });

    const create = async (name: string, target: number) =>
      bodyOf<{ id: string }>(
        await t.http.post('/api/v1/objects/account/records').set(asAdmin(t)).send({ name, target }).expect(201),
      ).id;
    acme = await create('Acme', 1000);
    beta = await create('Beta', 500);
    viewerKey = await memberSecret(t, 'viewer');
    sellerKey = await memberSecret(t, 'seller');
    chromium = await launchBrowser();
  });
  afterAll(async () => {
    await chromium?.close();
    await t?.close();
  });

  watchEachTest(
    () => chromium.browser,
    () => 0,
    (watched) => ({ page, consoleErrors } = watched),
  );

  it('shows a formula and a rollup as read-only columns of their values, and a paste over them skips them', async () => {
    await createDeal('Acme one', acme, 300);
    await createDeal('Acme two', acme, 200);
    await createDeal('Acme won', acme, 400, 'won');
    await openGrid('account');

    // The values the API computes, shown as the same values of a stored currency field are.
    const api = await accounts();
    expect(api.get(acme)).toMatchObject({ pipeline: 500, gap: 500 });
    expect(api.get(beta)).toMatchObject({ pipeline: 0, gap: 500 });
    expect(await cellText(acme, 'pipeline')).toBe('500');
    expect(await cellText(acme, 'gap')).toBe('500');
    expect(await cellText(beta, 'pipeline')).toBe('0');
    expect(await cellText(acme, 'target')).toBe('1000');

    // Marked computed, with how the value is computed in the header's and the cells' titles.
    const header = (field: string) =>
      page.$eval(`#grid th[title="${field}"]`, (th) => ({
        computed: th.classList.contains('computed'),
        title: th.querySelector('button')?.title ?? '',
      }));
    expect(await header('pipeline')).toEqual({
      computed: true,
      title: 'Rollup: sum of deal.amount (by account) where stage = open (read-only)',
    });
    expect(await header('gap')).toEqual({ computed: true, title: 'Formula: {target} - {pipeline} (read-only)' });
    expect(await header('target')).toEqual({ computed: false, title: '' });
    const cell = (field: string) =>
      page.$eval(cellSelector(acme, field), (td) => ({
        computed: td.classList.contains('computed'),
        editable: td.classList.contains('editable'),
        title: (td as HTMLElement).title,
      }));
    expect(await cell('gap')).toEqual({
      computed: true,
      editable: false,
      title: 'Computed, read-only: Formula: {target} - {pipeline}',
    });
    expect(await cell('target')).toEqual({ computed: false, editable: true, title: '' });
    // A computed cell looks different from a stored one.
    const background = (field: string) => page.$eval(cellSelector(acme, field), (td) => getComputedStyle(td).backgroundColor);
    expect(await background('pipeline')).not.toBe(await background('target'));

    // No editor opens: not on a double click, Enter, or typing; the record is not even read for its version.
    const writes = recordWrites();
    const reads: string[] = [];
    page.on('request', (request) => {
      const path = new URL(request.url()).pathname;
      if (request.method() === 'GET' && path.startsWith('/api/v1/objects/account/records/')) reads.push(path);
    });
    await page.click(cellSelector(acme, 'pipeline'), { count: 2 });
    await statusIs(
      'Open pipeline is computed (Rollup: sum of deal.amount (by account) where stage = open): it cannot be edited.',
    );
    await page.click(cellSelector(acme, 'gap'));
    await page.keyboard.press('Enter');
    await page.keyboard.type('9');
    await statusIs('Gap to target is computed (Formula: {target} - {pipeline}): it cannot be edited.');
    expect(await page.$$eval('input.cell-editor', (inputs) => inputs.length)).toBe(0);
    expect(await cellText(acme, 'gap')).toBe('500');
    expect(reads).toEqual([]);

    // A paste over name, target, pipeline and gap writes name and target only, in one batch.
    await pasteInto(cellSelector(beta, 'name'), 'Beta Corp\t800\t1\t2\r\n');
    await statusIs('Pasted 1 row in one batch: 1 updated, 0 created. Skipped the computed columns Open pipeline, Gap to target.');
    expect(writes).toEqual([
      {
        method: 'POST',
        url: '/api/v1/objects/account/records/batch',
        body: { operations: [{ op: 'update', id: beta, record: { name: 'Beta Corp', target: 800 } }], atomic: true },
      },
    ]);
    expect((await accounts()).get(beta)).toMatchObject({ name: 'Beta Corp', target: 800, pipeline: 0, gap: 800 });
    // The record's own change brings its computed values, as computed after the write.
    await cellShows(beta, 'gap', '800');
    await cellShows(beta, 'pipeline', '0');

    // Pasted over computed columns only: nothing is sent.
    await pasteInto(cellSelector(acme, 'pipeline'), '1\t2');
    await page.waitForFunction(
      () => document.querySelector('#records-error')?.textContent?.includes('Open pipeline, Gap to target are computed'),
      WAIT,
    );
    expect(writes).toHaveLength(1);
    expect(consoleErrors).toEqual([]);
  });

  it("updates a rollup and the formula over it live when another key writes the account's deals", async () => {
    const moving = await createDeal('Moving', acme, 50);
    await openGrid('account');
    let navigations = 0;
    page.on('framenavigated', () => navigations++);
    const rereads: URL[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (request.method() === 'GET' && url.pathname === '/api/v1/objects/account/records') rereads.push(url);
    });
    const expected = async (id: string) => {
      const account = (await accounts()).get(id)!;
      await cellShows(id, 'pipeline', String(account.pipeline));
      await cellShows(id, 'gap', String(account.gap));
      return account;
    };
    const acmeBefore = await expected(acme);
    const betaBefore = await expected(beta);

    // A new open deal of Beta's.
    const created = await createDeal('Beta new', beta, 250);
    const betaAfter = await expected(beta);
    expect(betaAfter.pipeline).toBe(betaBefore.pipeline + 250);
    expect(await page.$eval(cellSelector(beta, 'pipeline'), (td) => td.classList.contains('flash'))).toBe(true);

    // A deal's amount changed.
    await patchDeal(created, { amount: 100 });
    expect((await expected(beta)).pipeline).toBe(betaBefore.pipeline + 100);

    // A deal moved from Acme to Beta: both rows change.
    await patchDeal(moving, { account: beta });
    expect((await expected(acme)).pipeline).toBe(acmeBefore.pipeline - 50);
    expect((await expected(beta)).pipeline).toBe(betaBefore.pipeline + 150);

    // Out of the filter (won), then deleted.
    await patchDeal(moving, { stage: 'won' });
    expect((await expected(beta)).pipeline).toBe(betaBefore.pipeline + 100);
    await t.http.delete(`/api/v1/objects/deal/records/${created}`).set(bearer(sellerKey)).expect(204);
    expect((await expected(beta)).pipeline).toBe(betaBefore.pipeline);

    // All of it without a reload, by reading the computed fields of the affected rows again.
    expect(navigations).toBe(0);
    expect(rereads.length).toBeGreaterThan(0);
    for (const url of rereads) {
      expect(url.searchParams.get('fields')).toBe('id,pipeline,gap');
      expect(JSON.parse(url.searchParams.get('where')!)).toEqual({ id: { $in: expect.any(Array) as unknown } });
    }
    expect(consoleErrors).toEqual([]);
  });

  it('updates a lookup value live when another key renames the record it reads', async () => {
    const deal = await createDeal('Looked up', acme, 10);
    await openGrid('deal');
    const name = (await accounts()).get(acme)!.name;
    await cellShows(deal, 'account_name', name);
    expect(await page.$eval('#grid th[title="account_name"] button', (button) => button.title)).toBe(
      'Lookup: name of the account that account points at (read-only)',
    );

    await t.http
      .patch(`/api/v1/objects/account/records/${acme}`)
      .set(bearer(sellerKey))
      .send({ name: 'Acme Renamed' })
      .expect(200);
    await cellShows(deal, 'account_name', 'Acme Renamed');
    // Every deal of the account's on the page shows it; the others keep theirs.
    const shown = await page.$$eval('#grid tbody tr', (rows) =>
      rows.map((row) => ({
        account: row.querySelector<HTMLElement>('td[data-field="account"]')?.textContent ?? '',
        name: row.querySelector<HTMLElement>('td[data-field="account_name"]')?.textContent ?? '',
      })),
    );
    expect(shown.length).toBeGreaterThan(1);
    for (const row of shown) {
      if (row.account === acme) expect(row.name).toBe('Acme Renamed');
      else if (row.account === beta) expect(row.name).not.toBe('Acme Renamed');
    }
    expect(shown.some((row) => row.account === beta)).toBe(true);
    expect(consoleErrors).toEqual([]);
  });

  it('updates a lookup value of a rollup on every row of the account when another of its deals changes', async () => {
    const first = await createDeal('Sibling one', beta, 1);
    const second = await createDeal('Sibling two', beta, 2);
    await openGrid('deal');
    const pipeline = async () => String((await accounts()).get(beta)!.pipeline);
    const before = await pipeline();
    await cellShows(first, 'account_pipeline', before);
    await cellShows(second, 'account_pipeline', before);

    // A third deal of Beta's: the account's pipeline changes, and with it what both deals on the page read of it.
    await createDeal('Sibling three', beta, 1000);
    const after = await pipeline();
    expect(after).toBe(String(Number(before) + 1000));
    await cellShows(first, 'account_pipeline', after);
    await cellShows(second, 'account_pipeline', after);
    expect(consoleErrors).toEqual([]);
  });
});
