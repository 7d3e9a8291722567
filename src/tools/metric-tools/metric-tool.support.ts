import type { MetricService } from '../../metrics/metric.service';
import type { DataToolDeps } from '../data-tools/data-tool.support';
import { mayUseObject } from '../tool.middlewares';
import type { ToolContext } from '../tool.types';

/** What the metric tools need: the data tools' dependencies and the semantic layer. */
export interface MetricToolDeps extends DataToolDeps {
  metrics: MetricService;
}

/** The objects the call may touch: an agent's allowedObjects, or every one for a direct call. */
export function objectFilterOf(ctx: ToolContext): (name: string) => boolean {
  const agent = ctx.agent;
  return agent ? (name) => mayUseObject(agent.allowedObjects, name) : () => true;
}
