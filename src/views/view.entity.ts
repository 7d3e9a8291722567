import { defineEntity, InferEntity, p } from '@mikro-orm/core';

/** A saved view of one object: a filter, an order, visible fields and a grouping, owned by an API key or shared. */
export const ViewEntity = defineEntity({
  name: 'SavedView',
  tableName: 'views',
  properties: {
    id: p.uuid().primary(),
    object: p.string(),
    name: p.string(),
    /**
     * The API key that owns the view (only it sees it: not another key of the same subject); null: a
     * shared view (admins manage it, every reader of the object sees it).
     */
    ownerKeyId: p.uuid().nullable(),
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
