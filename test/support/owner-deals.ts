import { asAdmin, createObject, fieldSpec } from './fixtures';
import type { TestApp } from './test-app';

/**
 * Deals of two owners, for tests of figures by reference: pat won 2,500,000.50 over 3 deals, sam 1,250,000 over 2.
 * Amounts are USD (the field's description says so), every margin 0.2.
 */
export const OWNER_DEALS: ReadonlyArray<{ owner: string; amount: number; closed_on: string }> = [
  { owner: 'pat', amount: 1_200_000.5, closed_on: '2024-03-05' },
  { owner: 'pat', amount: 800_000, closed_on: '2024-04-10' },
  { owner: 'pat', amount: 500_000, closed_on: '2024-05-20' },
  { owner: 'sam', amount: 900_000, closed_on: '2024-02-01' },
  { owner: 'sam', amount: 350_000, closed_on: '2024-06-30' },
];

/** aggregate_data arguments: won amount (`total`) and deals (`n`) per owner, largest first: row 1 is pat's, row 2 sam's. */
export const BY_OWNER = {
  objectName: 'deal',
  groupBy: ['owner'],
  aggregations: [
    { function: 'sum', field: 'amount', alias: 'total' },
    { function: 'count', alias: 'n' },
  ],
  orderBy: [{ field: 'total', order: 'desc' }],
};

/** A policy that lets a key read only its own deals (owner = its subject), without their margin. */
export const OWN_DEALS = { deal: { read: true, rowFilter: { owner: '$subject' }, hiddenFields: ['margin'] } };

/** The `deal` object with OWNER_DEALS in it, and the policy `own-deals` (OWN_DEALS). */
export async function createOwnerDeals(t: TestApp): Promise<void> {
  await createObject(t, 'deal', [
    fieldSpec('owner', 'text'),
    fieldSpec('amount', 'currency', { description: 'Amount in USD' }),
    fieldSpec('closed_on', 'date'),
    fieldSpec('margin', 'number'),
  ]);
  for (const deal of OWNER_DEALS)
    await t.http
      .post('/api/v1/objects/deal/records')
      .set(asAdmin(t))
      .send({ ...deal, margin: 0.2 })
      .expect(201);
  await t.http.post('/api/v1/policies').set(asAdmin(t)).send({ name: 'own-deals', objects: OWN_DEALS }).expect(201);
}
