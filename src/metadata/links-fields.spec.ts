import type { RelatedMeta } from './object-metadata.types';
import { linkedCondition, linkSides, linksValueSql, linkTableDdl, newLinkTableName } from './links-fields';

const parts = {
  from: '"data"."person" as "rel1_"',
  alias: 'rel1_',
  outer: (c: string) => `"data"."proj"."${c}"`,
  inner: (c: string) => `"rel1_"."${c}"`,
  conditions: ['(F)'],
};

describe('links fields', () => {
  const table = 'l_0123456789abcdef0123456789abcdef';
  const meta: RelatedMeta = { kind: 'links', self: 'proj', target: 'person', via: 'members', link: linkSides(table).source };

  it('names each join table apart, as an identifier', () => {
    const name = newLinkTableName();
    expect(name).toMatch(/^l_[0-9a-f]{32}$/);
    expect(newLinkTableName()).not.toBe(name);
  });

  it('reads the same table both ways: the inverse swaps the columns', () => {
    expect(linkSides(table)).toEqual({
      source: { table, selfColumn: 'source_id', targetColumn: 'target_id' },
      inverse: { table, selfColumn: 'target_id', targetColumn: 'source_id' },
    });
  });

  it('creates a join table whose rows go with either record', () => {
    const [create, index] = linkTableDdl(table, 'proj', 'person');
    expect(create).toContain(`create table "data_links"."${table}"`);
    expect(create).toContain('"source_id" uuid not null references "data"."proj" ("id") on delete cascade');
    expect(create).toContain('"target_id" uuid not null references "data"."person" ("id") on delete cascade');
    expect(index).toBe(`create index "${table}_target" on "data_links"."${table}" ("target_id", "source_id")`);
  });

  it('reads the value as the linked ids the caller may read, in the order linked, [] without any', () => {
    expect(linksValueSql(meta, parts)).toBe(
      `(select coalesce(array_agg("rel1_"."id"::text order by "rel1_j"."seq", "rel1_"."id"), '{}'::text[]) ` +
        `from "data_links"."${table}" as "rel1_j" join "data"."person" as "rel1_" on "rel1_"."id" = "rel1_j"."target_id" ` +
        `where "rel1_j"."source_id" = "data"."proj"."id" and (F))`,
    );
  });

  it('relates a rollup to the linked records through the join table', () => {
    const inverse: RelatedMeta = { ...meta, link: linkSides(table).inverse };
    expect(linkedCondition(inverse, parts)).toBe(
      `exists (select from "data_links"."${table}" as "rel1_j" where "rel1_j"."target_id" = "data"."proj"."id" ` +
        `and "rel1_j"."source_id" = "rel1_"."id")`,
    );
  });
});
