import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { domainError, field } from '../../test/support/metadata-fixtures';
import { ADVISORY_LOCK } from '../database/advisory-locks';
import {
  compileChangePage,
  compileCompact,
  compileExpire,
  compileLatest,
  compileMoveHorizons,
  fieldAlias,
  SEQUENCE_BATCH,
} from './change-feed.compiler';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [field('name', 'text'), field('stage', 'select', { options: ['open', 'won'] }), ...SYSTEM_FIELDS],
};

describe('compileChangePage', () => {
  it("projects the reader's fields of the snapshot under short aliases, every change visible without a row filter", () => {
    const query = compileChangePage(deal, '41', 100);
    expect(query.sql).toContain(
      'select "r"."name" as "__f0", "r"."stage" as "__f1", "r"."id" as "__f2", "r"."created_at" as "__f3", ' +
        '"r"."updated_at" as "__f4", TRUE as "__visible" ' +
        'from jsonb_populate_record(null::"data"."deal", c."record") as "r"',
    );
    // The page comes from record_changes_page (which numbers committed changes first): object, after, limit, then
    // the numbering batch and the feed's advisory lock key.
    expect(query.sql).toContain(
      'from "record_changes_page"($1, $2::bigint, $3::integer, $4::integer, $5::integer) c cross join lateral',
    );
    expect(query.sql).toMatch(/order by c\."cursor"$/);
    expect(query.parameters).toEqual(['deal', '41', 100, SEQUENCE_BATCH, ADVISORY_LOCK.changeFeed]);
  });

  it("selects only the fields of the reader's view and computes its row filter over the snapshot, bound first", () => {
    const reader: ObjectMeta = {
      ...deal,
      fields: [field('stage', 'select', { options: ['open', 'won'] }), SYSTEM_FIELDS[0]],
      rowFilter: { object: deal, filters: [{ name: '$subject' }], subject: 'ann', attributes: {} },
    };
    const query = compileChangePage(reader, '0', 10);
    expect(query.sql).toContain(
      '"r"."stage" as "__f0", "r"."id" as "__f1", COALESCE("r"."name" = $1::text, FALSE) as "__visible"',
    );
    expect(query.sql).not.toContain('"r"."name" as');
    expect(query.parameters).toEqual(['ann', 'deal', '0', 10, SEQUENCE_BATCH, ADVISORY_LOCK.changeFeed]);
  });

  it('lets no row through when no policy filter grants any (FALSE), and refuses an object name that is no identifier', () => {
    const none: ObjectMeta = { ...deal, rowFilter: { object: deal, filters: [], subject: 'ann', attributes: {} } };
    expect(compileChangePage(none, '0', 1).sql).toContain('FALSE as "__visible"');
    expect(domainError(() => compileChangePage({ ...deal, name: 'Deal"; drop' }, '0', 1)).code).toBe('invalid_identifier');
  });

  it('names the i-th field __f<i>', () => {
    expect([fieldAlias(0), fieldAlias(62)]).toEqual(['__f0', '__f62']);
  });
});

describe('compileLatest and the retention statements', () => {
  const cutoff = new Date(Date.UTC(2026, 0, 2, 3, 4, 5));

  it('bind the object name, the cut-off instants and the batch size as parameters', () => {
    expect(compileLatest('deal').parameters).toEqual(['deal']);
    const horizons = compileMoveHorizons(cutoff, 86_400_000);
    expect(horizons.parameters).toEqual(['2026-01-02T03:04:05.000Z', '2026-01-01T03:04:05.000Z']);
    expect(horizons.sql).toContain('greatest("record_change_horizons"."pruned_through", excluded."pruned_through")');
    expect(compileCompact(cutoff, 500).parameters).toEqual(['2026-01-02T03:04:05.000Z', 500]);
    expect(compileExpire(cutoff, 500).parameters).toEqual(['2026-01-02T03:04:05.000Z', 500]);
  });

  it('compact only updates that kept what they replaced, and never expire a change that holds a trashed record', () => {
    expect(compileCompact(cutoff, 1).sql).toContain(`"op" = 'update' and not "compacted"`);
    expect(compileCompact(cutoff, 1).sql).toContain('"before" is not null');
    expect(compileExpire(cutoff, 1).sql).toContain('not exists (select from "record_trash" t where t."change_id" = r."id")');
  });
});
