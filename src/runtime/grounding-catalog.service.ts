import { Injectable } from '@nestjs/common';
import type { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import type { Caller } from '../auth/caller';
import { AccessService, SYSTEM_CALLER } from '../governance/access.service';
import { MetadataService } from '../metadata/metadata.service';
import { MetricService } from '../metrics/metric.service';
import type { MetricDefinition } from '../metrics/metric.types';
import { describeColumns, isDataSource, describeLabels, type ColumnCatalog, type GroundingSource } from './grounding-evidence';
import type { GroundingCaveat } from './grounding';

/**
 * Reads what the columns of a turn's data results mean from the object and metric definitions
 * (money in which currency, a percentage, a ratio, a count), so grounding can tell "$451" from 451
 * deals, and what they are called, for a chart's axes. Definitions only inform the check and the
 * chart's titles: no value of them reaches the answer.
 */
@Injectable()
export class GroundingCatalog {
  constructor(
    private readonly metadata: MetadataService,
    private readonly metrics: MetricService,
    private readonly access: AccessService,
  ) {}

  /**
   * What access shaped the results an answer used: a row filter of the caller's on their object, or fields hidden
   * from it. Hidden fields are named only where the caller named them itself (its question or its calls' arguments);
   * never how many rows or fields were left out.
   */
  async caveats(caller: Caller | undefined, used: readonly GroundingSource[], question: unknown): Promise<GroundingCaveat[]> {
    if (!caller || !used.length) return [];
    const access = await this.access.forCaller(caller);
    if (!access.restricted) return [];
    const objects = new Map<string, string[]>();
    for (const source of used) {
      const args = (source.arguments ?? {}) as { objectName?: unknown; metrics?: unknown };
      const named = JSON.stringify(source.arguments ?? null);
      const add = (object: string) => objects.set(object, [...(objects.get(object) ?? []), named]);
      if (typeof args.objectName === 'string') add(args.objectName);
      if (Array.isArray(args.metrics))
        for (const name of args.metrics) {
          const metric =
            typeof name === 'string' ? await this.metrics.get(SYSTEM_CALLER, name).catch(() => undefined) : undefined;
          if (metric) add(metric.object);
        }
    }
    const asked = typeof question === 'string' ? question.toLowerCase() : '';
    const caveats: GroundingCaveat[] = [];
    for (const [objectName, argumentTexts] of [...objects].sort(([a], [b]) => a.localeCompare(b))) {
      const view = await this.access.view(caller, objectName, 'read').catch(() => undefined);
      if (!view) continue;
      if (view.rowFilter) caveats.push({ object: objectName, kind: 'row_filter' });
      const hidden = await this.access.hiddenFields(caller, objectName);
      if (!hidden.length) continue;
      const mentioned = (field: string) =>
        new RegExp(`(^|[^a-z0-9_])${field}($|[^a-z0-9_])`).test(asked) ||
        argumentTexts.some((text) => text.includes(`"${field}"`));
      const fields = hidden.filter(mentioned);
      caveats.push({ object: objectName, kind: 'hidden_fields', ...(fields.length ? { fields } : {}) });
    }
    return caveats;
  }

  /** `sources` with the meaning of their columns. */
  async describe(sources: readonly GroundingSource[]): Promise<GroundingSource[]> {
    const objects = new Map<string, ObjectMeta | undefined>();
    const metrics = new Map<string, MetricDefinition | undefined>();
    const loadObject = async (name: string) => {
      if (objects.has(name)) return;
      objects.set(name, await this.metadata.getObject(name).catch(() => undefined));
    };
    for (const source of sources) {
      if (!source.name || !isDataSource(source)) continue;
      const args = (source.arguments ?? {}) as { objectName?: unknown; metrics?: unknown };
      if (typeof args.objectName === 'string') await loadObject(args.objectName);
      if (!Array.isArray(args.metrics)) continue;
      for (const name of args.metrics) {
        if (typeof name !== 'string' || metrics.has(name)) continue;
        // Only the units of a result the caller already received: read as the server.
        const metric = await this.metrics.get(SYSTEM_CALLER, name).catch(() => undefined);
        metrics.set(name, metric);
        if (metric) await loadObject(metric.object);
      }
    }
    const catalog: ColumnCatalog = {
      field: (objectName, fieldName): FieldMeta | undefined => objects.get(objectName)?.fields.find((f) => f.name === fieldName),
      metric: (name) => metrics.get(name),
    };
    return sources.map((source) =>
      source.name && isDataSource(source)
        ? { ...source, columns: describeColumns(source, catalog), labels: describeLabels(source, catalog) }
        : source,
    );
  }
}
