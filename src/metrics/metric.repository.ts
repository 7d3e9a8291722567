import type { EntityManager } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { sql, type Kysely } from 'kysely';
import { MetadataDependent, MetadataDependents } from '../metadata/metadata-dependents';

interface MetricDatabase {
  metric_definitions: { name: string; object: string; uses: string };
}

/** Statements about `metric_definitions` that the entity cannot say; answers metadata about what metrics read. */
@Injectable()
export class MetricRepository implements MetadataDependent {
  constructor(dependents: MetadataDependents) {
    dependents.register('metric', this);
  }

  /** Metrics over the object or reading one of its fields (through a lookup dimension). */
  async usingObject(em: EntityManager, objectName: string): Promise<string[]> {
    const rows = await db(em)
      .selectFrom('metric_definitions as m')
      .select('m.name')
      .where((eb) =>
        eb.or([
          eb('m.object', '=', objectName),
          eb.exists(
            eb
              .selectFrom(sql<{ u: string }>`jsonb_array_elements_text(m.uses)`.as('u'))
              .where(sql<string>`split_part(u, '.', 1)`, '=', objectName),
          ),
        ]),
      )
      .orderBy('m.name')
      .execute();
    return rows.map((row) => row.name);
  }

  /** Metrics that read the field (measure, filter, time field, dimension). */
  async usingField(em: EntityManager, objectName: string, fieldName: string): Promise<string[]> {
    const rows = await db(em)
      .selectFrom('metric_definitions')
      .select('name')
      .where('uses', '?', `${objectName}.${fieldName}`)
      .orderBy('name')
      .execute();
    return rows.map((row) => row.name);
  }
}

function db(em: EntityManager): Kysely<MetricDatabase> {
  return em.getKysely<MetricDatabase>();
}
