import { EntityManager, UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { ADVISORY_LOCK, lockForTransaction } from '../database/advisory-locks';
import type { DataSession } from '../database/data-pool';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import { DataService } from '../data/data.service';
import { clip } from '../data/where.compiler';
import { AccessService } from '../governance/access.service';
import { MetadataService } from '../metadata/metadata.service';
import { MetricDefinitionEntity, type MetricDefinitionRow } from './metric-definition.entity';
import {
  CreateMetricDto,
  MetricListResponse,
  MetricResponse,
  ReplaceMetricDto,
  toMetricDefinition,
  toMetricResponse,
} from './metric.dto';
import { compileMetricQuery, type MetricQuery } from './metric-query.compiler';
import type { MetricDefinition } from './metric.types';
import { checkMetric, type MetricCatalog } from './metric.validator';

/** A metric query's answer: one row per group (and period), and whether more groups were left out. */
export interface MetricQueryResult {
  rows: Record<string, unknown>[];
  truncated: boolean;
}

/**
 * The semantic layer: metric definitions (admin CRUD, checked against the metadata they read) and
 * metric queries, compiled into the data engine's aggregates and run as the caller. Writes hold the
 * metadata lock, so a field cannot be dropped while a metric starting to use it is checked.
 */
@Injectable()
export class MetricService {
  constructor(
    private readonly em: EntityManager,
    private readonly metadata: MetadataService,
    private readonly data: DataService,
    private readonly access: AccessService,
  ) {}

  async create(dto: CreateMetricDto): Promise<MetricResponse> {
    try {
      return await this.write(async (em) => {
        if (await em.findOne(MetricDefinitionEntity, { name: dto.name })) {
          throw new DomainError('metric_exists', `Metric "${dto.name}" already exists`);
        }
        const { definition, uses } = await checkMetric(definitionOf(dto.name, dto), catalogOf(em, this.metadata));
        const now = new Date();
        const row = em.create(MetricDefinitionEntity, {
          id: randomUUID(),
          ...rowOf(definition),
          uses,
          createdAt: now,
          updatedAt: now,
        });
        await em.persist(row).flush();
        return toMetricResponse(row);
      });
    } catch (error) {
      if (error instanceof UniqueConstraintViolationException) {
        throw new DomainError('metric_exists', `Metric "${dto.name}" already exists`);
      }
      throw error;
    }
  }

  /** The metric definitions the caller may see (see visibleTo). */
  async list(caller: Caller): Promise<MetricListResponse> {
    return { metrics: (await this.visibleTo(caller)).map(toMetricResponse) };
  }

  /** One definition the caller may see; any other is metric_not_found, like an unknown name. */
  async get(caller: Caller, name: string): Promise<MetricResponse> {
    const row = (await this.visibleTo(caller)).find((m) => m.name === name);
    if (!row) throw notFound(name);
    return toMetricResponse(row);
  }

  /** Replaces a definition; a metric a ratio divides stays a simple metric of its object. */
  async replace(name: string, dto: ReplaceMetricDto): Promise<MetricResponse> {
    return this.write(async (em) => {
      const row = await find(em, name);
      const ratios = await dividingRatios(em, row.name);
      if (ratios.length && (dto.type !== 'simple' || dto.object !== row.object)) {
        throw inUse(row.name, ratios, `stay a simple metric of "${row.object}"`);
      }
      const { definition, uses } = await checkMetric(definitionOf(row.name, dto), catalogOf(em, this.metadata));
      em.assign(row, { ...rowOf(definition), uses, updatedAt: new Date() });
      await em.flush();
      return toMetricResponse(row);
    });
  }

  async delete(name: string): Promise<void> {
    await this.write(async (em) => {
      const row = await find(em, name);
      const ratios = await dividingRatios(em, row.name);
      if (ratios.length) throw inUse(row.name, ratios, 'exist');
      em.remove(row);
      await em.flush();
    });
  }

  /**
   * The metrics the caller may see and query, by name: those whose every object (its own, a lookup
   * dimension's target) it may read (and `mayUseObject` allows: an agent's allowedObjects) and whose
   * every field (measure, filter, time field, dimensions; a ratio's numerator's and denominator's too)
   * it sees. The one rule for the metrics API and the metric tools: a definition tells nothing the data
   * would not, so any other metric is absent, like an unknown one.
   */
  async visibleTo(caller: Caller, mayUseObject?: (name: string) => boolean): Promise<MetricDefinitionRow[]> {
    const rows = await this.em.fork().find(MetricDefinitionEntity, {}, { orderBy: { name: 'asc' } });
    const byName = new Map(rows.map((row) => [row.name, row]));
    const sees = await this.access.definitionLens(caller, mayUseObject);
    const visible: MetricDefinitionRow[] = [];
    for (const row of rows) {
      const used = usedBy(row, byName);
      if (used && (await sees(used.objects, used.fields))) visible.push(row);
    }
    return visible;
  }

  /** The definitions of visibleTo, for the metric tools. */
  async listFor(caller: Caller, mayUseObject?: (name: string) => boolean): Promise<MetricDefinition[]> {
    return (await this.visibleTo(caller, mayUseObject)).map(toMetricDefinition);
  }

  /**
   * Runs a metric query as the caller, in `session` (a tool's READ ONLY transaction): one aggregate
   * statement of the data engine. A metric the caller may not use is `metric_not_found`.
   */
  async query(
    caller: Caller,
    query: MetricQuery,
    session: DataSession,
    mayUseObject: (name: string) => boolean = () => true,
  ): Promise<MetricQueryResult> {
    const usable = new Map((await this.listFor(caller, mayUseObject)).map((m) => [m.name, m]));
    const definitions = new Map<string, MetricDefinition>();
    for (const name of query.metrics) {
      const metric = usable.get(name);
      if (!metric) {
        throw new DomainError(
          'metric_not_found',
          `Unknown metric "${clip(String(name))}"; call list_metrics to see the metrics`,
          {
            metric: clip(String(name)),
            availableMetrics: [...usable.keys()],
          },
        );
      }
      definitions.set(name, metric);
    }
    // A ratio is visible only when the metrics it divides are, so they are among the usable ones.
    for (const metric of [...definitions.values()]) {
      for (const part of [metric.numerator, metric.denominator]) {
        if (part && !definitions.has(part)) definitions.set(part, usable.get(part)!);
      }
    }
    const compiled = compileMetricQuery(query, definitions);
    const rows = await this.data.aggregatePlan(caller, compiled.object, compiled.plan, { session });
    return compiled.finish(rows);
  }

  /** One transaction under the metadata lock: what a definition is checked against cannot change meanwhile. */
  private async write<T>(work: (em: EntityManager) => Promise<T>): Promise<T> {
    return this.em.fork().transactional(async (em) => {
      await lockForTransaction(em, ADVISORY_LOCK.metadata);
      return work(em);
    });
  }
}

function definitionOf(name: string, dto: ReplaceMetricDto): MetricDefinition {
  return {
    name,
    label: dto.label,
    description: dto.description,
    object: dto.object,
    type: dto.type,
    measure: dto.measure,
    filter: dto.filter,
    numerator: dto.numerator,
    denominator: dto.denominator,
    timeField: dto.timeField,
    dimensions: dto.dimensions ?? [],
    synonyms: dto.synonyms ?? [],
  };
}

function rowOf(definition: MetricDefinition) {
  return {
    name: definition.name,
    label: definition.label,
    description: definition.description ?? null,
    object: definition.object,
    type: definition.type,
    measure: definition.measure ?? null,
    filter: definition.filter ?? null,
    numerator: definition.numerator ?? null,
    denominator: definition.denominator ?? null,
    timeField: definition.timeField ?? null,
    dimensions: definition.dimensions,
    synonyms: definition.synonyms,
  };
}

function catalogOf(em: EntityManager, metadata: MetadataService): MetricCatalog {
  return {
    object: (name) =>
      IDENTIFIER_PATTERN.test(name)
        ? metadata.readObject(name, em).catch((error: unknown) => {
            if (error instanceof DomainError && error.code === 'object_not_found') return undefined;
            throw error;
          })
        : Promise.resolve(undefined),
    metric: async (name) => {
      const row = IDENTIFIER_PATTERN.test(name) ? await em.findOne(MetricDefinitionEntity, { name }) : null;
      return row ? toMetricDefinition(row) : undefined;
    },
  };
}

async function find(em: EntityManager, name: string): Promise<MetricDefinitionRow> {
  const row =
    typeof name === 'string' && IDENTIFIER_PATTERN.test(name) ? await em.findOne(MetricDefinitionEntity, { name }) : null;
  if (!row) throw notFound(name);
  return row;
}

function notFound(name: string): DomainError {
  return new DomainError('metric_not_found', `Metric "${clip(String(name))}" not found`);
}

/**
 * Every object and "object.field" a metric uses, a ratio's parts included (`uses` holds the metric's
 * own: measure, filter, time field, dimensions and their lookup targets). Undefined when a part is
 * missing: such a metric is not shown.
 */
function usedBy(
  row: MetricDefinitionRow,
  byName: Map<string, MetricDefinitionRow>,
  within: readonly string[] = [],
): { objects: string[]; fields: string[] } | undefined {
  if (within.includes(row.name)) return undefined; // a cycle, which checkMetric never lets in
  const objects = [row.object];
  const fields = [...row.uses];
  for (const part of [row.numerator, row.denominator]) {
    if (!part) continue;
    const partRow = byName.get(part);
    const used = partRow && usedBy(partRow, byName, [...within, row.name]);
    if (!used) return undefined;
    objects.push(...used.objects);
    fields.push(...used.fields);
  }
  return { objects, fields };
}

/** Ratio metrics that divide `name` (as numerator or denominator). */
async function dividingRatios(em: EntityManager, name: string): Promise<string[]> {
  const rows = await em.find(
    MetricDefinitionEntity,
    { $or: [{ numerator: name }, { denominator: name }] },
    { orderBy: { name: 'asc' }, fields: ['name'] },
  );
  return rows.map((r) => r.name);
}

function inUse(name: string, ratios: string[], must: string): DomainError {
  return new DomainError(
    'metric_in_use',
    `Metric "${name}" is divided by ratio metric${ratios.length > 1 ? 's' : ''} ${ratios.join(', ')}, so it must ${must}; change ${ratios.length > 1 ? 'them' : 'it'} first`,
    { metrics: ratios },
  );
}
