import type { ViewRow } from './view.entity';
import { applyView, type ViewableQuery } from './view.service';

function view(parts: Partial<ViewRow>): ViewRow {
  return { where: null, orderBy: null, fields: null, ...parts } as ViewRow;
}

describe('applyView', () => {
  const stageWon = { stage: { $eq: 'won' } };

  it('fills what the query leaves out with the view: filter, order and fields', () => {
    // The rest of the query (here a limit) passes through as it is.
    const query: ViewableQuery & { limit: number } = { limit: 5 };
    const applied = applyView(view({ where: stageWon, orderBy: [{ field: 'amount' }], fields: ['name', 'amount'] }), query);
    expect(applied).toEqual({ limit: 5, where: stageWon, orderBy: [{ field: 'amount' }], fields: ['name', 'amount'] });
  });

  it("ANDs the query's filter with the view's: a view narrows, it is never widened", () => {
    const mine = { amount: { $gt: 10 } };
    expect(applyView(view({ where: stageWon }), { where: mine }).where).toEqual({ $and: [stageWon, mine] });
  });

  it("lets the query's order and fields win, and treats '' and null as not given", () => {
    const v = view({ orderBy: [{ field: 'amount' }], fields: ['name'] });
    expect(applyView(v, { orderBy: [{ field: 'name' }], fields: ['id'] })).toMatchObject({
      orderBy: [{ field: 'name' }],
      fields: ['id'],
    });
    expect(applyView(v, { orderBy: '', fields: null })).toMatchObject({ orderBy: [{ field: 'amount' }], fields: ['name'] });
    expect(applyView(view({ where: stageWon }), { where: '' }).where).toEqual(stageWon);
  });

  it('leaves the query as it is where the view has nothing: no filter, no order, no fields (or an empty list)', () => {
    const query = { where: { a: 1 }, orderBy: undefined, fields: undefined };
    expect(applyView(view({ fields: [] }), query)).toEqual(query);
  });
});
