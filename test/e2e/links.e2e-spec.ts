import type { FieldResponse, ObjectResponse } from '../../src/metadata/metadata.dto';
import type { DescribeObjectResult } from '../../src/tools/data-tools/describe-object.tool';
import { asAdmin, createApiKey, createObject, fieldSpec, finishedJob } from '../support/fixtures';
import { bodyOf, errorOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';
import { linkTableOf } from '../support/pg-query';

type Row = Record<string, unknown>;

const PEOPLE: Row[] = [
  { name: 'Ann', team: 'a', hours: 10.5 },
  { name: 'Bob', team: 'b', hours: 20 },
  { name: 'Cid', team: 'a', hours: null },
  { name: 'Dee', team: 'b', hours: 7.25 },
  { name: 'Eve', team: 'a', hours: 3 },
  { name: 'Fay', team: 'a', hours: 1 },
  { name: 'Gus', team: 'b', hours: 2 },
  { name: 'Hal', team: 'a', hours: 4 },
  { name: 'Ivy', team: 'b', hours: 5 },
  { name: 'Jon', team: 'a', hours: 6 },
];

/** The links of proj record `id` as stored, in the order they were made (read past the API). */
const JOIN_SQL = (table: string) =>
  `select target_id::text as id from data_links."${table}" where source_id = $1 order by seq, target_id`;

describe('links fields: many to many between records', () => {
  let t: TestApp;
  const people: string[] = [];
  let projA: string;
  let projB: string;
  let projEmpty: string;
  let teamA: string;
  let projOnly: string;
  let table: string;

  const patch = (key: string, object: string, id: string, body: Row) =>
    t.http.patch(`/api/v1/objects/${object}/records/${id}`).set(bearer(key)).send(body);
  const get = async (key: string, object: string, id: string) =>
    bodyOf<RecordBody>(await t.http.get(`/api/v1/objects/${object}/records/${id}`).set(bearer(key)).expect(200));
  const list = (key: string, object: string, query: Row = {}) => {
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(query)) params[name] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get(`/api/v1/objects/${object}/records`).query(params).set(bearer(key));
  };
  const all = async (key: string, object: string, query: Row = {}) => {
    const res = await list(key, object, { limit: 200, orderBy: [{ field: 'id' }], ...query });
    expect({ status: res.status, body: res.status === 200 ? 'ok' : (res.body as unknown) }).toEqual({ status: 200, body: 'ok' });
    return bodyOf<RecordPage>(res).records;
  };
  const addField = (object: string, spec: Row) =>
    t.http
      .post(`/api/v1/objects/${object}/fields`)
      .set(asAdmin(t))
      .send({ label: spec.name, ...spec });
  const stored = async (id: string) => (await t.sql<{ id: string }>(JOIN_SQL(table), [id])).map((r) => r.id);

  beforeAll(async () => {
    t = await startTestApp();
    await createObject(t, 'person', [fieldSpec('name', 'text'), fieldSpec('team', 'text'), fieldSpec('hours', 'number')]);
    await createObject(t, 'proj', [
      fieldSpec('title', 'text'),
      { name: 'members', label: 'Members', type: 'links', reference: 'person', inverse: 'projects' },
    ]);
    for (const person of PEOPLE) {
      people.push(idOf(await t.http.post('/api/v1/objects/person/records').set(asAdmin(t)).send(person).expect(201)));
    }
    projA = idOf(
      await t.http
        .post('/api/v1/objects/proj/records')
        .set(asAdmin(t))
        .send({ title: 'A', members: [people[1], people[0]] })
        .expect(201),
    );
    projB = idOf(await t.http.post('/api/v1/objects/proj/records').set(asAdmin(t)).send({ title: 'B' }).expect(201));
    projEmpty = idOf(await t.http.post('/api/v1/objects/proj/records').set(asAdmin(t)).send({ title: 'empty' }).expect(201));
    table = await linkTableOf((text, params) => t.sql(text, params), 'proj', 'members');
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({
        name: 'team-a',
        objects: { proj: { read: true, update: true, create: true }, person: { read: true, rowFilter: { team: 'a' } } },
      })
      .expect(201);
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'proj-only', objects: { proj: { read: true, update: true } } })
      .expect(201);
    teamA = (await createApiKey(t, { name: 'team-a', role: 'member', subject: 'a', policies: ['team-a'] })).secret;
    projOnly = (await createApiKey(t, { name: 'proj-only', role: 'member', subject: 'p', policies: ['proj-only'] })).secret;
  });
  afterAll(async () => {
    await t.close();
  });

  it('defines both sides: the admin API shows reference and inverse, and each side reads the pairs the other wrote', async () => {
    const proj = bodyOf<ObjectResponse>(await t.http.get('/api/v1/objects/proj').set(asAdmin(t)).expect(200));
    expect(proj.fields.find((f) => f.name === 'members')).toMatchObject({
      type: 'links',
      reference: 'person',
      inverse: 'projects',
    });
    const person = bodyOf<ObjectResponse>(await t.http.get('/api/v1/objects/person').set(asAdmin(t)).expect(200));
    expect(person.fields.find((f) => f.name === 'projects')).toMatchObject({
      type: 'links',
      reference: 'proj',
      inverse: 'members',
    });

    // Written on create, in the order given.
    expect((await get(t.adminKey, 'proj', projA)).members).toEqual([people[1], people[0]]);
    expect(await stored(projA)).toEqual([people[1], people[0]]);
    const page = await all(t.adminKey, 'proj', { fields: 'members' });
    expect(page.find((r) => r.id === projA)).toEqual({ id: projA, members: [people[1], people[0]] });
    expect((await get(t.adminKey, 'person', people[0])).projects).toEqual([projA]);
    // Written from the other side, read on this one.
    await patch(t.adminKey, 'person', people[3], { projects: { $add: [projB] } }).expect(200);
    expect((await get(t.adminKey, 'proj', projB)).members).toEqual([people[3]]);
    expect((await get(t.adminKey, 'proj', projEmpty)).members).toEqual([]);
    await patch(t.adminKey, 'person', people[3], { projects: [] }).expect(200);
    expect((await get(t.adminKey, 'proj', projB)).members).toEqual([]);
  });

  it('links an object to itself, without an inverse', async () => {
    await addField('person', { name: 'mentors', type: 'links', reference: 'person' }).expect(201);
    const res = await patch(t.adminKey, 'person', people[4], { mentors: [people[5], people[4]] }).expect(200);
    expect(bodyOf<RecordBody>(res).mentors).toEqual([people[5], people[4]]);
    expect((await get(t.adminKey, 'person', people[5])).mentors).toEqual([]);
    await t.http.delete('/api/v1/objects/person/fields/mentors').set(asAdmin(t)).expect(204);
  });

  it('sets the array, adds and removes, answering the record with its links as they now are', async () => {
    let res = await patch(t.adminKey, 'proj', projB, { members: [people[2], people[3]] }).expect(200);
    expect(bodyOf<RecordBody>(res).members).toEqual([people[2], people[3]]);
    res = await patch(t.adminKey, 'proj', projB, { members: { $add: [people[4], people[2]], $remove: [people[3]] } }).expect(200);
    expect(bodyOf<RecordBody>(res).members).toEqual([people[2], people[4]]);
    // Setting keeps the links still named (their order too) and appends the new ones.
    res = await patch(t.adminKey, 'proj', projB, { title: 'B2', members: [people[6], people[4]] }).expect(200);
    expect(bodyOf<RecordBody>(res)).toMatchObject({ title: 'B2', members: [people[4], people[6]] });
    // The record as a GET answers it, with the write's change set.
    const { changeSetId, ...written } = bodyOf<RecordBody & { changeSetId: string }>(res);
    expect(changeSetId).toEqual(expect.any(String));
    expect(written).toEqual(await get(t.adminKey, 'proj', projB));
    expect(await stored(projB)).toEqual([people[4], people[6]]);
    // A value that is not a set of ids.
    expect(errorOf(await patch(t.adminKey, 'proj', projB, { members: 'x' }).expect(400)).code).toBe('invalid_value');
    expect(errorOf(await patch(t.adminKey, 'proj', projB, { members: { $put: [people[0]] } }).expect(400)).code).toBe(
      'invalid_value',
    );
  });

  it('refuses an id that is no record (invalid_reference) and writes nothing of the request', async () => {
    const before = await get(t.adminKey, 'proj', projB);
    const missing = '00000000-0000-4000-8000-000000000001';
    const res = await patch(t.adminKey, 'proj', projB, { title: 'changed', members: { $add: [people[7], missing] } }).expect(400);
    expect(errorOf(res)).toMatchObject({ code: 'invalid_reference', details: { field: 'members' } });
    const after = await get(t.adminKey, 'proj', projB);
    expect(after).toMatchObject({ title: before.title, members: before.members });
    expect(await stored(projB)).toEqual(before.members);
    const created = await t.http
      .post('/api/v1/objects/proj/records')
      .set(asAdmin(t))
      .send({ title: 'ghost', members: [missing] })
      .expect(400);
    expect(errorOf(created).code).toBe('invalid_reference');
    expect(await t.sql(`select 1 from data.proj where title = 'ghost'`)).toHaveLength(0);
  });

  it('keeps every link of eight concurrent $add requests on one record', async () => {
    const res = await Promise.all(
      people.slice(0, 8).map((id) => patch(t.adminKey, 'proj', projEmpty, { members: { $add: [id] } })),
    );
    expect(res.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(new Set(await stored(projEmpty))).toEqual(new Set(people.slice(0, 8)));
    expect(new Set((await get(t.adminKey, 'proj', projEmpty)).members as string[])).toEqual(new Set(people.slice(0, 8)));
    await patch(t.adminKey, 'proj', projEmpty, { members: [] }).expect(200);
    expect(await stored(projEmpty)).toEqual([]);
  });

  it('shows a key under a row filter on the target only the links it may read, and keeps the others when it sets', async () => {
    await patch(t.adminKey, 'proj', projB, { members: [people[0], people[1], people[2], people[3]] }).expect(200);
    const teamAIds = [people[0], people[2]];
    expect((await get(teamA, 'proj', projB)).members).toEqual(teamAIds);
    // A person it may not read cannot be linked: the same error as a missing one.
    const refused = await patch(teamA, 'proj', projB, { members: { $add: [people[3]] } }).expect(400);
    expect(errorOf(refused).code).toBe('invalid_reference');
    const refusedSet = await patch(teamA, 'proj', projB, { members: [people[1]] }).expect(400);
    expect(errorOf(refusedSet).code).toBe('invalid_reference');
    // Its set replaces only what it sees; Bob and Dee (team b) stay linked.
    const res = await patch(teamA, 'proj', projB, { members: [people[4]] }).expect(200);
    expect(bodyOf<RecordBody>(res).members).toEqual([people[4]]);
    expect(new Set(await stored(projB))).toEqual(new Set([people[1], people[3], people[4]]));
    // $remove of a link it cannot see does nothing.
    await patch(teamA, 'proj', projB, { members: { $remove: [people[1]] } }).expect(200);
    expect(new Set(await stored(projB))).toEqual(new Set([people[1], people[3], people[4]]));
    // Filters read its view too: a link to Bob is none for it.
    const withBob = await all(teamA, 'proj', { where: { members: { $contains: people[1] } } });
    expect(withBob).toHaveLength(0);
    const linkedToBob = await t.sql<{ id: string }>(
      `select source_id::text as id from data_links."${table}" where target_id = $1 order by source_id`,
      [people[1]],
    );
    expect(linkedToBob.map((r) => r.id)).toEqual([projA, projB].sort());
    const adminWithBob = await all(t.adminKey, 'proj', { where: { members: { $contains: people[1] } } });
    expect(adminWithBob.map((r) => r.id)).toEqual(linkedToBob.map((r) => r.id));
  });

  it('reads links and counts through them in the data tools (their read-only role) as the records API does', async () => {
    await addField('proj', { name: 'n_tool', type: 'count', relation: 'members' }).expect(201);
    try {
      const tool = async (key: string) => {
        const res = await t.http
          .post('/api/v1/ai/tools/query_records/execute')
          .set(bearer(key))
          .send({ arguments: { objectName: 'proj', fields: ['members', 'n_tool'], orderBy: [{ field: 'id' }], limit: 50 } })
          .expect(200);
        const body = bodyOf<{ result: { records: Row[] }; isError: boolean }>(res);
        expect(body.isError).toBe(false);
        return body.result.records;
      };
      for (const key of [t.adminKey, teamA]) {
        const viaApi = (await all(key, 'proj')).map((r) => ({ id: r.id, members: r.members, n_tool: r.n_tool }));
        expect(await tool(key)).toEqual(viaApi);
        expect(viaApi.some((r) => (r.n_tool as number) > 0)).toBe(true);
      }
    } finally {
      await t.http.delete('/api/v1/objects/proj/fields/n_tool').set(asAdmin(t)).expect(204);
    }
  });

  it('hides the field from a key that may not read the target: records, describe_object, export', async () => {
    const record = await get(projOnly, 'proj', projB);
    expect(record).toHaveProperty('title');
    expect(record).not.toHaveProperty('members');
    const described = bodyOf<{ result: DescribeObjectResult }>(
      await t.http
        .post('/api/v1/ai/tools/describe_object/execute')
        .set(bearer(projOnly))
        .send({ arguments: { objectName: 'proj' } })
        .expect(200),
    );
    expect(described.result.fields.map((f) => f.name)).toContain('title');
    expect(described.result.fields.map((f) => f.name)).not.toContain('members');
    const full = bodyOf<{ result: DescribeObjectResult }>(
      await t.http
        .post('/api/v1/ai/tools/describe_object/execute')
        .set(asAdmin(t))
        .send({ arguments: { objectName: 'proj' } })
        .expect(200),
    );
    expect(full.result.fields.find((f) => f.name === 'members')).toMatchObject({
      type: 'links',
      reference: 'person',
      inverse: 'projects',
    });
    const csv = await t.http.get('/api/v1/objects/proj/records/export.csv').set(bearer(projOnly)).expect(200);
    expect(csv.text.split(/\r?\n/)[0]).not.toContain('members');
    expect(errorOf(await list(projOnly, 'proj', { where: { members: { $null: true } } }).expect(400)).code).toBe('unknown_field');
    expect(errorOf(await patch(projOnly, 'proj', projB, { members: [] }).expect(400)).code).toBe('unknown_field');
    // The admin's export joins the ids.
    const admin = await t.http
      .get('/api/v1/objects/proj/records/export.csv')
      .query({ fields: 'members' })
      .set(asAdmin(t))
      .expect(200);
    expect(admin.text).toContain(people[1]);
  });

  it('filters by $null (no links / some links) and $contains; refuses ordering by a links field', async () => {
    const none = await all(t.adminKey, 'proj', { where: { members: { $null: true } } });
    const some = await all(t.adminKey, 'proj', { where: { members: { $null: false } } });
    const expectedNone = await t.sql<{ id: string }>(
      `select p.id::text as id from data.proj p where not exists (select from data_links."${table}" j where j.source_id = p.id) order by p.id`,
    );
    expect(none.map((r) => r.id)).toEqual(expectedNone.map((r) => r.id));
    expect(none.length + some.length).toBe(3);
    expect(none.length).toBeGreaterThan(0);
    const both = await all(t.adminKey, 'proj', { where: { members: { $contains: [people[1], people[3]] } } });
    expect(both.map((r) => r.id)).toEqual([projB]);
    const any = await all(t.adminKey, 'proj', { where: { members: { $in: [people[3], people[6]] } } });
    const expectedAny = await t.sql<{ id: string }>(
      `select distinct source_id::text as id from data_links."${table}" where target_id = any($1::uuid[]) order by 1`,
      [[people[3], people[6]]],
    );
    expect(any.map((r) => r.id)).toEqual(expectedAny.map((r) => r.id));
    expect(any.length).toBeGreaterThan(0);
    const current = (await get(t.adminKey, 'proj', projB)).members as string[];
    const exact = await all(t.adminKey, 'proj', { where: { members: { $eq: [...current].reverse() } } });
    expect(exact.map((r) => r.id)).toEqual([projB]);
    const bad = await list(t.adminKey, 'proj', { where: { members: { $contains: 'not-an-id' } } }).expect(400);
    expect(errorOf(bad).code).toBe('invalid_value');
    const sorted = await list(t.adminKey, 'proj', { orderBy: [{ field: 'members' }] });
    expect(sorted.status).toBe(400);
    // Named by its own type, not by the type its value reads as.
    expect(errorOf(sorted)).toMatchObject({ code: 'invalid_order_by', details: { type: 'links' } });
    const ranged = await list(t.adminKey, 'proj', { where: { members: { $gt: 'x' } } });
    expect(errorOf(ranged)).toMatchObject({ code: 'invalid_operator', details: { type: 'links' } });
    // The grid's value counts: how many records link to each target.
    const values = bodyOf<{ values: Array<{ value: string; count: number }> }>(
      await t.http.get('/api/v1/objects/proj/fields/members/values').set(asAdmin(t)).expect(200),
    ).values;
    const counted = await t.sql<{ value: string; count: string }>(
      `select target_id::text as value, count(*) as count from data_links."${table}" group by 1`,
    );
    const byValue = (rows: Array<{ value: string; count: number | string }>) =>
      Object.fromEntries(rows.map((r) => [r.value, Number(r.count)]));
    expect(byValue(values)).toEqual(byValue(counted));
    // Batches do not write links.
    const batch = await t.http
      .post('/api/v1/objects/proj/records/batch')
      .set(asAdmin(t))
      .send({ operations: [{ op: 'update', id: projB, record: { members: [] } }] });
    expect(JSON.stringify(batch.body)).toContain('read_only_field');
    expect((await get(t.adminKey, 'proj', projB)).members).toEqual(current);
  });

  it('rolls up and counts through links as SQL written by hand does, and under a row filter only over visible rows', async () => {
    await addField('proj', { name: 'total_hours', type: 'rollup', relation: 'members', function: 'sum', field: 'hours' }).expect(
      201,
    );
    await addField('proj', { name: 'avg_hours', type: 'rollup', relation: 'members', function: 'avg', field: 'hours' }).expect(
      201,
    );
    await addField('proj', { name: 'n_members', type: 'count', relation: 'members' }).expect(201);
    await addField('proj', { name: 'n_team_a', type: 'count', relation: 'members', filter: { team: 'a' } }).expect(201);
    await addField('person', { name: 'n_projects', type: 'count', relation: 'projects' }).expect(201);
    await patch(t.adminKey, 'proj', projA, { members: [people[0], people[1], people[2], people[9]] }).expect(200);

    const expected = (personWhere: string) =>
      t.sql<Row>(
        `select p.id::text as id,
                (select coalesce(sum(x.hours), 0) from data_links."${table}" j join data.person x on x.id = j.target_id where j.source_id = p.id and ${personWhere}) as total_hours,
                (select avg(x.hours) from data_links."${table}" j join data.person x on x.id = j.target_id where j.source_id = p.id and ${personWhere}) as avg_hours,
                (select count(*) from data_links."${table}" j join data.person x on x.id = j.target_id where j.source_id = p.id and ${personWhere}) as n_members,
                (select count(*) from data_links."${table}" j join data.person x on x.id = j.target_id where j.source_id = p.id and x.team = 'a' and ${personWhere}) as n_team_a
           from data.proj p order by p.id`,
      );
    const check = async (key: string, personWhere: string) => {
      const records = await all(key, 'proj');
      const want = await expected(personWhere);
      expect(records.map((r) => r.id)).toEqual(want.map((r) => r.id));
      records.forEach((record, i) => {
        const row = want[i];
        expect({ id: record.id, n: record.n_members, a: record.n_team_a }).toEqual({
          id: row.id,
          n: Number(row.n_members),
          a: Number(row.n_team_a),
        });
        expect(record.total_hours).toBeCloseTo(Number(row.total_hours), 9);
        if (row.avg_hours === null) expect(record.avg_hours).toBeNull();
        else expect(record.avg_hours).toBeCloseTo(Number(row.avg_hours), 9);
      });
      return records;
    };
    const admin = await check(t.adminKey, 'true');
    // The empty set: sum 0, avg null, count 0.
    expect(admin.find((r) => r.id === projEmpty)).toMatchObject({ total_hours: 0, avg_hours: null, n_members: 0 });
    expect(admin.find((r) => r.id === projA)).toMatchObject({ total_hours: 36.5, n_members: 4 });
    const filtered = await check(teamA, "x.team = 'a'");
    expect(filtered.find((r) => r.id === projA)).toMatchObject({ total_hours: 16.5, n_members: 3 });
    // The other side counts through the inverse.
    const bob = await get(t.adminKey, 'person', people[1]);
    const [{ n }] = await t.sql<{ n: string }>(`select count(*) as n from data_links."${table}" where target_id = $1`, [
      people[1],
    ]);
    expect(bob.n_projects).toBe(Number(n));
    expect(Number(n)).toBe(2);
  });

  it('keeps stored rollups and counts through links up to date as links and linked records change', async () => {
    const added = bodyOf<FieldResponse>(
      await addField('proj', {
        name: 'kept_hours',
        type: 'rollup',
        relation: 'members',
        function: 'sum',
        field: 'hours',
        stored: true,
      }).expect(201),
    );
    expect(added).toMatchObject({ stored: true, relation: 'members' });
    if (added.fillJobId) expect((await finishedJob(t, added.fillJobId)).status).toBe('done');
    const count = bodyOf<FieldResponse>(
      await addField('proj', { name: 'kept_a', type: 'count', relation: 'members', filter: { team: 'a' }, stored: true }).expect(
        201,
      ),
    );
    if (count.fillJobId) expect((await finishedJob(t, count.fillJobId)).status).toBe('done');
    // The columns hold what SQL written by hand computes over the join table, after each kind of write.
    const mismatches = () =>
      t.sql(
        `select p.id, p.kept_hours, p.kept_a from data.proj p
          where p.kept_hours is distinct from (select coalesce(sum(x.hours), 0) from data_links."${table}" j join data.person x on x.id = j.target_id where j.source_id = p.id)
             or p.kept_a is distinct from (select count(*) from data_links."${table}" j join data.person x on x.id = j.target_id where j.source_id = p.id and x.team = 'a')`,
      );
    expect(await mismatches()).toEqual([]);
    const linked = await patch(t.adminKey, 'proj', projEmpty, { members: [people[0], people[1]] }).expect(200);
    expect(await mismatches()).toEqual([]);
    // The answer holds the stored totals the links changed, and the version they left (an If-Match with it holds).
    const read = await t.http.get(`/api/v1/objects/proj/records/${projEmpty}`).set(asAdmin(t)).expect(200);
    expect(linked.headers.etag).toBe(read.headers.etag);
    expect(bodyOf<RecordBody>(linked)).toMatchObject({ kept_hours: bodyOf<RecordBody>(read).kept_hours, kept_a: 1 });
    await patch(t.adminKey, 'proj', projEmpty, { members: { $add: [people[4]], $remove: [people[0]] } }).expect(200);
    expect(await mismatches()).toEqual([]);
    await patch(t.adminKey, 'person', people[5], { projects: { $add: [projEmpty] } }).expect(200);
    await patch(t.adminKey, 'person', people[4], { hours: 100, team: 'b' }).expect(200);
    expect(await mismatches()).toEqual([]);
    await Promise.all(people.slice(6, 10).map((id) => patch(t.adminKey, 'proj', projA, { members: { $add: [id] } }).expect(200)));
    expect(await mismatches()).toEqual([]);
    const [{ kept }] = await t.sql<{ kept: number }>(`select kept_hours as kept from data.proj where id = $1`, [projEmpty]);
    expect((await get(t.adminKey, 'proj', projEmpty)).kept_hours).toBe(kept);
    expect(kept).toBe(20 + 100 + 1);
    // A key under a row filter reads it computed over what it may read, never the stored total.
    expect((await get(teamA, 'proj', projEmpty)).kept_hours).toBe(1);
    // A linked record deleted: its links go, and the totals with them.
    const temp = idOf(
      await t.http.post('/api/v1/objects/person/records').set(asAdmin(t)).send({ name: 'Tmp', team: 'a', hours: 50 }),
    );
    await patch(t.adminKey, 'proj', projEmpty, { members: { $add: [temp] } }).expect(200);
    expect((await get(t.adminKey, 'proj', projEmpty)).kept_hours).toBe(171);
    await t.http.delete(`/api/v1/objects/person/records/${temp}`).set(asAdmin(t)).expect(204);
    expect(await mismatches()).toEqual([]);
    expect((await get(t.adminKey, 'proj', projEmpty)).kept_hours).toBe(121);
    for (const name of ['kept_hours', 'kept_a'])
      await t.http.delete(`/api/v1/objects/proj/fields/${name}`).set(asAdmin(t)).expect(204);
  });

  it('refuses a stored links field and a lookup_value through links, with a code saying why', async () => {
    const stored = await addField('proj', { name: 'more', type: 'links', reference: 'person', stored: true }).expect(400);
    expect(errorOf(stored).code).toBe('stored_not_supported');
    const value = await addField('proj', { name: 'member_name', type: 'lookup_value', through: 'members', field: 'name' }).expect(
      400,
    );
    expect(errorOf(value).code).toBe('invalid_computed_field');
  });

  it('reports each link added or removed as an update of the record and of the record on the other side', async () => {
    const cursor = async (object: string) => {
      const res = await t.http.get(`/api/v1/objects/${object}/changes`).query({ limit: 1000 }).set(asAdmin(t)).expect(200);
      return bodyOf<{ nextCursor: string }>(res).nextCursor;
    };
    const projAfter = await cursor('proj');
    const personAfter = await cursor('person');
    await patch(t.adminKey, 'proj', projEmpty, { members: { $add: [people[8]] } }).expect(200);
    await patch(t.adminKey, 'proj', projEmpty, { members: { $remove: [people[8]] } }).expect(200);
    const changes = async (object: string, after: string) =>
      bodyOf<{ changes: Array<{ op: string; id: string; changedFields: string[] }> }>(
        await t.http.get(`/api/v1/objects/${object}/changes`).query({ after }).set(asAdmin(t)).expect(200),
      ).changes;
    const projChanges = await changes('proj', projAfter);
    expect(projChanges.map((c) => ({ op: c.op, id: c.id, changedFields: c.changedFields }))).toEqual([
      { op: 'update', id: projEmpty, changedFields: ['members'] },
      { op: 'update', id: projEmpty, changedFields: ['members'] },
    ]);
    const personChanges = await changes('person', personAfter);
    expect(personChanges.map((c) => ({ op: c.op, id: c.id, changedFields: c.changedFields }))).toEqual([
      { op: 'update', id: people[8], changedFields: ['projects'] },
      { op: 'update', id: people[8], changedFields: ['projects'] },
    ]);
    // From the other side: the record on this side changes too.
    const projAgain = await cursor('proj');
    expect(await stored(projB)).not.toContain(people[8]);
    await patch(t.adminKey, 'person', people[8], { projects: { $add: [projEmpty, projB] } }).expect(200);
    const fromPerson = await changes('proj', projAgain);
    expect(new Set(fromPerson.map((c) => `${c.op} ${c.id} ${c.changedFields.join()}`))).toEqual(
      new Set([`update ${projEmpty} members`, `update ${projB} members`]),
    );
    // A record deleted removes its links: the records it was linked to change.
    const linked = await t.sql<{ id: string }>(`select source_id::text as id from data_links."${table}" where target_id = $1`, [
      people[8],
    ]);
    expect(linked.length).toBeGreaterThanOrEqual(2);
    const projBeforeDelete = await cursor('proj');
    await t.http.delete(`/api/v1/objects/person/records/${people[8]}`).set(asAdmin(t)).expect(204);
    const afterDelete = await changes('proj', projBeforeDelete);
    expect(new Set(afterDelete.map((c) => `${c.op} ${c.id} ${c.changedFields.join()}`))).toEqual(
      new Set(linked.map((r) => `update ${r.id} members`)),
    );
    expect((await get(t.adminKey, 'proj', projB)).members).not.toContain(people[8]);
  });

  it('reverts a change set that changed links, from either side, and the revert itself; refuses one changed since', async () => {
    const person = async (name: string, team: string) =>
      idOf(await t.http.post('/api/v1/objects/person/records').set(asAdmin(t)).send({ name, team, hours: 1 }).expect(201));
    const [v1, v2, v3, v4] = [await person('V1', 'a'), await person('V2', 'b'), await person('V3', 'a'), await person('V4', 'a')];
    const y = idOf(
      await t.http
        .post('/api/v1/objects/proj/records')
        .set(asAdmin(t))
        .send({ title: 'Y', members: [v1, v2] })
        .expect(201),
    );
    const revert = (key: string, set: string) => t.http.post(`/api/v1/change-sets/${set}/revert`).set(bearer(key));
    const setOf = (res: { body: unknown }) => bodyOf<{ changeSetId: string }>(res as never).changeSetId;
    const sorted = (ids: unknown) => [...(ids as string[])].sort();

    const changed = setOf(await patch(t.adminKey, 'proj', y, { title: 'Y2', members: [v3] }).expect(200));
    const reverted = setOf(await revert(t.adminKey, changed).expect(200));
    const back = await get(t.adminKey, 'proj', y);
    expect({ title: back.title, members: sorted(back.members) }).toEqual({ title: 'Y', members: sorted([v1, v2]) });
    expect((await get(t.adminKey, 'person', v3)).projects).toEqual([]);
    expect((await get(t.adminKey, 'person', v1)).projects).toEqual([y]);
    // The revert is a change set like any other: reverted, the links are as the PATCH left them.
    await revert(t.adminKey, reverted).expect(200);
    expect(await get(t.adminKey, 'proj', y)).toMatchObject({ title: 'Y2', members: [v3] });

    // From the other side: the person's inverse field wrote the pair.
    const fromPerson = setOf(await patch(t.adminKey, 'person', v4, { projects: { $add: [y] } }).expect(200));
    expect(sorted((await get(t.adminKey, 'proj', y)).members)).toEqual(sorted([v3, v4]));
    await revert(t.adminKey, fromPerson).expect(200);
    expect((await get(t.adminKey, 'proj', y)).members).toEqual([v3]);

    // Changed since (a later links write of the record): nothing is reverted.
    const first = setOf(await patch(t.adminKey, 'proj', y, { members: { $add: [v1] } }).expect(200));
    await patch(t.adminKey, 'proj', y, { members: { $add: [v2] } }).expect(200);
    const conflict = await revert(t.adminKey, first).expect(409);
    // Named, without values: versions keep no link sets.
    expect(errorOf(conflict)).toMatchObject({
      code: 'revert_conflict',
      details: { records: [{ id: y, field: 'members', expected: 'unchanged', current: 'changed' }] },
    });
    expect(sorted((await get(t.adminKey, 'proj', y)).members)).toEqual(sorted([v3, v1, v2]));

    // A key under a row filter on person reverts its own links write while it may read the person, not after.
    const own = setOf(await patch(teamA, 'proj', y, { members: { $add: [v4] } }).expect(200));
    await patch(t.adminKey, 'person', v4, { team: 'b' }).expect(200);
    const refused = await revert(teamA, own).expect(403);
    expect(errorOf(refused).code).toBe('forbidden');
    expect((await get(t.adminKey, 'proj', y)).members).toContain(v4);
    await revert(t.adminKey, own).expect(200);
    expect((await get(t.adminKey, 'proj', y)).members).not.toContain(v4);
  });

  it('brings a record back from the trash with its links, from either side, except to records gone meanwhile', async () => {
    const person = async (name: string, team: string) =>
      idOf(await t.http.post('/api/v1/objects/person/records').set(asAdmin(t)).send({ name, team, hours: 1 }).expect(201));
    const [p1, p2, p3] = [await person('R1', 'a'), await person('R2', 'b'), await person('R3', 'a')];
    const x = idOf(
      await t.http
        .post('/api/v1/objects/proj/records')
        .set(asAdmin(t))
        .send({ title: 'X', members: [p2, p1, p3] })
        .expect(201),
    );
    // A links field without an inverse, to the same object: the record is on both sides of its table.
    await addField('person', { name: 'mentors', type: 'links', reference: 'person' }).expect(201);
    await patch(t.adminKey, 'person', p1, { mentors: [p3, p2] }).expect(200);
    await patch(t.adminKey, 'person', p2, { mentors: [p1] }).expect(200);

    await t.http.delete(`/api/v1/objects/proj/records/${x}`).set(asAdmin(t)).expect(204);
    await t.http.delete(`/api/v1/objects/person/records/${p1}`).set(asAdmin(t)).expect(204);
    expect((await get(t.adminKey, 'person', p2)).projects).toEqual([]);
    expect((await get(t.adminKey, 'person', p2)).mentors).toEqual([]);
    // Gone meanwhile: its links are not made again (and its restore later is not refused for it).
    await t.http.delete(`/api/v1/objects/person/records/${p3}`).set(asAdmin(t)).expect(204);

    const cursor = bodyOf<{ nextCursor: string }>(
      await t.http.get('/api/v1/objects/person/changes').query({ limit: 1000 }).set(asAdmin(t)).expect(200),
    ).nextCursor;
    const restored = await t.http.post(`/api/v1/objects/person/trash/${p1}/restore`).set(asAdmin(t)).expect(200);
    const { changeSetId } = bodyOf<{ changeSetId: string }>(restored);
    expect((await get(t.adminKey, 'person', p1)).mentors).toEqual([p2]);
    expect((await get(t.adminKey, 'person', p2)).mentors).toEqual([p1]);
    // The records on the other side changed with the restore, in its change set.
    const changes = bodyOf<{ changes: Array<{ op: string; id: string; changedFields: string[]; changeSetId: string }> }>(
      await t.http.get('/api/v1/objects/person/changes').query({ after: cursor }).set(asAdmin(t)).expect(200),
    ).changes;
    expect(changes.filter((c) => c.id === p2).map((c) => [c.op, c.changedFields, c.changeSetId])).toEqual([
      ['update', ['mentors'], changeSetId],
    ]);

    // The trash shows the links a restore would make again, as each reader may read them.
    const trashed = async (key: string) =>
      bodyOf<{ records: Array<{ id: string; record: Row }> }>(
        await t.http.get('/api/v1/objects/proj/trash').set(bearer(key)).expect(200),
      ).records.find((r) => r.id === x)?.record;
    expect((await trashed(t.adminKey))?.members).toEqual([p2, p1]);
    expect((await trashed(teamA))?.members).toEqual([p1]);
    const back = await t.http.post(`/api/v1/objects/proj/trash/${x}/restore`).set(asAdmin(t)).expect(200);
    // The record as a GET answers it (its links included, nothing else), with the restore's change set.
    const { changeSetId: restoreSet, ...restoredRecord } = bodyOf<RecordBody & { changeSetId: string }>(back);
    expect(restoreSet).toEqual(expect.any(String));
    expect(restoredRecord).toEqual(await get(t.adminKey, 'proj', x));
    expect(restoredRecord.members).toEqual([p2, p1]);
    expect(await stored(x)).toEqual([p2, p1]);
    expect((await get(t.adminKey, 'person', p1)).projects).toEqual([x]);
    // A key under a row filter on person sees only its side of the restored links, as before the delete.
    expect((await get(teamA, 'proj', x)).members).toEqual([p1]);

    // Reverting the delete's change set brings them back too.
    const deleted = await t.http.delete(`/api/v1/objects/proj/records/${x}`).set(asAdmin(t)).expect(204);
    expect(deleted.body).toEqual({});
    const [{ set }] = await t.sql<{ set: string }>(
      `select change_set_id::text as set from record_trash where object = 'proj' and record_id = $1`,
      [x],
    );
    await t.http.post(`/api/v1/change-sets/${set}/revert`).set(asAdmin(t)).expect(200);
    expect((await get(t.adminKey, 'proj', x)).members).toEqual([p2, p1]);
    expect((await get(t.adminKey, 'person', p2)).projects).toEqual([x]);
    // A delete whose cascade changed records of its own object (p2's mentors) reverts too.
    await t.http.delete(`/api/v1/objects/person/records/${p1}`).set(asAdmin(t)).expect(204);
    expect((await get(t.adminKey, 'person', p2)).mentors).toEqual([]);
    const [{ set: personSet }] = await t.sql<{ set: string }>(
      `select change_set_id::text as set from record_trash where object = 'person' and record_id = $1`,
      [p1],
    );
    await t.http.post(`/api/v1/change-sets/${personSet}/revert`).set(asAdmin(t)).expect(200);
    expect((await get(t.adminKey, 'person', p2)).mentors).toEqual([p1]);
    expect((await get(t.adminKey, 'person', p1)).projects).toEqual([x]);
    await t.http.delete('/api/v1/objects/person/fields/mentors').set(asAdmin(t)).expect(204);
  });

  it('refuses bad definitions with a code', async () => {
    const unknown = await addField('proj', { name: 'others', type: 'links', reference: 'nothing' }).expect(400);
    expect(errorOf(unknown).code).toBe('unknown_reference');
    const taken = await addField('proj', { name: 'others', type: 'links', reference: 'person', inverse: 'name' }).expect(400);
    expect(errorOf(taken).code).toBe('invalid_inverse');
    const noReference = await addField('proj', { name: 'others', type: 'links' }).expect(400);
    expect(errorOf(noReference).code).toBe('missing_reference');
    const inverseOnText = await addField('proj', { name: 'others', type: 'text', inverse: 'x' }).expect(400);
    expect(errorOf(inverseOnText).code).toBe('validation_failed');
  });

  it('refuses to delete a links field a computed field uses (409 field_in_use), then drops it with its inverse and table', async () => {
    const used = await t.http.delete('/api/v1/objects/proj/fields/members').set(asAdmin(t)).expect(409);
    expect(errorOf(used).code).toBe('field_in_use');
    expect(errorOf(used).error).toContain('proj.total_hours');
    for (const name of ['total_hours', 'avg_hours', 'n_members', 'n_team_a']) {
      await t.http.delete(`/api/v1/objects/proj/fields/${name}`).set(asAdmin(t)).expect(204);
    }
    // The inverse is used by person.n_projects.
    const inverseUsed = await t.http.delete('/api/v1/objects/proj/fields/members').set(asAdmin(t)).expect(409);
    expect(errorOf(inverseUsed).error).toContain('person.n_projects');
    await t.http.delete('/api/v1/objects/person/fields/n_projects').set(asAdmin(t)).expect(204);
    await t.http.delete('/api/v1/objects/proj/fields/members').set(asAdmin(t)).expect(204);
    const person = bodyOf<ObjectResponse>(await t.http.get('/api/v1/objects/person').set(asAdmin(t)).expect(200));
    expect(person.fields.map((f) => f.name)).not.toContain('projects');
    expect(await t.sql(`select 1 from pg_tables where schemaname = 'data_links' and tablename = $1`, [table])).toHaveLength(0);
  });

  it('keeps an object a links field points at from being deleted, and drops the join tables of an object deleted', async () => {
    await createObject(t, 'tag', [fieldSpec('label', 'text')]);
    await addField('proj', { name: 'tags', type: 'links', reference: 'tag' }).expect(201);
    const inUse = await t.http.delete('/api/v1/objects/tag').set(asAdmin(t)).expect(409);
    expect(errorOf(inUse).code).toBe('object_in_use');
    const tag = idOf(await t.http.post('/api/v1/objects/tag/records').set(asAdmin(t)).send({ label: 'x' }).expect(201));
    await patch(t.adminKey, 'proj', projA, { tags: [tag] }).expect(200);
    const tagTable = await linkTableOf((text, params) => t.sql(text, params), 'proj', 'tags');
    // A record deleted takes its links with it.
    await t.http.delete(`/api/v1/objects/tag/records/${tag}`).set(asAdmin(t)).expect(204);
    expect((await get(t.adminKey, 'proj', projA)).tags).toEqual([]);
    // A stored rollup through its links keeps triggers on tag's table, which go with proj.
    await addField('proj', {
      name: 'last_tag',
      type: 'rollup',
      relation: 'tags',
      function: 'max',
      field: 'label',
      stored: true,
    }).expect(201);
    const other = idOf(await t.http.post('/api/v1/objects/tag/records').set(asAdmin(t)).send({ label: 'y' }).expect(201));
    await patch(t.adminKey, 'proj', projA, { tags: [other] }).expect(200);
    await patch(t.adminKey, 'tag', other, { label: 'z' }).expect(200);
    expect((await get(t.adminKey, 'proj', projA)).last_tag).toBe('z');
    await t.http.delete('/api/v1/objects/proj').set(asAdmin(t)).expect(204);
    expect(await t.sql(`select 1 from pg_tables where schemaname = 'data_links' and tablename = $1`, [tagTable])).toHaveLength(0);
    await patch(t.adminKey, 'tag', other, { label: 'after' }).expect(200);
    await t.http.delete('/api/v1/objects/tag').set(asAdmin(t)).expect(204);
  });
});
