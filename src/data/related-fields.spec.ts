import { CallerAccess } from '../governance/caller-access';
import { ObjectMeta, SYSTEM_FIELDS } from '../metadata/object-metadata.types';
import { compileStream } from './records.compiler';
import { domainError, field } from '../../test/support/metadata-fixtures';

const deal: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    ...SYSTEM_FIELDS,
    field('account', 'lookup', { reference: 'account' }),
    field('amount', 'currency'),
    field('owner', 'text'),
    field('stage', 'text'),
  ],
};
const account: ObjectMeta = {
  name: 'account',
  label: 'Account',
  fields: [
    ...SYSTEM_FIELDS,
    field('name', 'text'),
    field('open_total', 'currency', {
      related: {
        kind: 'rollup',
        self: 'account',
        target: 'deal',
        via: 'account',
        field: 'amount',
        function: 'sum',
        filter: { stage: 'open' },
      },
    }),
  ],
};
const catalog = (name: string) => ({ deal, account })[name as 'deal' | 'account'];

describe("rollup SQL under the caller's access", () => {
  it("ANDs the caller's row filter on the related object into the subquery, values bound", () => {
    const access = CallerAccess.fromPolicies(
      [{ name: 'own', objects: { account: { read: true }, deal: { read: true, rowFilter: { owner: '$subject' } } } }],
      'ann',
      {},
    );
    const view = access.view(account, 'read', catalog);
    const { query } = compileStream(view, { fields: 'open_total' });
    expect(query.sql).toBe(
      'select "id", (select coalesce(sum("rel1_"."amount"), 0) from "data"."deal" as "rel1_" where "rel1_"."account" = "data"."account"."id" ' +
        'and ("rel1_"."owner" = $1::text) and ("rel1_"."stage" = $2::text)) as "open_total" from "data"."account" where TRUE order by "id" ASC',
    );
    expect(query.parameters).toEqual(['ann', 'open']);
  });

  it('reads every related record for an unrestricted caller, and refuses to compile without a view', () => {
    const view = CallerAccess.unrestricted().view(account, 'read', catalog);
    const { query } = compileStream(view, { fields: 'open_total' });
    expect(query.sql).not.toContain('owner');
    // The definition alone (no caller's view of deal): never compiled.
    expect(domainError(() => compileStream(account, { fields: 'open_total' }).query).code).toBe('unknown_field');
  });

  it('hides the rollup when the key may not read the related object, or the view has no catalog', () => {
    const accountOnly = CallerAccess.fromPolicies([{ name: 'a', objects: { account: { read: true } } }], 'ann', {});
    expect(accountOnly.view(account, 'read', catalog).fields.map((f) => f.name)).not.toContain('open_total');
    const hiddenStage = CallerAccess.fromPolicies(
      [{ name: 'h', objects: { account: { read: true }, deal: { read: true, hiddenFields: ['stage'] } } }],
      'ann',
      {},
    );
    expect(hiddenStage.view(account, 'read', catalog).fields.map((f) => f.name)).not.toContain('open_total');
    const full = CallerAccess.fromPolicies([{ name: 'f', objects: { '*': { read: true } } }], 'ann', {});
    expect(full.view(account, 'read', catalog).fields.map((f) => f.name)).toContain('open_total');
    expect(full.view(account, 'read').fields.map((f) => f.name)).not.toContain('open_total');
  });
});
