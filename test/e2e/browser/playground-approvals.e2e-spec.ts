import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Page } from 'puppeteer-core';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from '../../../src/playground/playground.paths';
import { sentMessages, startAppWithMockLlm } from '../../support/agent-fixtures';
import { launchBrowser, type TestBrowser } from '../../support/browser';
import { listen } from '../../support/chat-helpers';
import { match } from '../../support/matchers';
import { MockLlmServer, MockReply } from '../../support/mock-llm.server';
import { asAdmin, createAgent, createApiKey, createObject, fieldSpec } from '../../support/fixtures';
import { bodyOf } from '../../support/responses';
import { bearer, TestApp } from '../../support/test-app';
import { watchEachTest } from './watched-page';

if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
  throw new Error('The playground is not built: run npm run build first (npm test does)');
}

interface Item {
  id: string;
  sku: string;
  qty: number | null;
}

let t: TestApp;
let llm: MockLlmServer;
let baseUrl: string;
let memberKey: string;
let chromium: TestBrowser;
let page: Page;
let consoleErrors: string[];

const item = async (sku: string): Promise<Item> => {
  const res = await t.http.get('/api/v1/objects/item/records').set(bearer(memberKey)).expect(200);
  return bodyOf<{ records: Item[] }>(res).records.find((record) => record.sku === sku)!;
};

/** An app with an item object, a writer agent that may update items, a member key, and Chromium. */
function useApp(env: Record<string, string> = {}): void {
  beforeAll(async () => {
    ({ t, llm } = await startAppWithMockLlm({ env: { PLAYGROUND: 'true', CHAT_POLL_INTERVAL_MS: '200', ...env } }));
    baseUrl = await listen(t);
    await createObject(t, 'item', [
      fieldSpec('sku', 'text', { label: 'SKU', required: true, unique: true, searchable: true }),
      fieldSpec('qty', 'integer', { label: 'Quantity' }),
    ]);
    for (const [sku, qty] of [
      ['a-1', 1],
      ['a-2', 2],
      ['a-3', 3],
    ] as const) {
      await t.http.post('/api/v1/objects/item/records').set(asAdmin(t)).send({ sku, qty }).expect(201);
    }
    await createAgent(t, {
      name: 'writer',
      label: 'Writer',
      instructions: 'You keep the items up to date.',
      tools: ['query_records', 'update_record'],
      writes: { item: ['update'] },
    });
    memberKey = (await createApiKey(t, { name: 'clerk', role: 'member', subject: 'clerk' })).secret;
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
}

/** Opens the page with the key, the writer agent, in a durable chat, and asks. */
async function ask(question: string): Promise<void> {
  await page.goto(`${baseUrl}/`);
  await page.type('#api-key', memberKey);
  await page.click('#key-form button[type=submit]');
  await page.waitForFunction(() =>
    [...document.querySelectorAll('#agent option')].some((o) => o.textContent?.includes('writer')),
  );
  await page.select('#agent', 'writer');
  if (!(await page.$eval('#durable', (box) => (box as HTMLInputElement).checked))) await page.click('#durable');
  await page.waitForFunction(() => !document.querySelector<HTMLButtonElement>('#send')?.disabled);
  await page.type('#question', question);
  await page.keyboard.press('Enter');
  await page.waitForSelector('.approval-card[data-outcome="pending"] .approval-approve:not([disabled])');
}

/** The card's diff rows and what it says, as a person reads them. */
const card = () =>
  page.$eval('.approval-card', (node) => ({
    tool: node.querySelector('.approval-tool')?.textContent,
    object: node.querySelector('.approval-object')?.textContent,
    record: node.querySelector<HTMLElement>('.approval-change')?.dataset.recordId,
    rows: [...node.querySelectorAll('.approval-diff tbody tr')].map((row) => [...row.children].map((cell) => cell.textContent)),
    outcome: (node as HTMLElement).dataset.outcome,
    text: node.querySelector('.approval-outcome')?.textContent,
  }));

const answered = (answer: string) =>
  page.waitForFunction(
    (wanted) => [...document.querySelectorAll('.message.assistant .answer')].some((node) => node.textContent === wanted),
    {},
    answer,
  );

/** The playground's approval card: a durable chat's write proposal shown as a diff, decided in the page. */
describe('playground: writes with approval', () => {
  useApp();

  it('shows the proposal as a diff; Approve writes the record and the answer goes on', async () => {
    const target = await item('a-1');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_up', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 40 } } },
      ]),
      MockReply.text('Set a-1 to 40.'),
    );
    await ask('Set a-1 to 40');

    expect(await card()).toEqual({
      tool: 'update_record',
      object: 'item',
      record: target.id,
      rows: [['qty', '1', '40']],
      outcome: 'pending',
      text: match.stringContaining('Nothing is written until you approve'),
    });
    // Shown, not written.
    expect((await item('a-1')).qty).toBe(1);

    await page.click('.approval-card .approval-approve');
    await answered('Set a-1 to 40.');
    await page.waitForSelector('.approval-card[data-outcome="written"]');
    expect(await card()).toMatchObject({ outcome: 'written', text: 'Written (approved by clerk).' });
    expect(await page.$eval('.approval-card .approval-actions', (node) => (node as HTMLElement).hidden)).toBe(true);
    expect((await item('a-1')).qty).toBe(40);
    // The model read the write's result before answering.
    const result = sentMessages(llm, 1).find((m) => m.role === 'tool' && m.tool_call_id === 'call_up');
    expect(JSON.parse(result!.content!)).toMatchObject({ status: 'written', approvedBy: 'clerk' });
    expect(await page.$eval('#chat-error', (node) => node.textContent)).toBe('');
  });

  it('Reject writes nothing, and the model reads the rejection with its reason', async () => {
    const target = await item('a-2');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_no', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 0 } } },
      ]),
      MockReply.text('Understood, a-2 stays as it is.'),
    );
    await ask('Empty a-2');
    expect((await card()).rows).toEqual([['qty', '2', '0']]);

    await page.type('.approval-card .approval-reason', 'stock count is on Friday');
    await page.click('.approval-card .approval-reject');
    await answered('Understood, a-2 stays as it is.');
    await page.waitForSelector('.approval-card[data-outcome="rejected"]');
    expect((await card()).text).toBe('Rejected: nothing was written. Reason: stock count is on Friday');
    expect((await item('a-2')).qty).toBe(2);
    const result = sentMessages(llm, 1).find((m) => m.role === 'tool' && m.tool_call_id === 'call_no');
    expect(result!.content).toContain('approval_rejected');
    expect(result!.content).toContain('stock count is on Friday');
  });

  it('shows a waiting proposal again after a reload; a record changed meanwhile: Approve writes nothing, the card says so', async () => {
    const target = await item('a-3');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_late', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 30 } } },
      ]),
      MockReply.text('Someone changed a-3 first; nothing was written.'),
    );
    await ask('Set a-3 to 30');
    await page.reload();
    await page.waitForSelector('.approval-card[data-outcome="pending"] .approval-approve:not([disabled])');
    expect((await card()).rows).toEqual([['qty', '3', '30']]);

    // Someone else edits the record between the proposal and the approval.
    await t.http.patch(`/api/v1/objects/item/records/${target.id}`).set(bearer(t.adminKey)).send({ qty: 33 }).expect(200);
    await page.click('.approval-card .approval-approve');
    await answered('Someone changed a-3 first; nothing was written.');
    await page.waitForSelector('.approval-card[data-outcome="version_changed"]');
    expect((await card()).text).toBe('Not written: the record changed after the proposal.');
    expect((await item('a-3')).qty).toBe(33);
  });
});

describe('playground: an approval that comes too late', () => {
  // The sweep waits: the late click is what finds the proposal expired.
  useApp({ APPROVAL_TTL_S: '1', CHAT_HEARTBEAT_INTERVAL_MS: '600000', CHAT_STALE_AFTER_MS: '3600000' });

  it('shows the refusal and the proposal as expired; nothing is written and the answer goes on', async () => {
    const target = await item('a-1');
    llm.enqueue(
      MockReply.toolCalls([
        { id: 'call_slow', name: 'update_record', arguments: { objectName: 'item', recordId: target.id, values: { qty: 10 } } },
      ]),
      MockReply.text('The proposal expired; a-1 is unchanged.'),
    );
    await ask('Set a-1 to 10');
    await sleep(1500);
    await page.click('.approval-card .approval-approve');

    await answered('The proposal expired; a-1 is unchanged.');
    await page.waitForSelector('.approval-card[data-outcome="expired"]');
    expect(await card()).toMatchObject({
      rows: [['qty', '1', '10']],
      text: 'Expired: nobody decided in time; nothing was written.',
    });
    await page.waitForSelector('#chat-error code');
    expect(await page.$eval('#chat-error code', (node) => node.textContent)).toBe('approval_invalid');
    expect((await item('a-1')).qty).toBe(1);
    const result = sentMessages(llm, 1).find((m) => m.role === 'tool' && m.tool_call_id === 'call_slow');
    expect(result!.content).toContain('approval_expired');
    // The browser logs the refused request itself; nothing else went wrong.
    expect(consoleErrors).toEqual([expect.stringContaining('status of 403')]);
    consoleErrors.length = 0;
  });
});
