import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { dollarQuoted, storedGroupDdl, storedInputColumns, storedNames } from '../metadata/stored-fields';
import { inlineParams, storedValue } from './formula.compiler';
import './where.compiler';
import { field } from '../../test/support/metadata-fixtures';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    ...SYSTEM_FIELDS,
    field('account', 'lookup', { reference: 'account' }),
    field('amount', 'currency'),
    field('stage', 'text'),
  ],
};
const openTotal = field('open_total', 'currency', {
  related: {
    kind: 'rollup',
    self: 'account',
    target: 'deal',
    via: 'account',
    field: 'amount',
    function: 'sum',
    filter: { stage: "o'pen" },
    stored: true,
    filled: true,
  },
});

describe('stored rollup and count values', () => {
  it('writes bound values as literals, quotes doubled, in one pass', () => {
    const values = ["it's", 2, true, null, ['a', 'b'], [], 'x', 'y', 'z', 'ten'];
    expect(inlineParams('$1 $2 $3 $4 $5 $6 $10', values)).toBe(`'it''s' (2) true null array['a', 'b'] '{}' 'ten'`);
    expect(() => inlineParams('$11', values)).toThrow();
  });

  it('computes the value over the whole related object, never from its own column, with no parameter left', () => {
    const sql = storedValue(openTotal, deal, '"__p"');
    expect(sql).toContain(`"__p"."id"`);
    expect(sql).toContain(`'o''pen'`);
    expect(sql).not.toMatch(/\$\d/);
    expect(sql).toMatch(/^\(select coalesce\(sum\(/);
  });

  it("watches the lookup, the rolled-up field and the filter's fields; names stay within Postgres' 63 bytes", () => {
    expect(storedInputColumns([openTotal])).toEqual(['account', 'amount', 'stage']);
    const names = storedNames('a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63));
    expect(Object.values(names).every((name) => name.length <= 63)).toBe(true);
    const ddl = storedGroupDdl({ self: 'account', target: deal, via: 'account', fields: [openTotal] }).join('\n');
    expect(ddl).toContain('for no key update');
    expect(ddl).toContain('after update on "data"."deal" referencing old table as old_rows new table as new_rows');
    expect(ddl).toContain('before insert on "data"."account"');
  });
});

describe('dollarQuoted', () => {
  it('quotes a body with a tag the body does not contain, so a value holding a tag cannot end it', () => {
    const body = "begin perform 'x$stored$; drop table data.deal; $stored$'; end";
    const quoted = dollarQuoted(body);
    const tag = /^\$[a-z0-9_]+\$/.exec(quoted)![0];
    expect(quoted).toBe(`${tag}${body}${tag}`);
    expect(body.includes(tag)).toBe(false);
    expect(tag).not.toBe('$stored$');
  });
});
