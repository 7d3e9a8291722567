/**
 * The plan PostgreSQL runs for a statement the app compiles: EXPLAIN (ANALYZE, BUFFERS) in the app's
 * database, summed up as the benchmark sections show it.
 */
import { FieldMeta, ObjectMeta, SYSTEM_FIELDS } from '../src/metadata/object-metadata.types';
import { sql } from './harness';
import type { HttpClient } from './load';

export interface PlanSummary {
  executionMs: number;
  /** Shared buffers hit and read. */
  buffers: number;
  /** Scans and other notable nodes, e.g. "Index Scan using grid_rows_score_idx". */
  nodes: string[];
  rowsRemovedByFilter: number;
}

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Rows Removed by Filter'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

export async function explain(
  databaseUrl: string,
  compiled: { sql: string; parameters: readonly unknown[] },
): Promise<PlanSummary> {
  const [row] = await sql<{ 'QUERY PLAN': Array<{ Plan: PlanNode; 'Execution Time': number }> }>(
    databaseUrl,
    `explain (analyze, buffers, format json) ${compiled.sql}`,
    [...compiled.parameters],
  );
  const [{ Plan: plan, 'Execution Time': executionMs }] = row['QUERY PLAN'];
  const nodes: string[] = [];
  let rowsRemovedByFilter = 0;
  const visit = (node: PlanNode) => {
    rowsRemovedByFilter += node['Rows Removed by Filter'] ?? 0;
    const scan = node['Index Name'] ? `${node['Node Type']} using ${node['Index Name']}` : node['Node Type'];
    // A part's Subquery Scan only passes its rows on.
    if (/Scan|Sort|Append|Gather|WindowAgg/.test(node['Node Type']) && node['Node Type'] !== 'Subquery Scan') nodes.push(scan);
    for (const child of node.Plans ?? []) visit(child);
  };
  visit(plan);
  return {
    executionMs,
    buffers: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0),
    nodes,
    rowsRemovedByFilter,
  };
}

/** The object as the data engine sees it: its fields from the metadata API, after the system ones. */
export async function objectMeta(admin: HttpClient, name: string): Promise<ObjectMeta> {
  const object = await admin.json<{ name: string; label: string; fields: FieldMeta[] }>({
    method: 'GET',
    path: `/api/v1/objects/${name}`,
  });
  return { name: object.name, label: object.label, fields: [...SYSTEM_FIELDS, ...object.fields] };
}
