import { defineEntity, InferEntity, p } from '@mikro-orm/core';

/** A saved view of one object: a filter, an order, visible fields and a grouping, owned by a subject or shared. */
export const ViewEntity = defineEntity({
  name: 'SavedView',
  tableName: 'views',
  properties: {
    id: p.uuid().primary(),
    object: p.string(),
    name: p.string(),
    /** The owner's subject; null: a shared view (admins manage it, every reader of the object sees it). */
    owner: p.string().nullable(),
    label: p.string(),
    description: p.text().nullable(),
    where: p.json<Record<string, unknown>>().nullable(),
    orderBy: p.json<unknown[]>().nullable(),
    fields: p.json<string[]>().nullable(),
    groupBy: p.json<string[]>().nullable(),
    /** Every "object.field" the view names; metadata writes check it before dropping a field. */
    uses: p.json<string[]>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type ViewRow = InferEntity<typeof ViewEntity>;
