import { DomainError } from '../common/domain-error';
import {
  computedInputs,
  computedView,
  defineRelated,
  type DefinitionContext,
  describeComputed,
  type FieldLens,
  computedSql,
  type RelatedSqlParts,
  whereFieldNames,
} from './computed-fields';
import { type FieldMeta, type ObjectMeta, SYSTEM_FIELDS } from './object-metadata.types';

const plain = (name: string, type: FieldMeta['type'], extra: Partial<FieldMeta> = {}): FieldMeta => ({
  name,
  label: name,
  type,
  required: false,
  unique: false,
  indexed: false,
  ...extra,
});

const account: ObjectMeta = { name: 'account', label: 'Account', fields: [...SYSTEM_FIELDS, plain('name', 'text')] };
const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    ...SYSTEM_FIELDS,
    plain('account', 'lookup', { reference: 'account' }),
    plain('amount', 'currency'),
    plain('title', 'text'),
    plain('closed', 'date'),
    plain('stage', 'select', { options: ['open', 'won'] }),
    plain('secret', 'number'),
  ],
};

const total: FieldMeta = plain('total', 'currency', {
  related: {
    kind: 'rollup',
    self: 'account',
    target: 'deal',
    via: 'account',
    field: 'amount',
    function: 'sum',
    filter: { stage: 'open' },
  },
});
const dealCount: FieldMeta = plain('deals', 'integer', {
  related: {
    kind: 'count',
    self: 'account',
    target: 'deal',
    via: 'account',
    filter: { $or: [{ secret: { $gt: 1 } }, { $not: { title: 'x' } }] },
  },
});
const accountName: FieldMeta = plain('account_name', 'text', {
  related: { kind: 'lookup_value', self: 'deal', target: 'account', via: 'account', field: 'name' },
});

function context(): DefinitionContext {
  return { self: account, load: (name) => Promise.resolve(name === 'deal' ? deal : name === 'account' ? account : undefined) };
}

async function codeOf(work: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await work();
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
  return undefined;
}

describe('computed fields', () => {
  it('lists the field names of a where, combinators walked', () => {
    expect([...whereFieldNames({ a: 1, $and: [{ b: { $gt: 1 } }, { $or: [{ c: 1 }, { $not: { d: 1 } }] }] })].sort()).toEqual([
      'a',
      'b',
      'c',
      'd',
    ]);
  });

  it('names the inputs of each kind on the objects they are on', () => {
    expect(computedInputs('account', total)).toEqual([
      { object: 'deal', field: 'account' },
      { object: 'deal', field: 'amount' },
      { object: 'deal', field: 'stage' },
    ]);
    expect(computedInputs('account', dealCount).map((r) => r.field)).toEqual(['account', 'secret', 'title']);
    expect(computedInputs('deal', accountName)).toEqual([
      { object: 'deal', field: 'account' },
      { object: 'account', field: 'name' },
    ]);
  });

  describe('the access rule', () => {
    /** A caller who sees everything but `hidden` ("object.field") and objects in `unreadable`, with a row filter on deal. */
    function lens(hidden: string[] = [], unreadable: string[] = []): FieldLens {
      const objects: Record<string, ObjectMeta> = {
        account: { ...account, fields: [...account.fields, total, dealCount] },
        deal,
      };
      const self: FieldLens = {
        field: (object, name) => {
          if (unreadable.includes(object) || hidden.includes(`${object}.${name}`)) return null;
          const field = objects[object]?.fields.find((f) => f.name === name) ?? null;
          return field && (field.related || field.formula) ? computedView(object, field, self) : field;
        },
        scope: (object, fields) =>
          unreadable.includes(object)
            ? null
            : {
                name: object,
                label: object,
                fields,
                rowFilter: { object: deal, filters: [{ title: 'mine' }], subject: 's', attributes: {} },
              },
      };
      return self;
    }

    it("reads the related object through the caller's view: its row filter, only the fields it needs", () => {
      const seen = computedView('account', total, lens())!;
      expect(seen.related!.scope!.fields.map((f) => f.name)).toEqual(['id', 'account', 'amount', 'stage']);
      expect(seen.related!.scope!.rowFilter!.filters).toEqual([{ title: 'mine' }]);
    });

    it('hides a rollup over, filtering on or linked through a hidden field, or into an unreadable object', () => {
      expect(computedView('account', total, lens(['deal.amount']))).toBeNull();
      expect(computedView('account', total, lens(['deal.stage']))).toBeNull();
      expect(computedView('account', total, lens(['deal.account']))).toBeNull();
      expect(computedView('account', dealCount, lens(['deal.secret']))).toBeNull();
      expect(computedView('account', total, lens([], ['deal']))).toBeNull();
      expect(computedView('deal', accountName, lens(['deal.account']))).toBeNull();
      expect(computedView('deal', accountName, lens([], ['account']))).toBeNull();
      expect(computedView('account', total, lens(['deal.title']))).not.toBeNull();
    });

    it('hides a formula over a hidden computed field, and hands the compiler the view of the visible ones', () => {
      const formula = plain('share', 'number', {
        formula: { expression: '{total} / {deals}', resultType: 'number', inputs: ['total', 'deals'] },
      });
      expect(computedView('account', formula, lens(['deal.secret']))).toBeNull();
      const seen = computedView('account', formula, lens())!;
      expect(Object.keys(seen.formula!.related!)).toEqual(['total', 'deals']);
      expect(seen.formula!.related!.total.related!.scope).toBeDefined();
    });
  });

  it('aggregates nothing as 0 for counts and sums and null otherwise', () => {
    const sql = (f: FieldMeta) => computedSql(f, { expression: () => 'EXPR', related: () => parts, column: () => 'COLUMN' });
    const parts: RelatedSqlParts = {
      from: '"data"."deal" as "r"',
      alias: 'r',
      outer: (c) => `"o"."${c}"`,
      inner: (c) => `"r"."${c}"`,
      value: (n) => `"r"."${n}"`,
      conditions: ['(F)'],
    };
    expect(sql(total)).toBe(
      `(select coalesce(sum("r"."amount"), 0) from "data"."deal" as "r" where "r"."account" = "o"."id" and (F))`,
    );
    expect(sql(dealCount)).toBe(`(select count(*) from "data"."deal" as "r" where "r"."account" = "o"."id" and (F))`);
    const avg = plain('a', 'number', { related: { ...total.related!, function: 'avg' } });
    expect(sql(avg)).toContain('avg("r"."amount")::double precision');
    const concat = plain('c', 'text', { related: { ...total.related!, function: 'concat', field: 'title' } });
    expect(sql(concat)).toContain(`string_agg("r"."title"::text, ', ' order by "r"."title"::text)`);
    expect(sql(accountName)).toBe(`(select "r"."name" from "data"."deal" as "r" where "r"."id" = "o"."account" and (F))`);
  });

  it('checks definitions with clear codes and derives the result type', async () => {
    const define = (def: Record<string, unknown>) =>
      defineRelated({ name: 'f', type: 'rollup', relation: 'deal.account', ...def } as never, context());
    expect((await define({ function: 'sum', field: 'amount' })).type).toBe('currency');
    expect((await define({ function: 'avg', field: 'secret' })).type).toBe('number');
    expect((await define({ function: 'max', field: 'stage' })).type).toBe('text');
    expect((await define({ function: 'min', field: 'closed' })).type).toBe('date');
    expect((await define({ function: 'count_distinct', field: 'title' })).type).toBe('integer');
    expect((await define({ function: 'count' })).stored).toMatchObject({ target: 'deal', via: 'account' });
    expect(await codeOf(() => define({ function: 'sum', field: 'title' }))).toBe('invalid_rollup_function');
    expect(await codeOf(() => define({ function: 'concat', field: 'amount' }))).toBe('invalid_rollup_function');
    expect(await codeOf(() => define({ function: 'nope', field: 'amount' }))).toBe('invalid_rollup_function');
    expect(await codeOf(() => define({ function: 'sum' }))).toBe('invalid_computed_field');
    expect(await codeOf(() => define({ function: 'sum', field: 'zzz' }))).toBe('unknown_field');
    expect(await codeOf(() => define({ relation: 'deal.title', function: 'count' }))).toBe('invalid_computed_field');
    expect(await codeOf(() => define({ relation: 'ghost.account', function: 'count' }))).toBe('unknown_reference');
    expect((await define({ function: 'count', stored: true })).stored).toMatchObject({ stored: true, filled: false });
    expect(await codeOf(() => define({ function: 'count', through: 'x' }))).toBe('invalid_computed_field');
  });

  it('describes a definition as written, with its result type', () => {
    expect(describeComputed(total)).toEqual({
      relation: 'deal.account',
      function: 'sum',
      field: 'amount',
      filter: { stage: 'open' },
      resultType: 'currency',
    });
    expect(describeComputed(accountName)).toEqual({ through: 'account', field: 'name', resultType: 'text' });
  });
});
