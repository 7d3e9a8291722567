import fc from 'fast-check';
import type { FieldResponse } from '../../src/metadata/metadata.dto';
import type { DescribeObjectResult } from '../../src/tools/data-tools/describe-object.tool';
import type { AggregateResponse } from '../../src/records/records.dto';
import { asAdmin, createApiKey, createObject, fieldSpec } from '../support/fixtures';
import { bodyOf, errorOf, idOf, type RecordBody, type RecordPage } from '../support/responses';
import { bearer, startTestApp, TestApp } from '../support/test-app';

type Row = Record<string, unknown>;

/** Values of `fx`: nulls, zeros, negatives, text with spaces and accents, dates around month ends. */
const ROWS: Row[] = [
  {
    a: 10,
    b: 4,
    n: 3,
    c: 19.99,
    s: 'Hello',
    s2: 'World',
    flag: true,
    d: '2024-03-15',
    d2: '2024-01-10',
    at: '2024-03-15T10:30:00.000Z',
  },
  {
    a: -7.5,
    b: 0,
    n: -2,
    c: 0,
    s: '  pad ',
    s2: '',
    flag: false,
    d: '2023-12-31',
    d2: '2024-02-29',
    at: '2023-12-31T23:59:59.000Z',
  },
  {},
  { a: 0, b: 3, n: 0, c: 100.5, s: 'abc', flag: null, d: '2024-02-29' },
  {
    a: 2.5,
    b: -2,
    n: 7,
    c: 1234.56,
    s: 'Ünïcode',
    s2: 'x',
    flag: true,
    d: '2020-01-01',
    d2: '2021-06-15',
    at: '2020-06-01T00:00:00.000Z',
  },
  { b: 5, s2: 'only', flag: false, d2: '2024-01-01', at: '2024-01-01T12:00:00.000Z' },
];

type Kind = 'number' | 'text' | 'boolean' | 'date' | 'datetime';

/**
 * Each supported operator and function: the formula, its result type, and the same value written by hand
 * in SQL over `data.fx` (independently of the compiler).
 */
const CASES: Array<{ name: string; expression: string; resultType: string; sql: string; kind: Kind }> = [
  { name: 'f_add', expression: '{a} + {b}', resultType: 'number', sql: 'a + b', kind: 'number' },
  { name: 'f_sub', expression: '{a} - {n}', resultType: 'number', sql: 'a - n', kind: 'number' },
  { name: 'f_mul', expression: '{a} * {c}', resultType: 'number', sql: 'a * c::float8', kind: 'number' },
  {
    name: 'f_div',
    expression: '{a} / {b}',
    resultType: 'number',
    sql: 'case when b = 0 then null else a / b end',
    kind: 'number',
  },
  { name: 'f_mod', expression: '{n} % 3', resultType: 'integer', sql: 'mod(n, 3)', kind: 'number' },
  {
    name: 'f_mod0',
    expression: '{a} % {b}',
    resultType: 'number',
    sql: 'case when b = 0 then null else mod(a::numeric, b::numeric) end',
    kind: 'number',
  },
  { name: 'f_neg', expression: '-{a} + 1', resultType: 'number', sql: '-a + 1', kind: 'number' },
  { name: 'f_prec', expression: '1 + 2 * {n} - 10 / 4', resultType: 'number', sql: '1 + 2 * n - 2.5', kind: 'number' },
  {
    name: 'f_amp',
    expression: "{s} & '-' & {n}",
    resultType: 'text',
    sql: "coalesce(s, '') || '-' || coalesce(n::text, '')",
    kind: 'text',
  },
  { name: 'f_eq', expression: "{s} = 'abc'", resultType: 'boolean', sql: "s = 'abc'", kind: 'boolean' },
  { name: 'f_ne', expression: '{n} != 3', resultType: 'boolean', sql: 'n <> 3', kind: 'boolean' },
  { name: 'f_lt', expression: '{a} < {b}', resultType: 'boolean', sql: 'a < b', kind: 'boolean' },
  { name: 'f_le', expression: '{a} <= {b}', resultType: 'boolean', sql: 'a <= b', kind: 'boolean' },
  { name: 'f_gt', expression: '{d} > {d2}', resultType: 'boolean', sql: 'd > d2', kind: 'boolean' },
  { name: 'f_ge', expression: '{c} >= 100', resultType: 'boolean', sql: 'c >= 100', kind: 'boolean' },
  {
    name: 'f_if',
    expression: "IF({a} > 0, 'pos', 'non-pos')",
    resultType: 'text',
    sql: "case when a > 0 then 'pos' else 'non-pos' end",
    kind: 'text',
  },
  { name: 'f_if2', expression: 'IF({flag}, {n})', resultType: 'integer', sql: 'case when flag then n end', kind: 'number' },
  {
    name: 'f_switch',
    expression: "SWITCH({n}, 3, 'three', 7, 'seven', 'other')",
    resultType: 'text',
    sql: "case when n = 3 then 'three' when n = 7 then 'seven' else 'other' end",
    kind: 'text',
  },
  { name: 'f_and', expression: 'AND({flag}, {a} > 1)', resultType: 'boolean', sql: 'flag and a > 1', kind: 'boolean' },
  { name: 'f_or', expression: 'OR({flag}, {n} > 5)', resultType: 'boolean', sql: 'flag or n > 5', kind: 'boolean' },
  { name: 'f_not', expression: 'NOT({flag})', resultType: 'boolean', sql: 'not flag', kind: 'boolean' },
  { name: 'f_blank_t', expression: 'BLANK({s2})', resultType: 'boolean', sql: "s2 is null or s2 = ''", kind: 'boolean' },
  { name: 'f_blank_n', expression: 'BLANK({a})', resultType: 'boolean', sql: 'a is null', kind: 'boolean' },
  { name: 'f_coalesce', expression: 'COALESCE({a}, {b}, 0)', resultType: 'number', sql: 'coalesce(a, b, 0)', kind: 'number' },
  { name: 'f_round', expression: 'ROUND({a} / 3, 2)', resultType: 'number', sql: 'round((a / 3)::numeric, 2)', kind: 'number' },
  { name: 'f_round0', expression: 'ROUND({c})', resultType: 'number', sql: 'round(c)', kind: 'number' },
  { name: 'f_floor', expression: 'FLOOR({a})', resultType: 'number', sql: 'floor(a)', kind: 'number' },
  { name: 'f_ceil', expression: 'CEIL({a})', resultType: 'number', sql: 'ceil(a)', kind: 'number' },
  { name: 'f_abs', expression: 'ABS({a})', resultType: 'number', sql: 'abs(a)', kind: 'number' },
  { name: 'f_min', expression: 'MIN({a}, {b}, {n})', resultType: 'number', sql: 'least(a, b, n)', kind: 'number' },
  { name: 'f_max', expression: 'MAX({a}, {b}, {n})', resultType: 'number', sql: 'greatest(a, b, n)', kind: 'number' },
  {
    name: 'f_sum',
    expression: 'SUM({a}, {b}, {n})',
    resultType: 'number',
    sql: 'case when a is null and b is null and n is null then null else coalesce(a, 0) + coalesce(b, 0) + coalesce(n, 0) end',
    kind: 'number',
  },
  {
    name: 'f_avg',
    expression: 'AVG({a}, {b}, {n})',
    resultType: 'number',
    sql: '(coalesce(a, 0) + coalesce(b, 0) + coalesce(n, 0)) / nullif((a is not null)::int + (b is not null)::int + (n is not null)::int, 0)',
    kind: 'number',
  },
  {
    name: 'f_concat',
    expression: "CONCAT({s}, ':', {a}, ':', {flag})",
    resultType: 'text',
    sql: "concat(s, ':', a::text, ':', flag::text)",
    kind: 'text',
  },
  { name: 'f_left', expression: 'LEFT({s}, 2)', resultType: 'text', sql: 'substr(s, 1, 2)', kind: 'text' },
  { name: 'f_right', expression: 'RIGHT({s}, 3)', resultType: 'text', sql: 'right(s, 3)', kind: 'text' },
  { name: 'f_lower', expression: 'LOWER({s})', resultType: 'text', sql: 'lower(s)', kind: 'text' },
  { name: 'f_upper', expression: 'UPPER({s})', resultType: 'text', sql: 'upper(s)', kind: 'text' },
  { name: 'f_len', expression: 'LEN({s})', resultType: 'integer', sql: 'length(s)', kind: 'number' },
  { name: 'f_trim', expression: 'TRIM({s})', resultType: 'text', sql: 'trim(s)', kind: 'text' },
  { name: 'f_contains', expression: "CONTAINS({s}, 'l')", resultType: 'boolean', sql: "position('l' in s) > 0", kind: 'boolean' },
  { name: 'f_year', expression: 'YEAR({d})', resultType: 'integer', sql: "date_part('year', d)", kind: 'number' },
  {
    name: 'f_month',
    expression: 'MONTH({at})',
    resultType: 'integer',
    sql: "date_part('month', at at time zone 'UTC')",
    kind: 'number',
  },
  { name: 'f_day', expression: 'DAY({d})', resultType: 'integer', sql: "date_part('day', d)", kind: 'number' },
  {
    name: 'f_weekday',
    expression: 'WEEKDAY({d})',
    resultType: 'integer',
    sql: "mod(date_part('isodow', d)::int, 7)",
    kind: 'number',
  },
  { name: 'f_ddays', expression: "DATE_DIFF({d}, {d2}, 'days')", resultType: 'integer', sql: 'd - d2', kind: 'number' },
  {
    name: 'f_dmonths',
    expression: "DATE_DIFF({d}, {d2}, 'months')",
    resultType: 'integer',
    sql: "date_part('year', age(d, d2)) * 12 + date_part('month', age(d, d2))",
    kind: 'number',
  },
  {
    name: 'f_dhours',
    expression: "DATE_DIFF({at}, {d}, 'hours')",
    resultType: 'integer',
    sql: "trunc(date_part('epoch', at - (d::timestamp at time zone 'UTC')) / 3600)",
    kind: 'number',
  },
  { name: 'f_adddays', expression: "DATE_ADD({d}, 10, 'days')", resultType: 'date', sql: 'd + 10', kind: 'date' },
  {
    name: 'f_addmonth',
    expression: "DATE_ADD({d}, 1, 'months')",
    resultType: 'date',
    sql: "(d + interval '1 month')::date",
    kind: 'date',
  },
  {
    name: 'f_addmin',
    expression: "DATE_ADD({at}, 90, 'minutes')",
    resultType: 'datetime',
    sql: "at + interval '90 minutes'",
    kind: 'datetime',
  },
  {
    name: 'f_today',
    expression: "DATE_DIFF(TODAY(), {d}, 'days')",
    resultType: 'integer',
    sql: 'current_date - d',
    kind: 'number',
  },
  { name: 'f_now', expression: 'NOW() > {at}', resultType: 'boolean', sql: 'now() > at', kind: 'boolean' },
  { name: 'f_currency', expression: '{c} * 1.1', resultType: 'currency', sql: 'round(c * 1.1, 2)', kind: 'number' },
  { name: 'f_percent', expression: '{a} / 3', resultType: 'percent', sql: 'round((a / 3)::numeric, 4)', kind: 'number' },
  { name: 'f_int', expression: '{a} * 2', resultType: 'integer', sql: 'round(a * 2)', kind: 'number' },
  { name: 'f_text', expression: '{n} * 2', resultType: 'text', sql: '(n * 2)::text', kind: 'text' },
  {
    name: 'f_todate',
    expression: "DATE_ADD({at}, 1, 'days')",
    resultType: 'date',
    sql: "((at + interval '1 day') at time zone 'UTC')::date",
    kind: 'date',
  },
  { name: 'f_nested', expression: '{f_add} * 2 + {f_sub}', resultType: 'number', sql: '(a + b) * 2 + (a - n)', kind: 'number' },
];

/** The SQL value as the API would show it. */
function sqlValue(kind: Kind, sql: string): string {
  switch (kind) {
    case 'number':
      return `(${sql})::float8`;
    case 'date':
      return `to_char(${sql}, 'YYYY-MM-DD')`;
    case 'datetime':
      return `to_char((${sql}) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    default:
      return `(${sql})`;
  }
}

function expectSame(kind: Kind, actual: unknown, expected: unknown, label: string): void {
  if (expected === null) return expect({ label, actual }).toEqual({ label, actual: null });
  if (kind === 'number') {
    expect(typeof actual).toBe('number');
    const diff = Math.abs((actual as number) - (expected as number));
    expect({ label, close: diff <= 1e-9 * Math.max(1, Math.abs(expected as number)) }).toEqual({ label, close: true });
    return;
  }
  if (kind === 'datetime')
    return expect({ label, at: Date.parse(actual as string) }).toEqual({ label, at: Date.parse(expected as string) });
  expect({ label, actual }).toEqual({ label, actual: expected });
}

describe('formula fields: computed when read', () => {
  let t: TestApp;
  const ids: string[] = [];

  function list(key: string, object: string, query: Record<string, unknown> = {}) {
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(query)) params[name] = typeof value === 'string' ? value : JSON.stringify(value);
    return t.http.get(`/api/v1/objects/${object}/records`).query(params).set(bearer(key));
  }
  const addField = (object: string, spec: Record<string, unknown>) =>
    t.http.post(`/api/v1/objects/${object}/fields`).set(asAdmin(t)).send(spec);

  beforeAll(async () => {
    t = await startTestApp(process.env.FORMULA_DEBUG ? { env: { LOG_LEVEL: 'error' } } : {});
    await createObject(t, 'fx', [
      fieldSpec('a', 'number'),
      fieldSpec('b', 'number'),
      fieldSpec('n', 'integer'),
      fieldSpec('c', 'currency'),
      fieldSpec('s', 'text'),
      fieldSpec('s2', 'text'),
      fieldSpec('flag', 'boolean'),
      fieldSpec('d', 'date'),
      fieldSpec('d2', 'date'),
      fieldSpec('at', 'datetime'),
      // A formula defined with the object, over the fields listed before it.
      { name: 'f_first', label: 'First', type: 'formula', expression: '{a} * 10', resultType: 'number' },
    ]);
    for (const row of ROWS) ids.push(idOf(await t.http.post('/api/v1/objects/fx/records').set(asAdmin(t)).send(row).expect(201)));
    for (const c of CASES) {
      const res = await addField('fx', {
        name: c.name,
        label: c.name,
        type: 'formula',
        expression: c.expression,
        resultType: c.resultType,
      });
      expect({ name: c.name, status: res.status, body: res.body as unknown }).toMatchObject({ name: c.name, status: 201 });
      expect(bodyOf<FieldResponse>(res)).toMatchObject({ type: 'formula', expression: c.expression, resultType: c.resultType });
    }
  });
  afterAll(async () => {
    await t.close();
  });

  it('gives every operator and function the value SQL written by hand gives, nulls included', async () => {
    const page = bodyOf<RecordPage>(await list(t.adminKey, 'fx', { limit: 100, orderBy: [{ field: 'id' }] }).expect(200));
    const expected = await t.sql<Row>(
      `select id::text, ${CASES.map((c) => `${sqlValue(c.kind, c.sql)} as "${c.name}"`).join(', ')} from data.fx order by id`,
    );
    expect(page.records.map((r) => r.id)).toEqual(expected.map((r) => r.id));
    page.records.forEach((record, i) => {
      for (const c of CASES) expectSame(c.kind, record[c.name], expected[i][c.name], `${c.name} of row ${i}`);
    });
    // Division by zero reads null (row 2 has b = 0), never an error.
    const zero = page.records.find((r) => r.b === 0)!;
    expect([zero.f_div, zero.f_mod0]).toEqual([null, null]);
    expect(page.records.map((r) => r.f_first)).toEqual(page.records.map((r) => (r.a === null ? null : (r.a as number) * 10)));
  });

  it('reads a formula in a get, a fields selection, and a CSV export', async () => {
    const one = bodyOf<RecordBody>(await t.http.get(`/api/v1/objects/fx/records/${ids[0]}`).set(asAdmin(t)).expect(200));
    expect(one).toMatchObject({
      f_add: 14,
      f_if: 'pos',
      f_nested: 35,
      f_addmin: '2024-03-15T12:00:00.000Z',
      f_adddays: '2024-03-25',
    });
    const some = bodyOf<RecordPage>(
      await list(t.adminKey, 'fx', { fields: 'f_add,f_if', orderBy: [{ field: 'id' }] }).expect(200),
    );
    expect(Object.keys(some.records[0]).sort()).toEqual(['f_add', 'f_if', 'id']);
    const csv = await t.http
      .get('/api/v1/objects/fx/records/export.csv')
      .query({ fields: 'a,b,f_add' })
      .set(asAdmin(t))
      .expect(200);
    const lines = csv.text.trim().split(/\r?\n/);
    expect(lines[0]).toContain('f_add');
    const header = lines[0].split(',');
    const column = header.findIndex((h) => h.replace(/"/g, '') === 'f_add');
    const values = lines.slice(1).map((line) => line.split(',')[column]);
    expect(values.sort()).toEqual(['', '', '-7.5', '14', '3', '0.5'].sort());
  });

  it('filters, sorts and pages by keyset on a formula like SQL', async () => {
    const where = { f_div: { $gt: 0 } };
    const filtered = bodyOf<RecordPage>(await list(t.adminKey, 'fx', { where, orderBy: [{ field: 'id' }] }).expect(200));
    const sqlIds = await t.sql<{ id: string }>(`select id::text from data.fx where b <> 0 and a / b > 0 order by id`);
    expect(filtered.records.map((r) => r.id)).toEqual(sqlIds.map((r) => r.id));
    const textWhere = bodyOf<RecordPage>(await list(t.adminKey, 'fx', { where: { f_if: 'pos' } }).expect(200));
    expect(textWhere.records.map((r) => r.f_if)).toEqual(textWhere.records.map(() => 'pos'));

    const expected = await t.sql<{ id: string }>(
      `select id::text from data.fx order by (case when b = 0 then null else a / b end) desc nulls last, id`,
    );
    const seen: string[] = [];
    let cursor: string | null | undefined;
    for (let i = 0; i < 10; i++) {
      const query: Record<string, unknown> = { orderBy: [{ field: 'f_div', order: 'desc' }], limit: 2 };
      if (cursor) query.cursor = cursor;
      const page = bodyOf<RecordPage>(await list(t.adminKey, 'fx', query).expect(200));
      seen.push(...page.records.map((r) => r.id));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toEqual(expected.map((r) => r.id));
    const byOffset = bodyOf<RecordPage>(
      await list(t.adminKey, 'fx', { orderBy: [{ field: 'f_div', order: 'desc' }], offset: 2, limit: 3 }).expect(200),
    );
    expect(byOffset.records.map((r) => r.id)).toEqual(expected.slice(2, 5).map((r) => r.id));
  });

  it('groups and aggregates by formulas like SQL', async () => {
    const res = await t.http
      .post('/api/v1/objects/fx/aggregate')
      .set(asAdmin(t))
      .send({
        groupBy: ['f_if'],
        aggregations: [
          { function: 'count', alias: 'records' },
          { function: 'sum', field: 'f_add', alias: 'total' },
          { function: 'max', field: 'f_div', alias: 'top' },
        ],
        where: { f_len: { $gte: 0 } },
      })
      .expect(200);
    const expected = await t.sql<Row>(
      `select case when a > 0 then 'pos' else 'non-pos' end as f_if, count(*)::int as records, sum(a + b)::float8 as total,
              max(case when b = 0 then null else a / b end)::float8 as top
         from data.fx where length(s) >= 0 group by 1 order by 1`,
    );
    expect(bodyOf<AggregateResponse>(res).rows).toEqual(expected);
  });

  it('refuses writes to a formula with read_only_field', async () => {
    const created = await t.http.post('/api/v1/objects/fx/records').set(asAdmin(t)).send({ a: 1, f_add: 3 });
    expect([created.status, errorOf(created).code]).toEqual([400, 'read_only_field']);
    const patched = await t.http.patch(`/api/v1/objects/fx/records/${ids[0]}`).set(asAdmin(t)).send({ f_add: 3 });
    expect([patched.status, errorOf(patched).code]).toEqual([400, 'read_only_field']);
  });

  it('refuses an invalid expression at definition, naming its position', async () => {
    const cases: Array<[string, string, number]> = [
      ['{a} + * 2', 'number', 6],
      ['{a} + {zzz}', 'number', 6],
      ['NOPE({a})', 'number', 0],
      ['{s} * 2', 'number', 0],
      ['IF({a}, 1, 2)', 'number', 3],
      ["{a} + 'x'", 'number', 6],
      ['ROUND({a}', 'number', 9],
      ["'unterminated", 'text', 0],
      ['{a} + 1', 'boolean', 0],
      ["DATE_ADD({d}, 1, 'fortnights')", 'date', 17],
      ['', 'number', 0],
    ];
    for (const [expression, resultType, position] of cases) {
      const res = await addField('fx', { name: 'bad', label: 'Bad', type: 'formula', expression, resultType });
      expect({
        expression,
        status: res.status,
        code: errorOf(res).code,
        position: errorOf<{ position: number }>(res).details?.position,
      }).toEqual({
        expression,
        status: 400,
        code: 'invalid_expression',
        position,
      });
    }
    const stored = await addField('fx', {
      name: 'bad',
      label: 'Bad',
      type: 'formula',
      expression: '1',
      resultType: 'number',
      indexed: true,
    });
    expect([stored.status, errorOf(stored).code]).toEqual([400, 'validation_failed']);
  });

  it('refuses a cycle among formulas with its path, and deleting a field a formula uses', async () => {
    const self = await addField('fx', {
      name: 'g_self',
      label: 'Self',
      type: 'formula',
      expression: '{g_self} + 1',
      resultType: 'number',
    });
    expect([self.status, errorOf(self).code, errorOf<{ path: string[] }>(self).details.path]).toEqual([
      400,
      'computed_cycle',
      ['g_self', 'g_self'],
    ]);
    await addField('fx', { name: 'g1', label: 'G1', type: 'formula', expression: '{a} + 1', resultType: 'number' }).expect(201);
    await addField('fx', { name: 'g2', label: 'G2', type: 'formula', expression: '{g1} * 2', resultType: 'number' }).expect(201);
    const cycle = await t.http.patch('/api/v1/objects/fx/fields/g1').set(asAdmin(t)).send({ expression: '{g2} + 1' });
    expect([cycle.status, errorOf(cycle).code, errorOf<{ path: string[] }>(cycle).details.path]).toEqual([
      400,
      'computed_cycle',
      ['g1', 'g2', 'g1'],
    ]);
    // A new expression that keeps its readers valid is taken.
    const changed = await t.http
      .patch('/api/v1/objects/fx/fields/g1')
      .set(asAdmin(t))
      .send({ expression: '{n} + 1', resultType: 'integer' })
      .expect(200);
    expect(bodyOf<FieldResponse>(changed)).toMatchObject({ expression: '{n} + 1', resultType: 'integer' });
    const retyped = await t.http.patch('/api/v1/objects/fx/fields/g1').set(asAdmin(t)).send({ resultType: 'text' });
    expect([retyped.status, errorOf(retyped).code]).toEqual([400, 'invalid_expression']);

    const used = await t.http.delete('/api/v1/objects/fx/fields/n').set(asAdmin(t));
    expect([used.status, errorOf(used).code]).toEqual([409, 'field_in_use']);
    expect(errorOf(used).error).toContain('g1');
    expect(errorOf<{ formulas: string[] }>(used).details.formulas).toEqual(expect.arrayContaining(['g1', 'f_sub', 'f_mod']));
    const usedFormula = await t.http.delete('/api/v1/objects/fx/fields/g1').set(asAdmin(t));
    expect([usedFormula.status, errorOf(usedFormula).code, errorOf(usedFormula).error]).toEqual([
      409,
      'field_in_use',
      expect.stringContaining('g2'),
    ]);
    await t.http.delete('/api/v1/objects/fx/fields/g2').set(asAdmin(t)).expect(204);
    await t.http.delete('/api/v1/objects/fx/fields/g1').set(asAdmin(t)).expect(204);
  });

  it('hides a formula that reads a hidden field, at any depth, on every surface', async () => {
    await t.http
      .post('/api/v1/policies')
      .set(asAdmin(t))
      .send({ name: 'no-b', objects: { fx: { read: true, hiddenFields: ['b'] } } })
      .expect(201);
    const key = (await createApiKey(t, { name: 'no-b-reader', role: 'member', subject: 'r', policies: ['no-b'] })).secret;
    const page = bodyOf<RecordPage>(await list(key, 'fx').expect(200));
    // f_add reads b; f_nested reads f_add; f_sub and f_first do not.
    for (const record of page.records) {
      expect(record).not.toHaveProperty('f_add');
      expect(record).not.toHaveProperty('f_nested');
      expect(record).not.toHaveProperty('f_div');
      expect(record).toHaveProperty('f_sub');
    }
    for (const query of [{ where: { f_nested: { $gt: 0 } } }, { orderBy: [{ field: 'f_add' }] }, { fields: 'f_nested' }]) {
      const res = await list(key, 'fx', query);
      expect({ query, status: res.status, code: errorOf(res).code }).toEqual({ query, status: 400, code: 'unknown_field' });
    }
    const one = bodyOf<RecordBody>(await t.http.get(`/api/v1/objects/fx/records/${ids[0]}`).set(bearer(key)).expect(200));
    expect(one).not.toHaveProperty('f_nested');
    const csv = await t.http.get('/api/v1/objects/fx/records/export.csv').set(bearer(key)).expect(200);
    const header = csv.text.split(/\r?\n/)[0].split(',');
    expect(header).not.toContain('f_add');
    expect(header).not.toContain('f_nested');
    expect(header).toContain('f_sub');
    const aggregate = await t.http
      .post('/api/v1/objects/fx/aggregate')
      .set(bearer(key))
      .send({ aggregations: [{ function: 'sum', field: 'f_nested', alias: 'x' }] });
    expect(errorOf(aggregate).code).toBe('unknown_field');

    const described = bodyOf<{ result: DescribeObjectResult }>(
      await t.http
        .post('/api/v1/ai/tools/describe_object/execute')
        .set(bearer(key))
        .send({ arguments: { objectName: 'fx' } })
        .expect(200),
    );
    const names = described.result.fields.map((f) => f.name);
    expect(names).not.toContain('f_nested');
    expect(described.result.fields.find((f) => f.name === 'f_sub')).toMatchObject({
      type: 'formula',
      expression: '{a} - {n}',
      resultType: 'number',
    });
    const admin = bodyOf<{ result: DescribeObjectResult }>(
      await t.http
        .post('/api/v1/ai/tools/describe_object/execute')
        .set(asAdmin(t))
        .send({ arguments: { objectName: 'fx' } })
        .expect(200),
    );
    expect(admin.result.fields.find((f) => f.name === 'f_nested')).toMatchObject({
      expression: '{f_add} * 2 + {f_sub}',
      resultType: 'number',
    });
  });

  describe('property: random arithmetic and comparisons agree with a reference evaluator', () => {
    type Expr =
      | { kind: 'field'; name: 'x' | 'y' | 'z' }
      | { kind: 'num'; value: number }
      | { kind: 'neg'; operand: Expr }
      | { kind: 'bin'; op: '+' | '-' | '*' | '/' | '%'; left: Expr; right: Expr };
    type Cmp = { op: '=' | '!=' | '<' | '<=' | '>' | '>='; left: Expr; right: Expr };

    const { expr } = fc.letrec<{ expr: Expr }>((tie) => ({
      expr: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.constantFrom<'x' | 'y' | 'z'>('x', 'y', 'z').map((name): Expr => ({ kind: 'field', name })),
        fc.integer({ min: -20, max: 20 }).map((v): Expr => ({ kind: 'num', value: v / (v % 3 === 0 ? 4 : 1) })),
        tie('expr').map((operand): Expr => ({ kind: 'neg', operand })),
        fc
          .record({
            op: fc.constantFrom<'+' | '-' | '*' | '/' | '%'>('+', '-', '*', '/', '%'),
            left: tie('expr'),
            right: tie('expr'),
          })
          .map((b): Expr => ({ kind: 'bin', ...b })),
      ),
    }));
    const cmp = fc.record({ op: fc.constantFrom<Cmp['op']>('=', '!=', '<', '<=', '>', '>='), left: expr, right: expr });

    const text = (e: Expr): string => {
      switch (e.kind) {
        case 'field':
          return `{${e.name}}`;
        case 'num':
          return e.value < 0 ? `(${e.value})` : String(e.value);
        case 'neg':
          return `-(${text(e.operand)})`;
        case 'bin':
          return `(${text(e.left)} ${e.op} ${text(e.right)})`;
      }
    };
    const evaluate = (e: Expr, row: Row): number | null => {
      switch (e.kind) {
        case 'field':
          return (row[e.name] as number | null) ?? null;
        case 'num':
          return e.value;
        case 'neg': {
          const v = evaluate(e.operand, row);
          return v === null ? null : -v;
        }
        case 'bin': {
          const l = evaluate(e.left, row);
          const r = evaluate(e.right, row);
          if (l === null || r === null) return null;
          if ((e.op === '/' || e.op === '%') && r === 0) return null;
          return e.op === '+' ? l + r : e.op === '-' ? l - r : e.op === '*' ? l * r : e.op === '/' ? l / r : l % r;
        }
      }
    };
    const compare = (c: Cmp, row: Row): boolean | null | 'tie' => {
      const l = evaluate(c.left, row);
      const r = evaluate(c.right, row);
      if (l === null || r === null) return null;
      // Too close to tell apart across decimal and binary arithmetic: not asserted.
      if (Math.abs(l - r) <= 1e-9 * Math.max(1, Math.abs(l), Math.abs(r))) return 'tie';
      return { '=': l === r, '!=': l !== r, '<': l < r, '<=': l <= r, '>': l > r, '>=': l >= r }[c.op];
    };

    let rows: Row[] = [];
    let counter = 0;

    beforeAll(async () => {
      await createObject(t, 'prop', [fieldSpec('x', 'number'), fieldSpec('y', 'integer'), fieldSpec('z', 'currency')]);
      const value = (max: number, scale: number) =>
        fc.option(
          fc.integer({ min: -max, max }).map((v) => v / scale),
          { freq: 5 },
        );
      const records = fc.sample(fc.record({ x: value(5000, 100), y: value(50, 1), z: value(100000, 100) }), {
        numRuns: 25,
        seed: 35,
      });
      records.push({ x: 0, y: 0, z: 0 }, { x: null, y: null, z: null });
      for (const record of records) await t.http.post('/api/v1/objects/prop/records').set(asAdmin(t)).send(record).expect(201);
      rows = bodyOf<RecordPage>(await list(t.adminKey, 'prop', { limit: 100, orderBy: [{ field: 'id' }] }).expect(200)).records;
    });

    const read = async (expression: string, resultType: string) => {
      const name = `p${counter++}`;
      const res = await addField('prop', { name, label: name, type: 'formula', expression, resultType });
      expect({ expression, status: res.status }).toEqual({ expression, status: 201 });
      const page = bodyOf<RecordPage>(
        await list(t.adminKey, 'prop', { limit: 100, orderBy: [{ field: 'id' }], fields: name }).expect(200),
      );
      await t.http.delete(`/api/v1/objects/prop/fields/${name}`).set(asAdmin(t)).expect(204);
      return page.records.map((r) => r[name]);
    };

    it('numbers', async () => {
      await fc.assert(
        fc.asyncProperty(expr, async (e) => {
          const values = await read(text(e), 'number');
          rows.forEach((row, i) => {
            const expected = evaluate(e, row);
            const label = `${text(e)} over ${JSON.stringify(row)}`;
            if (expected === null || !Number.isFinite(expected))
              return expect({ label, v: values[i] }).toEqual({ label, v: expected === null ? null : values[i] });
            expect(typeof values[i]).toBe('number');
            const diff = Math.abs((values[i] as number) - expected);
            expect({ label, close: diff <= 1e-6 * Math.max(1, Math.abs(expected)) }).toEqual({ label, close: true });
          });
        }),
        { numRuns: 40, seed: 3535 },
      );
    });

    it('comparisons', async () => {
      await fc.assert(
        fc.asyncProperty(cmp, async (c) => {
          const expression = `${text(c.left)} ${c.op} ${text(c.right)}`;
          const values = await read(expression, 'boolean');
          rows.forEach((row, i) => {
            const expected = compare(c, row);
            if (expected === 'tie') return;
            expect({ expression, row, v: values[i] }).toEqual({ expression, row, v: expected });
          });
        }),
        { numRuns: 40, seed: 3536 },
      );
    });
  });
});
