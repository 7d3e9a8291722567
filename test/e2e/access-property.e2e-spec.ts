import fc from 'fast-check';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CreatedApiKeyResponse } from '../../src/auth/api-key.dto';
import { listen } from '../support/chat-helpers';
import { idOf, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { createApiKey } from '../support/fixtures';
import { OidcIssuer, TEST_AUDIENCE } from '../support/oidc-issuer';

/**
 * Random pairs of policies over one generated object: whatever surface a key reads (records, values,
 * aggregates, metadata, metric and view definitions, the data tools and their schemas, MCP, CSV, the
 * change feed), nothing it receives names a field, object, metric or view outside its access, or holds a
 * value of a hidden field or of a row outside its filter. Every cell of the data carries a token of its
 * own, so a leak anywhere in any body is a substring.
 */

const MAIN = 'pmain';
const VAULT = 'pvault';
const TAGS = ['t1', 't2', 't3'];
/** Fields that a policy may hide; `ptitle` stays visible so that every readable row shows itself. */
const HIDEABLE = ['pnote', 'pcode', 'pscore', 'pday', 'ptag'] as const;
type Hideable = (typeof HIDEABLE)[number];
const ROWS = 12;
const METRICS = 9;
const VIEWS = 6;

/** The token of one text cell: unique, and never a substring of another token. */
const cell = (field: string, row: number) => `zz${field.slice(1, 3).toUpperCase()}${row}zz`;
const vaultCell = (row: number) => `zzVAULT${row}zz`;
const metricName = (i: number) => `mq${i}x`;
const viewName = (i: number) => `vw${i}x`;

interface MainAccess {
  read: boolean;
  rowTags: string[] | null;
  hidden: Hideable[];
}
interface KeyAccess {
  main: MainAccess;
  vault: boolean;
}

interface MetricDef {
  name: string;
  uses: Hideable[];
  /** Reads the other object through the lookup. */
  vault?: boolean;
  body: Record<string, unknown>;
}
interface ViewDef {
  name: string;
  uses: Hideable[];
  body: Record<string, unknown>;
}

const accessArb: fc.Arbitrary<KeyAccess> = fc.record({
  main: fc.record({
    read: fc.constantFrom(true, true, false),
    rowTags: fc.option(fc.subarray(TAGS, { minLength: 1, maxLength: 2 }), { nil: null }),
    hidden: fc.subarray([...HIDEABLE]),
  }),
  vault: fc.boolean(),
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

describe('access property: what a key or a signed-in user receives never reaches outside its policy', () => {
  let t: TestApp;
  let idp: OidcIssuer;
  let baseUrl: string;
  const rowTag = (row: number) => TAGS[row % TAGS.length];
  const metricDefs: MetricDef[] = [];
  const viewDefs: ViewDef[] = [];
  const keys: Record<'a' | 'b', CreatedApiKeyResponse> = {} as never;

  beforeAll(async () => {
    // A user of the application's identity provider beside the two keys: its group maps to a policy of its own.
    idp = await OidcIssuer.start({ 'user-u': { groups: ['prop-u-group'] } });
    // Each run reads every surface as three principals: far more requests a minute than a client makes.
    t = await startTestApp({
      env: { AUTH_OIDC_ISSUER: idp.issuer, AUTH_OIDC_AUDIENCE: TEST_AUDIENCE, RATE_LIMIT_PER_MINUTE: '0' },
    });
    baseUrl = await listen(t);
    const admin = bearer(t.adminKey);
    await t.http
      .post('/api/v1/objects')
      .set(admin)
      .send({ name: VAULT, label: 'Vault', fields: [{ name: 'psecretname', label: 'Secret name', type: 'text' }] })
      .expect(201);
    const vaultIds: string[] = [];
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
      await t.http
        .post(`/api/v1/objects/${MAIN}/records`)
        .set(admin)
        .send({
          ptitle: cell('ptitle', row),
          ptag: rowTag(row),
          pnote: cell('pnote', row),
          pcode: cell('pcode', row),
          pscore: 1000 + row * 7,
          pday: `2026-0${1 + (row % 9)}-1${row % 10}`,
          plink: vaultIds[row % 2],
        })
        .expect(201);
    }

    // A second version of each row (its note), so that history, change sets and the trash have something to show.
    const created = (await t.http.get(`/api/v1/objects/${MAIN}/records`).query({ limit: '200' }).set(admin).expect(200))
      .body as RecordPage;
    for (const record of created.records) {
      const row = Array.from({ length: ROWS }, (_, r) => r).find((r) => cell('ptitle', r) === record.ptitle) ?? 0;
      await t.http
        .patch(`/api/v1/objects/${MAIN}/records/${record.id}`)
        .set(admin)
        .send({ pnote: cell('pnote', row), pscore: 2000 + row })
        .expect(200);
    }

    // Definitions over every combination of the hideable fields: a metric or view is visible to a key only
    // when each field it names is.
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
    ];
    for (let i = 0; i < METRICS; i++) {
      const shape = metricShapes[i];
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
    ];
    for (let i = 0; i < VIEWS; i++) {
      const shape = viewShapes[i];
      const def = {
        name: viewName(i),
        uses: shape.uses,
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
  }, 120_000);

  afterAll(async () => {
    await t?.close();
    await idp?.close();
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
    if (access.vault) await get('vault records', `/api/v1/objects/${VAULT}/records`);

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
    const visibleField = (f: Hideable) => access.main.read && !access.main.hidden.includes(f);
    if (!access.main.read) forbidden.push(MAIN, 'ptitle');
    for (const f of HIDEABLE) if (!visibleField(f)) forbidden.push(f);
    if (!access.vault) forbidden.push(VAULT, 'psecretname', vaultCell(0), vaultCell(1));
    for (let row = 0; row < ROWS; row++) {
      const rowVisible = access.main.read && (access.main.rowTags === null || access.main.rowTags.includes(rowTag(row)));
      for (const f of ['ptitle', 'pnote', 'pcode']) {
        const visible = rowVisible && (f === 'ptitle' || visibleField(f as Hideable));
        if (!visible) forbidden.push(cell(f, row));
        else if (f === 'ptitle') required.push(['records', cell(f, row)]);
      }
    }
    for (const metric of metricDefs) {
      const visible = access.main.read && metric.uses.every(visibleField) && (!metric.vault || access.vault);
      if (visible) required.push(['metrics', metric.name]);
      else forbidden.push(metric.name);
    }
    for (const view of viewDefs) {
      const visible = access.main.read && view.uses.every(visibleField);
      if (visible) required.push(['views', view.name]);
      else forbidden.push(view.name);
    }
    if (access.vault) required.push(['vault records', vaultCell(0)]);
    return { forbidden, required };
  }

  it('holds for random pairs of policies on every surface', async () => {
    const ids = (await t.http.get(`/api/v1/objects/${MAIN}/records`).query({ limit: '200' }).set(bearer(t.adminKey)).expect(200))
      .body as RecordPage;
    const rowIds = ids.records.map((r) => r.id);
    expect(rowIds).toHaveLength(ROWS);

    await fc.assert(
      fc.asyncProperty(accessArb, accessArb, accessArb, async (accessA, accessB, accessU) => {
        const principals = [
          ['a', accessA],
          ['b', accessB],
          ['u', accessU],
        ] as const;
        for (const [name, access] of principals) {
          const res = await t.http
            .put(`/api/v1/policies/prop-${name}`)
            .set(bearer(t.adminKey))
            .send({ objects: policyBody(`prop-${name}`, access).objects });
          if (res.status !== 200) throw new Error(`policy ${name}: ${res.status} ${res.text}`);
        }
        for (const [name, access] of principals) {
          // The user presents a token its provider just issued, as an application would.
          const bearerOf = name === 'u' ? await idp.token('user-u') : keys[name].secret;
          const bodies = await receivedBy(bearerOf, access, rowIds);
          const { forbidden, required } = expectations(access);
          for (const [label, text] of bodies) {
            for (const token of forbidden) {
              if (text.includes(token))
                throw new Error(
                  `${name === 'u' ? 'user' : 'key'} ${name} (${JSON.stringify(access)}) received "${token}" in ${label}: ${text.slice(0, 400)}`,
                );
            }
          }
          for (const [label, token] of required) {
            const text = bodies.find(([l]) => l === label)?.[1] ?? '';
            if (!text.includes(token)) throw new Error(`key ${name} (${JSON.stringify(access)}) misses "${token}" in ${label}`);
          }
        }
      }),
      {
        numRuns: Number(process.env.ACCESS_PROPERTY_RUNS ?? 25),
        seed: Number(process.env.ACCESS_PROPERTY_SEED ?? 20261126),
        endOnFailure: true,
      },
    );
  }, 300_000);
});
