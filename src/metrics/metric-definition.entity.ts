import { defineEntity, InferEntity, p } from '@mikro-orm/core';
import type { MetricMeasure } from './metric.types';

/** A metric of the semantic layer: a named, admin-defined aggregate over one object. */
export const MetricDefinitionEntity = defineEntity({
  name: 'MetricDefinition',
  tableName: 'metric_definitions',
  properties: {
    id: p.uuid().primary(),
    name: p.string().unique(),
    label: p.string(),
    description: p.text().nullable(),
    object: p.string(),
    type: p.string(),
    measure: p.json<MetricMeasure>().nullable(),
    filter: p.json<Record<string, unknown>>().nullable(),
    numerator: p.string().nullable(),
    denominator: p.string().nullable(),
    timeField: p.string().nullable(),
    dimensions: p.json<string[]>(),
    synonyms: p.json<string[]>(),
    /** Every "object.field" the metric reads; metadata writes check it before dropping a field. */
    uses: p.json<string[]>(),
    createdAt: p.datetime(),
    updatedAt: p.datetime(),
  },
});
export type MetricDefinitionRow = InferEntity<typeof MetricDefinitionEntity>;
