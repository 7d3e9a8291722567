import { Injectable } from '@nestjs/common';
import type { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import { SYSTEM_CALLER } from '../governance/access.service';
import { MetadataService } from '../metadata/metadata.service';
import { MetricService } from '../metrics/metric.service';
import type { MetricDefinition } from '../metrics/metric.types';
import { DATA_TOOLS, describeColumns, describeLabels, type ColumnCatalog, type GroundingSource } from './grounding-evidence';

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
  ) {}

  /** `sources` with the meaning of their columns. */
  async describe(sources: readonly GroundingSource[]): Promise<GroundingSource[]> {
    const objects = new Map<string, ObjectMeta | undefined>();
    const metrics = new Map<string, MetricDefinition | undefined>();
    const loadObject = async (name: string) => {
      if (objects.has(name)) return;
      objects.set(name, await this.metadata.getObject(name).catch(() => undefined));
    };
    for (const source of sources) {
      if (!source.name || !DATA_TOOLS.has(source.name)) continue;
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
      source.name && DATA_TOOLS.has(source.name)
        ? { ...source, columns: describeColumns(source, catalog), labels: describeLabels(source, catalog) }
        : source,
    );
  }
}
