import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { startAppWithMockLlm } from '../../support/agent-fixtures';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { listen } from '../../support/chat-helpers';
import { asAdmin, createAgent, createApiKey, createObject, fieldSpec } from '../../support/fixtures';
import { MockLlmServer, MockReply } from '../../support/mock-llm.server';
import { bodyOf } from '../../support/responses';
import { bearer, TestApp } from '../../support/test-app';
import { watchEachTest } from './watched-page';

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

/** Waits that depend on the change feed or a re-read: generous, as the machine may be busy. */
const WAIT = { timeout: 15_000 };

interface Item {
  id: string;
  sku: string;
  qty: number | null;
}

let t: TestApp;
let llm: MockLlmServer;
let baseUrl: string;
let clerkKey: string;
let chromium: TestBrowser;
let page: Page;
let consoleErrors: string[];

/** Creates an item as the clerk (the person at the page), so that its creation is theirs. */
async function createItem(sku: string, qty: number): Promise<Item> {
  const res = await t.http.post('/api/v1/objects/item/records').set(bearer(clerkKey)).send({ sku, qty }).expect(201);
  return bodyOf<Item>(res);
}

async function stored(id: string): Promise<Item> {
  return bodyOf<Item>(await t.http.get(`/api/v1/objects/item/records/${id}`).set(asAdmin(t)).expect(200));
}

const cellSelector = (id: string, field: string) => `#grid tr[data-id="${id}"] td[data-field="${field}"]`;

const cellShows = (id: string, field: string, value: string) =>
  page.waitForFunction(
    (selector, wanted) => document.querySelector(selector)?.textContent === wanted,
    WAIT,
    cellSelector(id, field),
    value,
  );

const statusIs = (text: string) =>
  page.waitForFunction((wanted) => document.querySelector('#grid-status')?.textContent === wanted, WAIT, text);

/** The grid's rows as the person sees them: id, sku, qty. */
const gridRows = () =>
  page.$$eval('#grid tbody tr:not(.deleted)', (rows) =>
    rows.map((row) => [...row.cells].map((cell) => cell.textContent ?? '').slice(0, 3)),
  );

/** Loads the page with the clerk's key and waits for the items and their live changes. */
async function openGrid(): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await page.type('#api-key', clerkKey);
  await page.click('#key-form button[type=submit]');
  await page.waitForFunction(
    () =>
      document.querySelector<HTMLSelectElement>('#object')?.value === 'item' &&
      document.querySelectorAll('#grid tbody tr').length > 0,
    WAIT,
  );
  await page.waitForSelector('#feed-status[data-state="live"]', WAIT);
}

/** Selects a record's row (a click on one of its cells), as History and Delete act on it. */
async function selectRow(id: string): Promise<void> {
  await page.click(cellSelector(id, 'sku'));
  await page.waitForSelector(`#record-history:not([disabled])[aria-label="History of record ${id}"]`);
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

async function pressCtrlZ(): Promise<void> {
  await page.keyboard.down('Control');
  await page.keyboard.press('z');
  await page.keyboard.up('Control');
}

/** The browser logs the refused requests (409) itself: those, and nothing else, went wrong. */
function expectOnlyConflictsLogged(): void {
  expect(consoleErrors.length).toBeGreaterThan(0);
  for (const error of consoleErrors) expect(error).toContain('status of 409');
  consoleErrors.length = 0;
}

describe('playground: record history, the trash and undo', () => {
  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { PLAYGROUND: 'true', CHAT_POLL_INTERVAL_MS: '200' } }));
    baseUrl = await listen(t);
    await createObject(t, 'item', [
      fieldSpec('sku', 'text', { label: 'SKU', required: true, unique: true, searchable: true }),
      fieldSpec('qty', 'integer', { label: 'Quantity' }),
    ]);
    await createAgent(t, {
      name: 'writer',
      label: 'Writer',
      instructions: 'You keep the items up to date.',
      tools: ['query_records', 'update_records'],
      writes: { item: ['update'] },
    });
    clerkKey = (await createApiKey(t, { name: 'clerk', role: 'member', subject: 'clerk' })).secret;
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

  it("shows a record's versions (who, how, before → after) and Restore writes a version back", async () => {
    const item = await createItem('h-1', 1);
    await t.http.patch(`/api/v1/objects/item/records/${item.id}`).set(asAdmin(t)).send({ qty: 5 }).expect(200);
    await openGrid();
    await cellShows(item.id, 'qty', '5');

    await selectRow(item.id);
    await page.click('#record-history');
    await page.waitForSelector('#history-panel:not([hidden]) #history-list li.version');
    expect(await page.$eval('#history-title', (node) => node.textContent)).toBe(`History of record ${item.id}`);
    const versions = () =>
      page.$$eval('#history-list li.version', (items) =>
        items.map((node) => ({
          op: (node as HTMLElement).dataset.op,
          via: (node as HTMLElement).dataset.via,
          title: node.querySelector('strong')?.textContent,
          changes: [...node.querySelectorAll('.version-changes tbody tr')].map((row) =>
            [...row.children].map((cell) => cell.textContent),
          ),
          restore: node.querySelector('button.restore-version')?.getAttribute('aria-label') ?? null,
        })),
      );
    const before = await versions();
    expect(before).toEqual([
      { op: 'update', via: 'api', title: 'Updated by someone else', changes: [['qty', '1', '5']], restore: null },
      {
        op: 'create',
        via: 'api',
        title: 'Created by you',
        changes: expect.arrayContaining([
          ['sku', '—', 'h-1'],
          ['qty', '—', '1'],
        ]) as unknown,
        restore: expect.stringMatching(/^Restore version \d+ of record /) as unknown,
      },
    ]);

    // Back to the version as created: the row shows it, the record is so, and the restore is a version of its own.
    await page.click('#history-list li.version:nth-child(2) button.restore-version');
    await cellShows(item.id, 'qty', '1');
    expect((await stored(item.id)).qty).toBe(1);
    await page.waitForFunction(() => document.querySelectorAll('#history-list li.version').length === 3, WAIT);
    const after = await versions();
    expect(after[0]).toMatchObject({
      via: 'restore',
      title: expect.stringContaining('by you') as unknown,
      changes: [['qty', '5', '1']],
    });
    await statusIs(
      `Restored record ${item.id} to version ${await page.$eval('#history-list li.version:nth-child(3)', (node) => (node as HTMLElement).dataset.version)}.`,
    );
  });

  it('deletes a record to the trash and restores it from there; a taken unique value shows the refusal', async () => {
    const item = await createItem('t-1', 7);
    const taken = await createItem('t-2', 8);
    await openGrid();

    // Deleted from the grid: struck through, and in the trash.
    await selectRow(item.id);
    await page.click('#record-delete');
    await page.waitForSelector(`#grid tr.deleted[data-id="${item.id}"]`);
    await t.http.get(`/api/v1/objects/item/records/${item.id}`).set(asAdmin(t)).expect(404);
    await page.click('#trash-open');
    await page.waitForSelector(`#trash-panel:not([hidden]) #trash-list li[data-id="${item.id}"]`, WAIT);
    expect(await page.$eval(`#trash-list li[data-id="${item.id}"]`, (node) => node.textContent)).toContain('t-1');

    await page.click(`#trash-list li[data-id="${item.id}"] button.restore-trashed`);
    await page.waitForFunction((id) => !document.querySelector(`#trash-list li[data-id="${id}"]`), WAIT, item.id);
    await statusIs(`Restored record ${item.id} from the trash.`);
    await cellShows(item.id, 'sku', 't-1');
    expect(await stored(item.id)).toMatchObject({ sku: 't-1', qty: 7 });

    // Deleted elsewhere, and its sku taken by a live record meanwhile: the restore is refused, nothing changes.
    await t.http.delete(`/api/v1/objects/item/records/${taken.id}`).set(asAdmin(t)).expect(204);
    const usurper = await createItem('t-2', 99);
    await page.click('#trash-close');
    await page.click('#trash-open');
    await page.waitForSelector(`#trash-list li[data-id="${taken.id}"] button.restore-trashed`, WAIT);
    await page.click(`#trash-list li[data-id="${taken.id}"] button.restore-trashed`);
    await page.waitForSelector('#trash-error:not([hidden]) code', WAIT);
    expect(await page.$eval('#trash-error code', (node) => node.textContent)).toBe('unique_violation');
    expect(await page.$eval('#trash-error', (node) => node.textContent.length)).toBeGreaterThan('unique_violation'.length + 2);
    expect(await page.$eval(`#trash-list li[data-id="${taken.id}"] button.restore-trashed`, (node) => node.disabled)).toBe(false);
    await t.http.get(`/api/v1/objects/item/records/${taken.id}`).set(asAdmin(t)).expect(404);
    expect((await stored(usurper.id)).qty).toBe(99);
    expectOnlyConflictsLogged();
  });

  it('Ctrl+Z undoes a paste as one: the rows updated are as before, the row it added is gone', async () => {
    await createItem('p-1', 11);
    await createItem('p-2', 12);
    await openGrid();
    const before = await gridRows();
    const ids = before.map(([id]) => id);
    const [secondLast, last] = ids.slice(-2);

    await pasteInto(cellSelector(secondLast, 'sku'), 'pasted-a\t101\npasted-b\t102\npasted-c\t103\n');
    await statusIs('Pasted 3 rows in one batch: 2 updated, 1 created.');
    expect(await stored(secondLast)).toMatchObject({ sku: 'pasted-a', qty: 101 });
    expect(await stored(last)).toMatchObject({ sku: 'pasted-b', qty: 102 });

    // The focus is on the cell pasted into, not in a text box: Ctrl+Z is the grid's Undo.
    await pressCtrlZ();
    await statusIs('Undid your last change.');
    await page.waitForFunction((count) => document.querySelectorAll('#grid tbody tr').length === count, WAIT, before.length);
    expect(await gridRows()).toEqual(before);
    const [a, b] = before.slice(-2);
    expect(await stored(secondLast)).toMatchObject({ sku: a[1], qty: Number(a[2]) });
    expect(await stored(last)).toMatchObject({ sku: b[1], qty: Number(b[2]) });
    const [{ count }] = await t.sql<{ count: number }>(`select count(*)::int as count from data.item where sku like 'pasted-%'`);
    expect(count).toBe(0);
  });

  it('an undo of a change someone changed since shows the conflict and writes nothing', async () => {
    const item = await createItem('c-1', 1);
    await openGrid();
    const read = page.waitForResponse(
      (response) => response.request().method() === 'GET' && new URL(response.url()).pathname.endsWith(`/records/${item.id}`),
    );
    await page.click(cellSelector(item.id, 'qty'), { count: 2 });
    await page.waitForSelector(`${cellSelector(item.id, 'qty')} input.cell-editor`);
    await read;
    await page.$eval('input.cell-editor', (input) => (input.value = ''));
    await page.type('input.cell-editor', '2');
    await page.keyboard.press('Enter');
    await statusIs(`Saved qty of ${item.id}.`);
    expect((await stored(item.id)).qty).toBe(2);

    // A colleague changes the same field after.
    await t.http.patch(`/api/v1/objects/item/records/${item.id}`).set(asAdmin(t)).send({ qty: 3 }).expect(200);
    await cellShows(item.id, 'qty', '3');

    await page.click('#undo');
    await page.waitForSelector('#undo-conflict:not([hidden]) .revert-conflicts li', WAIT);
    const conflicts = await page.$$eval('#undo-conflict .revert-conflicts li', (items) =>
      items.map((node) => ({
        record: (node as HTMLElement).dataset.recordId,
        field: (node as HTMLElement).dataset.field,
        expected: node.querySelector('.expected')?.textContent,
        current: node.querySelector('.current')?.textContent,
        text: node.textContent,
      })),
    );
    expect(conflicts).toEqual([
      { record: item.id, field: 'qty', expected: '2', current: '3', text: `Record ${item.id}, qty: expected 2, now 3` },
    ]);
    expect(await page.$eval('#undo-conflict p', (node) => node.textContent)).toContain('Nothing was undone');
    expect((await stored(item.id)).qty).toBe(3);
    expect(await page.$eval(cellSelector(item.id, 'qty'), (node) => node.textContent)).toBe('3');
    expect(await page.$eval('#undo', (node) => (node as HTMLButtonElement).disabled)).toBe(false);
    expectOnlyConflictsLogged();
  });

  it("reverts an approved agent write as one change set from the chat's Undo this change", async () => {
    const first = await createItem('g-1', 1);
    const second = await createItem('g-2', 2);
    llm.enqueue(
      MockReply.toolCalls([
        {
          id: 'call_many',
          name: 'update_records',
          arguments: { objectName: 'item', ids: [first.id, second.id], values: { qty: 50 } },
        },
      ]),
      MockReply.text('Both set to 50.'),
    );
    await openGrid();
    await page.waitForFunction(
      () => [...document.querySelectorAll('#agent option')].some((o) => o.textContent?.includes('writer')),
      WAIT,
    );
    await page.select('#agent', 'writer');
    if (!(await page.$eval('#durable', (box) => (box as HTMLInputElement).checked))) await page.click('#durable');
    await page.waitForFunction(() => !document.querySelector<HTMLButtonElement>('#send')?.disabled);
    await page.type('#question', 'Set g-1 and g-2 to 50');
    await page.keyboard.press('Enter');
    await page.waitForSelector('.approval-card[data-outcome="pending"] .approval-approve:not([disabled])', WAIT);
    await page.click('.approval-card .approval-approve');
    await page.waitForSelector('.approval-card[data-outcome="written"] .approval-undo:not([hidden]) button', WAIT);
    await page.waitForFunction(
      () => [...document.querySelectorAll('.message.assistant .answer')].some((node) => node.textContent === 'Both set to 50.'),
      WAIT,
    );
    expect((await stored(first.id)).qty).toBe(50);
    expect((await stored(second.id)).qty).toBe(50);
    const changeSetId = await page.$eval('.approval-card', (node) => (node as HTMLElement).dataset.changeSetId);
    expect(changeSetId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await page.$eval('.approval-undo button', (node) => node.textContent)).toBe('Undo this change');

    await page.click('.approval-undo button');
    await page.waitForSelector('.approval-undo[data-undo="undone"]', WAIT);
    expect(await page.$eval('.approval-undo-status', (node) => node.textContent)).toBe(
      'Undone: every record of this change is as it was before.',
    );
    expect((await stored(first.id)).qty).toBe(1);
    expect((await stored(second.id)).qty).toBe(2);
    // One revert of the one change set of the approval.
    const set = bodyOf<{ revertedBy?: string; records: number; via: string }>(
      await t.http.get(`/api/v1/change-sets/${changeSetId}`).set(bearer(clerkKey)).expect(200),
    );
    expect(set).toMatchObject({ via: 'approval', records: 2, revertedBy: expect.any(String) as unknown });
    // The grid shows the records as they are again.
    await cellShows(first.id, 'qty', '1');
    await cellShows(second.id, 'qty', '2');
  });
});
