import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import type { FieldResponse, ObjectResponse } from '../../src/metadata/metadata.dto';
import type { DeliveriesResponse, WebhookCreatedResponse, WebhookResponse } from '../../src/webhooks/webhook.dto';
import { eventually, listen } from '../support/chat-helpers';
import { bodyOf, idOf, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey } from '../support/fixtures';
import { OidcIssuer, TEST_AUDIENCE } from '../support/oidc-issuer';
import { WebhookReceiver, type ReceivedWebhook, WEBHOOK_TEST_ENV } from '../support/webhook-receiver';

/**
 * Random pairs of policies over one generated object: whatever surface a key reads (records, values,
 * aggregates, metadata, metric and view definitions, the data tools and their schemas, MCP, CSV, the
 * change feed, and the webhook deliveries of its own webhook), nothing it receives names a field, object,
 * metric or view outside its access, or holds a value of a hidden field or of a row outside its filter.
 * Every cell of the data carries a token of its own (and each formula a token derived from its inputs'),
 * so a leak anywhere in any body is a substring. The computed fields (formulas, a value through the
 * lookup, a count and a rollup back over it) go with their inputs: hidden with any of them, and the
 * totals cover only the rows the key may read.
 */

const MAIN = 'pmain';
const VAULT = 'pvault';
const TAGS = ['t1', 't2', 't3'];
/** Fields that a policy may hide; `ptitle` stays visible so that every readable row shows itself. */
const HIDEABLE = ['pnote', 'pcode', 'pscore', 'pday', 'ptag'] as const;
type Hideable = (typeof HIDEABLE)[number];
const ROWS = 12;
/** The rows that each run creates and deletes are numbered from here, one per run. */
const EXTRA_ROW = 100;
/** The first rows, one of each tag: each run's last writes, so that every key that reads a row hears of one last. */
const MARKER_ROWS = [0, 1, 2];

/** The token of one text cell: unique, and never a substring of another token. */
const cell = (field: string, row: number) => `zz${field.slice(1, 3).toUpperCase()}${row}zz`;
const vaultCell = (row: number) => `zzVAULT${row}zz`;
/** The tokens of the formulas: `pfx1` is LOWER(pcode), `pfx2` holds LOWER(pnote) (and pfx1). */
const pfx1Cell = (row: number) => cell('pcode', row).toLowerCase();
const pfx2Cell = (row: number) => cell('pnote', row).toLowerCase();
const metricName = (i: number) => `mq${i}x`;
const viewName = (i: number) => `vw${i}x`;
const rowTag = (row: number) => TAGS[row % TAGS.length];

const WEBHOOK_ENV = WEBHOOK_TEST_ENV;

interface MainAccess {
  read: boolean;
  rowTags: string[] | null;
  hidden: Hideable[];
}
interface KeyAccess {
  main: MainAccess;
  vault: boolean;
}

/**
 * The computed fields, each visible exactly when its inputs are: `uses` (hideable fields of pmain, at any
 * depth), `vault` (reads pvault); each also needs pmain itself (a rollup back over it included).
 */
interface ComputedDef {
  name: string;
  object: string;
  uses: Hideable[];
  vault: boolean;
  body: Record<string, unknown>;
}
const COMPUTED: ComputedDef[] = [
  {
    name: 'pfx1',
    object: MAIN,
    uses: ['pcode'],
    vault: false,
    body: { type: 'formula', expression: 'LOWER({pcode})', resultType: 'text' },
  },
  // A formula over a formula: hidden with pcode through pfx1 as well as with its own pnote.
  {
    name: 'pfx2',
    object: MAIN,
    uses: ['pcode', 'pnote'],
    vault: false,
    body: { type: 'formula', expression: "LOWER({pnote}) & '~' & {pfx1}", resultType: 'text' },
  },
  {
    name: 'pxsecret',
    object: MAIN,
    uses: [],
    vault: true,
    body: { type: 'lookup_value', through: 'plink', field: 'psecretname' },
  },
  // Kept in a column of its own: that whole-object total must never reach a key under a row filter.
  {
    name: 'pnum',
    object: VAULT,
    uses: [],
    vault: true,
    body: { type: 'count', relation: `${MAIN}.plink`, stored: true },
  },
  {
    name: 'psum',
    object: VAULT,
    uses: ['pscore'],
    vault: true,
    body: { type: 'rollup', relation: `${MAIN}.plink`, function: 'sum', field: 'pscore' },
  },
];

interface MetricDef {
  name: string;
  uses: Hideable[];
  /** Reads the other object (through the lookup, or as its own object). */
  vault?: boolean;
  body: Record<string, unknown>;
}
interface ViewDef {
  name: string;
  uses: Hideable[];
  vault?: boolean;
  body: Record<string, unknown>;
}

/** One row of pmain as the test knows it: its tag, the vault row it points at, its score now. */
interface RowState {
  row: number;
  id: string;
  tag: string;
  vaultRow: number;
  score: number;
  deleted: boolean;
}

/** One write of a run, as the webhooks must deliver it. */
interface Write {
  row: number;
  id: string;
  op: 'create' | 'update' | 'delete';
  tag: string;
}

const accessArb: fc.Arbitrary<KeyAccess> = fc.record({
  main: fc.record({
    read: fc.constantFrom(true, true, false),
    rowTags: fc.option(fc.subarray(TAGS, { minLength: 1, maxLength: 2 }), { nil: null }),
    hidden: fc.subarray([...HIDEABLE]),
  }),
  vault: fc.boolean(),
});

/** What the admin writes in a run besides the markers: the rows whose score it changes, the tag of the row it creates and deletes. */
const writesArb = fc.record({
  patched: fc.subarray(
    Array.from({ length: ROWS }, (_, r) => r).filter((r) => !MARKER_ROWS.includes(r)),
    { minLength: 1, maxLength: 3 },
  ),
  createdTag: fc.constantFrom(...TAGS),
});

function policyBody(name: string, access: KeyAccess): Record<string, unknown> {
  const objects: Record<string, unknown> = {};
  if (access.main.read) {
    objects[MAIN] = {
      read: true,
      ...(access.main.rowTags ? { rowFilter: { ptag: { $in: access.main.rowTags } } } : {}),
      hiddenFields: access.main.hidden,
    };
  }
  if (access.vault) objects[VAULT] = { read: true };
  return { name, objects };
}

const visibleField = (access: KeyAccess, f: Hideable) => access.main.read && !access.main.hidden.includes(f);
const rowVisible = (access: KeyAccess, tag: string) =>
  access.main.read && (access.main.rowTags === null || access.main.rowTags.includes(tag));
const computedVisible = (access: KeyAccess, def: ComputedDef) =>
  access.main.read && def.uses.every((f) => visibleField(access, f)) && (!def.vault || access.vault);

describe('access property: what a key or a signed-in user receives never reaches outside its policy', () => {
  let t: TestApp;
  let idp: OidcIssuer;
  let baseUrl: string;
  const receiver = new WebhookReceiver();
  const metricDefs: MetricDef[] = [];
  const viewDefs: ViewDef[] = [];
  const keys: Record<'a' | 'b', CreatedApiKeyResponse> = {} as never;
  /** Each principal's webhook on pmain (create, update, delete), to its own path of the receiver. */
  const webhooks: Record<'a' | 'b' | 'u', string> = {} as never;
  const vaultIds: string[] = [];
  /** Every row pmain ever had, the ones deleted since (in the trash, the feed, history) included. */
  const rows: RowState[] = [];
  const hookPath = (name: string) => `/hook-${name}`;

  const rowValues = (row: number, tag: string, vaultRow: number, score: number) => ({
    ptitle: cell('ptitle', row),
    ptag: tag,
    pnote: cell('pnote', row),
    pcode: cell('pcode', row),
    pscore: score,
    pday: `2026-0${1 + (row % 9)}-1${row % 10}`,
    plink: vaultIds[vaultRow],
  });

  beforeAll(async () => {
    await receiver.start();
    // A user of the application's identity provider beside the two keys: its group maps to a policy of its own.
    idp = await OidcIssuer.start({ 'user-u': { groups: ['prop-u-group'] } });
    // Each run reads every surface as three principals: far more requests a minute than a client makes.
    t = await startTestApp({
      env: { AUTH_OIDC_ISSUER: idp.issuer, AUTH_OIDC_AUDIENCE: TEST_AUDIENCE, RATE_LIMIT_PER_MINUTE: '0', ...WEBHOOK_ENV },
    });
    baseUrl = await listen(t);
    const admin = bearer(t.adminKey);
    await t.http
      .post('/api/v1/objects')
      .set(admin)
      .send({ name: VAULT, label: 'Vault', fields: [{ name: 'psecretname', label: 'Secret name', type: 'text' }] })
      .expect(201);
    for (let row = 0; row < 2; row++) {
      vaultIds.push(
        idOf(
          await t.http
            .post(`/api/v1/objects/${VAULT}/records`)
            .set(admin)
            .send({ psecretname: vaultCell(row) })
            .expect(201),
        ),
      );
    }
    await t.http
      .post('/api/v1/objects')
      .set(admin)
      .send({
        name: MAIN,
        label: 'Main',
        fields: [
          { name: 'ptitle', label: 'Title', type: 'text' },
          { name: 'ptag', label: 'Tag', type: 'select', options: TAGS },
          { name: 'pnote', label: 'Note', type: 'text' },
          { name: 'pcode', label: 'Code', type: 'text' },
          { name: 'pscore', label: 'Score', type: 'number' },
          { name: 'pday', label: 'Day', type: 'date' },
          // A lookup into the other object: a key that may not read it must not learn its name from here.
          { name: 'plink', label: 'Link', type: 'lookup', reference: VAULT },
        ],
      })
      .expect(201);
    for (let row = 0; row < ROWS; row++) {
      const id = idOf(
        await t.http
          .post(`/api/v1/objects/${MAIN}/records`)
          .set(admin)
          .send(rowValues(row, rowTag(row), row % 2, 1000 + row * 7))
          .expect(201),
      );
      rows.push({ row, id, tag: rowTag(row), vaultRow: row % 2, score: 1000 + row * 7, deleted: false });
    }

    // A second version of each row (its note), so that history, change sets and the trash have something to show.
    for (const state of rows) {
      state.score = 2000 + state.row;
      await t.http
        .patch(`/api/v1/objects/${MAIN}/records/${state.id}`)
        .set(admin)
        .send({ pnote: cell('pnote', state.row), pscore: state.score })
        .expect(200);
    }

    // The computed fields, added to objects with records: the stored one is filled by a job, then read from its column.
    for (const def of COMPUTED) {
      await t.http
        .post(`/api/v1/objects/${def.object}/fields`)
        .set(admin)
        .send({ name: def.name, label: `Computed ${def.name}`, ...def.body })
        .expect(201);
    }
    await eventually(async () => {
      const vault = bodyOf<ObjectResponse>(await t.http.get(`/api/v1/objects/${VAULT}`).set(admin).expect(200));
      return vault.fields.find((f: FieldResponse) => f.name === 'pnum')?.filled === true;
    }, 30_000);

    // Definitions over every combination of the hideable fields and the computed ones: a metric or view is
    // visible to a key only when each field it names is.
    const metricShapes: Array<Omit<MetricDef, 'name'>> = [
      { uses: [], body: { measure: { function: 'count' } } },
      { uses: ['pscore'], body: { measure: { function: 'sum', field: 'pscore' } } },
      { uses: ['pnote'], body: { measure: { function: 'count' }, filter: { pnote: { $startsWith: 'zz' } } } },
      { uses: ['ptag'], body: { measure: { function: 'count' }, dimensions: ['ptag'] } },
      { uses: ['pday'], body: { measure: { function: 'count' }, timeField: 'pday' } },
      { uses: ['pscore', 'pcode'], body: { measure: { function: 'avg', field: 'pscore' }, dimensions: ['pcode'] } },
      { uses: ['pcode'], body: { measure: { function: 'count_distinct', field: 'pcode' } } },
      { uses: ['ptag', 'pscore'], body: { measure: { function: 'max', field: 'pscore' }, filter: { ptag: 't1' } } },
      { uses: [], vault: true, body: { measure: { function: 'count' }, dimensions: ['plink.psecretname'] } },
      { uses: ['pcode'], body: { measure: { function: 'count_distinct', field: 'pfx1' } } },
      { uses: ['pcode', 'pnote'], body: { measure: { function: 'count' }, dimensions: ['pfx2'] } },
      { uses: [], vault: true, body: { measure: { function: 'count' }, dimensions: ['pxsecret'] } },
      { uses: [], vault: true, body: { object: VAULT, measure: { function: 'sum', field: 'pnum' } } },
      { uses: ['pscore'], vault: true, body: { object: VAULT, measure: { function: 'max', field: 'psum' } } },
    ];
    for (const [i, shape] of metricShapes.entries()) {
      const def = {
        name: metricName(i),
        uses: shape.uses,
        vault: shape.vault,
        body: { name: metricName(i), label: `Metric ${i}`, object: MAIN, type: 'simple', ...shape.body },
      };
      await t.http.post('/api/v1/metrics').set(admin).send(def.body).expect(201);
      metricDefs.push(def);
    }
    const viewShapes: Array<Omit<ViewDef, 'name'>> = [
      { uses: [], body: { fields: ['ptitle'] } },
      { uses: ['pnote'], body: { where: { pnote: { $contains: 'z' } } } },
      { uses: ['pscore'], body: { orderBy: [{ field: 'pscore', order: 'desc' }] } },
      { uses: ['pcode'], body: { fields: ['ptitle', 'pcode'] } },
      { uses: ['ptag'], body: { groupBy: ['ptag'] } },
      { uses: ['pday', 'pnote'], body: { where: { pday: { $null: false } }, fields: ['ptitle', 'pnote'] } },
      { uses: ['pcode'], body: { where: { pfx1: { $startsWith: 'zz' } } } },
      { uses: ['pcode', 'pnote'], body: { fields: ['ptitle', 'pfx2'] } },
      { uses: [], vault: true, body: { orderBy: [{ field: 'pxsecret', order: 'asc' }] } },
    ];
    for (const [i, shape] of viewShapes.entries()) {
      const def = {
        name: viewName(i),
        uses: shape.uses,
        vault: shape.vault,
        body: { name: viewName(i), label: `View ${i}`, shared: true, ...shape.body },
      };
      await t.http.post(`/api/v1/objects/${MAIN}/views`).set(admin).send(def.body).expect(201);
      viewDefs.push(def);
    }

    for (const name of ['a', 'b', 'u'] as const) {
      await t.http
        .post('/api/v1/policies')
        .set(admin)
        .send(policyBody(`prop-${name}`, { main: { read: true, rowTags: null, hidden: [] }, vault: false }))
        .expect(201);
      if (name === 'u') continue;
      keys[name] = await createApiKey(t, {
        name: `prop ${name}`,
        role: 'member',
        subject: `subject-${name}`,
        policies: [`prop-${name}`],
      });
    }
    await t.http
      .put('/api/v1/identity/mapping')
      .set(admin)
      .send({ subject: 'sub', claim: 'groups', policies: { 'prop-u-group': ['prop-u'] } })
      .expect(200);

    // Each principal subscribes itself, the user as well as the keys; the deliveries are what its owner may read.
    for (const name of ['a', 'b', 'u'] as const) {
      const created = await t.http
        .post('/api/v1/webhooks')
        .set(bearer(name === 'u' ? await idp.token('user-u') : keys[name].secret))
        .send({ url: receiver.url(hookPath(name)), objects: [MAIN], events: ['create', 'update', 'delete'] });
      if (created.status !== 201) throw new Error(`webhook of ${name}: ${created.status} ${created.text}`);
      const hook = bodyOf<WebhookCreatedResponse>(created);
      receiver.trust(hookPath(name), hook.secret);
      webhooks[name] = hook.id;
    }
  }, 120_000);

  afterAll(async () => {
    await t?.close();
    await idp?.close();
    await receiver.stop();
  });

  /** Everything a key receives over the HTTP surfaces and MCP, as one text per surface. */
  async function receivedBy(secret: string, access: KeyAccess, ids: string[]): Promise<Array<[string, string]>> {
    const auth = bearer(secret);
    const bodies: Array<[string, string]> = [];
    const get = async (label: string, path: string, query: Record<string, string> = {}) => {
      const res = await t.http.get(path).query(query).set(auth);
      expect(res.status).toBeLessThan(500);
      bodies.push([label, res.text]);
      return res;
    };
    const tool = async (name: string, args: Record<string, unknown>) => {
      const res = await t.http.post(`/api/v1/ai/tools/${name}/execute`).set(auth).send({ arguments: args });
      expect(res.status).toBe(200);
      bodies.push([`tool ${name}`, res.text]);
    };

    await get('objects', '/api/v1/objects');
    await get('tool schemas', '/api/v1/ai/tools');
    await get('metrics', '/api/v1/metrics');
    await tool('list_objects', {});
    await tool('list_metrics', {});
    if (access.main.read) {
      await get('object', `/api/v1/objects/${MAIN}`);
      await get('records', `/api/v1/objects/${MAIN}/records`, { limit: '200' });
      await get('values', `/api/v1/objects/${MAIN}/fields/ptitle/values`);
      await get('views', `/api/v1/objects/${MAIN}/views`);
      await get('export', `/api/v1/objects/${MAIN}/records/export.csv`);
      await get('changes', `/api/v1/objects/${MAIN}/changes`, { after: '0', limit: '1000' });
      const res = await t.http
        .post(`/api/v1/objects/${MAIN}/aggregate`)
        .set(auth)
        .send({ groupBy: ['ptitle'], aggregations: [{ function: 'count', alias: 'n' }] });
      expect(res.status).toBe(200);
      bodies.push(['aggregate', res.text]);
      for (const id of ids) await get(`record ${id}`, `/api/v1/objects/${MAIN}/records/${id}`);
      for (const id of ids) await get(`history ${id}`, `/api/v1/objects/${MAIN}/records/${id}/history`);
      await get('trash', `/api/v1/objects/${MAIN}/trash`, { limit: '200' });
      const sets = await get('change sets', '/api/v1/change-sets', { object: MAIN, limit: '100' });
      for (const set of ((sets.body as { changeSets?: Array<{ id: string }> }).changeSets ?? []).slice(0, 12)) {
        await get(`change set ${set.id}`, `/api/v1/change-sets/${set.id}`);
      }
      for (const id of ids.slice(0, 4)) await tool('record_history', { objectName: MAIN, recordId: id });
      await tool('describe_object', { objectName: MAIN });
      await tool('query_records', { objectName: MAIN, limit: 200 });
      await tool('aggregate_data', { objectName: MAIN, groupBy: ['ptitle'], aggregations: [{ function: 'count', alias: 'n' }] });
      // A definition read by name answers 404 when it is not visible; its body may echo the name asked for.
      for (const view of viewDefs) {
        const viewRes = await t.http.get(`/api/v1/objects/${MAIN}/views/${view.name}`).set(auth);
        bodies.push([`view ${view.name}`, viewRes.status === 200 ? viewRes.text : '']);
      }
    }
    for (const metric of metricDefs) {
      const metricRes = await t.http.get(`/api/v1/metrics/${metric.name}`).set(auth);
      bodies.push([`metric ${metric.name}`, metricRes.status === 200 ? metricRes.text : '']);
    }
    if (access.vault) {
      // The count and the rollup back over pmain live here: a key that may not read pmain must not learn of them.
      await get('vault object', `/api/v1/objects/${VAULT}`);
      await get('vault records', `/api/v1/objects/${VAULT}/records`);
      await get('vault export', `/api/v1/objects/${VAULT}/records/export.csv`);
      await tool('describe_object', { objectName: VAULT });
      await tool('query_records', { objectName: VAULT, limit: 200 });
    }

    const mcp = new Client({ name: 'access-property', version: '1.0.0' });
    await mcp.connect(new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), { requestInit: { headers: auth } }));
    try {
      bodies.push(['mcp tools', JSON.stringify(await mcp.listTools())]);
      bodies.push(['mcp resources', JSON.stringify(await mcp.listResources())]);
      bodies.push(['mcp list_metrics', JSON.stringify(await mcp.callTool({ name: 'list_metrics', arguments: {} }))]);
    } finally {
      await mcp.close();
    }
    return bodies;
  }

  /** What must never appear for a key with `access`, and what must appear (so that a key that sees nothing cannot pass). */
  function expectations(access: KeyAccess): { forbidden: string[]; required: Array<[string, string]> } {
    const forbidden: string[] = [];
    const required: Array<[string, string]> = [];
    const visible = (f: Hideable) => visibleField(access, f);
    if (!access.main.read) forbidden.push(MAIN, 'ptitle');
    for (const f of HIDEABLE) if (!visible(f)) forbidden.push(f);
    if (!access.vault) forbidden.push(VAULT, 'psecretname', vaultCell(0), vaultCell(1));
    for (const def of COMPUTED) {
      if (computedVisible(access, def)) required.push([def.object === MAIN ? 'object' : 'vault object', def.name]);
      else forbidden.push(def.name);
    }
    const [pfx1, pfx2] = COMPUTED;
    for (const state of rows) {
      const readable = rowVisible(access, state.tag);
      for (const f of ['ptitle', 'pnote', 'pcode']) {
        const shown = readable && (f === 'ptitle' || visible(f as Hideable));
        if (!shown) forbidden.push(cell(f, state.row));
        else if (f === 'ptitle' && !state.deleted) required.push(['records', cell(f, state.row)]);
      }
      for (const [def, token] of [
        [pfx1, pfx1Cell(state.row)],
        [pfx2, pfx2Cell(state.row)],
      ] as const) {
        if (!readable || !computedVisible(access, def)) forbidden.push(token);
        else if (!state.deleted) required.push(['records', token]);
      }
    }
    for (const metric of metricDefs) {
      const shown = access.main.read && metric.uses.every(visible) && (!metric.vault || access.vault);
      if (shown) required.push(['metrics', metric.name]);
      else forbidden.push(metric.name);
    }
    for (const view of viewDefs) {
      const shown = access.main.read && view.uses.every(visible) && (!view.vault || access.vault);
      if (shown) required.push(['views', view.name]);
      else forbidden.push(view.name);
    }
    if (access.vault) required.push(['vault records', vaultCell(0)]);
    return { forbidden, required };
  }

  /**
   * The count and the sum back over pmain, as the key reads each vault record: exactly the live rows it
   * may read (never the stored total of every row), or no such field when it is hidden.
   */
  async function checkTotals(secret: string, access: KeyAccess): Promise<string | undefined> {
    if (!access.vault) return undefined;
    const page = bodyOf<RecordPage>(await t.http.get(`/api/v1/objects/${VAULT}/records`).set(bearer(secret)).expect(200));
    const [, , , pnum, psum] = COMPUTED;
    for (const record of page.records) {
      const vaultRow = vaultIds.indexOf(record.id);
      const counted = rows.filter((r) => !r.deleted && r.vaultRow === vaultRow && rowVisible(access, r.tag));
      const expected: Record<string, number | undefined> = {
        pnum: computedVisible(access, pnum) ? counted.length : undefined,
        psum: computedVisible(access, psum) ? counted.reduce((sum, r) => sum + r.score, 0) : undefined,
      };
      const got = {
        pnum: record.pnum === undefined ? undefined : Number(record.pnum),
        psum: record.psum === undefined ? undefined : Number(record.psum),
      };
      if (got.pnum !== expected.pnum || got.psum !== expected.psum) {
        return `vault row ${vaultRow}: ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`;
      }
    }
    return undefined;
  }

  it('holds for random pairs of policies on every surface', async () => {
    const admin = bearer(t.adminKey);
    const rowIds = rows.filter((r) => !r.deleted).map((r) => r.id);
    expect(rowIds).toHaveLength(ROWS);
    let run = 0;

    /** The admin's writes of a run, in order: a row created, scores changed, the row deleted, then the markers. */
    async function write(patched: number[], createdTag: string): Promise<Write[]> {
      const writes: Write[] = [];
      const row = EXTRA_ROW + run;
      const vaultRow = run % 2;
      const id = idOf(
        await t.http
          .post(`/api/v1/objects/${MAIN}/records`)
          .set(admin)
          .send(rowValues(row, createdTag, vaultRow, 5000 + run))
          .expect(201),
      );
      const created: RowState = { row, id, tag: createdTag, vaultRow, score: 5000 + run, deleted: false };
      rows.push(created);
      writes.push({ row, id, op: 'create', tag: createdTag });
      for (const r of [...patched, ...MARKER_ROWS]) {
        if (r === MARKER_ROWS[0]) {
          await t.http.delete(`/api/v1/objects/${MAIN}/records/${id}`).set(admin).expect(204);
          created.deleted = true;
          writes.push({ row, id, op: 'delete', tag: createdTag });
        }
        const state = rows[r];
        state.score = 3000 + run * 20 + r;
        await t.http.patch(`/api/v1/objects/${MAIN}/records/${state.id}`).set(admin).send({ pscore: state.score }).expect(200);
        writes.push({ row: r, id: state.id, op: 'update', tag: state.tag });
      }
      return writes;
    }

    await fc.assert(
      fc.asyncProperty(accessArb, accessArb, accessArb, writesArb, async (accessA, accessB, accessU, writes) => {
        run++;
        const principals = [
          ['a', accessA],
          ['b', accessB],
          ['u', accessU],
        ] as const;
        for (const [name, access] of principals) {
          const res = await t.http
            .put(`/api/v1/policies/prop-${name}`)
            .set(admin)
            .send({ objects: policyBody(`prop-${name}`, access).objects });
          if (res.status !== 200) throw new Error(`policy ${name}: ${res.status} ${res.text}`);
          // A webhook whose owner could not read pmain in an earlier run was disabled then: enabled again, it follows from now.
          if (access.main.read) {
            await t.http.patch(`/api/v1/webhooks/${webhooks[name]}`).set(admin).send({ status: 'active' }).expect(200);
          }
        }

        // The admin writes; each principal's webhook delivers what its owner may read under the policy just set.
        const from = receiver.accepted.length;
        const done = await write(writes.patched, writes.createdTag);
        for (const [name, access] of principals) {
          const wanted = done.filter((w) => rowVisible(access, w.tag));
          const arrived = () => receiver.accepted.slice(from).filter((r) => r.path === hookPath(name));
          const has = (w: Write) => arrived().some((r) => r.body.data.id === w.id && r.body.data.op === w.op);
          try {
            if (access.main.read) {
              // Changes are queued in feed order: once the last write it may read (a marker, one of each tag) and
              // every earlier one arrived and nothing is pending, whatever this run queued for it was sent.
              await eventually(() => wanted.every(has), 30_000);
              await eventually(
                async () =>
                  bodyOf<DeliveriesResponse>(
                    await t.http
                      .get(`/api/v1/webhooks/${webhooks[name]}/deliveries`)
                      .query({ status: 'pending', limit: '1' })
                      .set(admin)
                      .expect(200),
                  ).deliveries.length === 0,
                30_000,
              );
            } else {
              // An owner that may not read pmain gets nothing: its webhook is disabled at the first change.
              await eventually(
                async () =>
                  bodyOf<WebhookResponse>(await t.http.get(`/api/v1/webhooks/${webhooks[name]}`).set(admin).expect(200))
                    .status === 'disabled',
                30_000,
              );
            }
          } catch {
            throw new Error(
              `${name} (${JSON.stringify(access)}) misses deliveries: ${JSON.stringify(wanted.filter((w) => !has(w)))}`,
            );
          }
        }
        // Settle: a delivery that should not exist would have had the time to arrive.
        await sleep(300);
        const deliveries = receiver.accepted.slice(from);
        expect(receiver.rejected).toEqual([]);

        for (const [name, access] of principals) {
          // The user presents a token its provider just issued, as an application would.
          const bearerOf = name === 'u' ? await idp.token('user-u') : keys[name].secret;
          const bodies = await receivedBy(bearerOf, access, rowIds);
          const mine: ReceivedWebhook[] = deliveries.filter((r) => r.path === hookPath(name));
          for (const r of mine) bodies.push([`delivery ${r.body.type} ${r.body.data.id}`, JSON.stringify(r.body)]);
          const { forbidden, required } = expectations(access);
          const who = `${name === 'u' ? 'user' : 'key'} ${name} (${JSON.stringify(access)})`;
          for (const [label, text] of bodies) {
            for (const token of forbidden) {
              if (text.includes(token)) throw new Error(`${who} received "${token}" in ${label}: ${text.slice(0, 400)}`);
            }
          }
          for (const r of mine) {
            const state = rows.find((s) => s.id === r.body.data.id);
            if (!state || !rowVisible(access, state.tag)) {
              throw new Error(`${who} received a delivery of a row it may not read: ${JSON.stringify(r.body)}`);
            }
          }
          // Each write of a row it may read came with the record as it reads it, not an empty shell.
          for (const w of done) {
            if (w.op === 'delete' || !rowVisible(access, w.tag)) continue;
            const got = mine.find((r) => r.body.data.id === w.id && r.body.data.op === w.op);
            if (!got?.body.data.record || !JSON.stringify(got.body.data.record).includes(cell('ptitle', w.row))) {
              throw new Error(`${who} misses the record of the ${w.op} of row ${w.row} in its delivery`);
            }
          }
          for (const [label, token] of required) {
            const text = bodies.find(([l]) => l === label)?.[1] ?? '';
            if (!text.includes(token)) throw new Error(`${who} misses "${token}" in ${label}`);
          }
          const totals = await checkTotals(bearerOf, access);
          if (totals) throw new Error(`${who} reads wrong totals: ${totals}`);
        }
      }),
      {
        numRuns: Number(process.env.ACCESS_PROPERTY_RUNS ?? 25),
        seed: Number(process.env.ACCESS_PROPERTY_SEED ?? 20261126),
        endOnFailure: true,
      },
    );
  }, 600_000);
});
