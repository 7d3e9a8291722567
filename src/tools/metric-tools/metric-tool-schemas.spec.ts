import type { DataService } from '../../data/data.service';
import type { DataPool } from '../../database/data-pool';
import type { AccessService } from '../../governance/access.service';
import type { MetadataService } from '../../metadata/metadata.service';
import type { MetricService } from '../../metrics/metric.service';
import { offeredDescription } from '../tool.define';
import { ToolRegistry } from '../tool.registry';
import { createMetricTools, METRIC_TOOL_NAMES } from './index';
import type { HistoryService } from '../../history/history.service';
import type { ViewService } from '../../views/view.service';

/** What the model sees of the metric tools: a change here changes its behaviour, so it shows up in review. */
describe('metric tool schemas', () => {
  const tools = createMetricTools({
    data: {} as DataService,
    metadata: {} as MetadataService,
    pool: {} as DataPool,
    access: {} as AccessService,
    views: {} as ViewService,
    history: {} as HistoryService,
    metrics: {} as MetricService,
  });

  it('offers list_metrics and query_metric to agents', () => {
    expect(tools.map((t) => ({ name: t.name, scope: t.scope }))).toEqual(
      METRIC_TOOL_NAMES.map((name) => ({ name, scope: 'agent' })),
    );
  });

  it.each(METRIC_TOOL_NAMES.map((name) => [name]))('%s: name, description and parameters', (name) => {
    const tool = tools.find((t) => t.name === name)!;
    // As an agent's model reads it: the description, then how to cite the tool's results.
    expect({ name: tool.name, description: offeredDescription(tool), parameters: tool.parameters }).toMatchSnapshot();
  });

  it('refuses query_metric arguments outside its schema before running anything', async () => {
    const registry = new ToolRegistry();
    for (const tool of tools) registry.register(tool);
    const signal = new AbortController().signal;
    for (const args of [{}, { metrics: [] }, { metrics: ['x'], timeGrain: 'hour' }, { metrics: ['x'], extra: 1 }]) {
      const outcome = await registry.execute({ id: 'c', name: 'query_metric', arguments: args }, { signal });
      expect(outcome).toMatchObject({ isError: true, content: { error: { code: 'invalid_arguments' } } });
    }
  });
});
