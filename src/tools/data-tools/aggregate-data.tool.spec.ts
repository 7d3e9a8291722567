import type { EntityManager } from '@mikro-orm/postgresql';
import { DataService } from '../../data/data.service';
import type { MetadataService } from '../../metadata/metadata.service';
import { SYSTEM_FIELDS, type ObjectMeta } from '../../metadata/object-metadata.types';
import { match } from '../../../test/support/matchers';
import { ToolRegistry } from '../tool.registry';
import { createAggregateDataTool } from './aggregate-data.tool';

const DEAL: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    ...SYSTEM_FIELDS,
    { name: 'amount', label: 'Amount', type: 'currency', required: false, unique: false, indexed: false },
    { name: 'owner', label: 'Owner', type: 'text', required: false, unique: false, indexed: false },
  ],
};

/** An EntityManager that records every SQL statement instead of running it. */
function recordingEm(): { em: EntityManager; statements: string[] } {
  const statements: string[] = [];
  const em: Record<string, unknown> = {};
  em.fork = () => em;
  em.transactional = (fn: (tx: unknown) => unknown) => fn(em);
  em.getKysely = () => ({
    executeQuery: (query: { sql: string }) => {
      statements.push(query.sql);
      return Promise.resolve({ rows: [] });
    },
  });
  return { em: em as unknown as EntityManager, statements };
}

describe('aggregate_data with a forbidden function', () => {
  const metadata = { getObject: () => Promise.resolve(DEAL) } as unknown as MetadataService;

  it('is rejected by the schema, naming the function, before the tool (and any SQL) runs', async () => {
    const { em, statements } = recordingEm();
    const data = new DataService(em, metadata);
    const spy = jest.spyOn(data, 'aggregate');
    const registry = new ToolRegistry();
    registry.register(createAggregateDataTool({ data, metadata, em, statementTimeoutMs: 1000 }));
    const result = await registry.execute(
      {
        id: 'c',
        name: 'aggregate_data',
        arguments: { objectName: 'deal', aggregations: [{ function: 'drop_table', field: 'amount', alias: 'x' }] },
      },
      { signal: new AbortController().signal },
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatchObject({
      error: { code: 'invalid_arguments', message: match.stringContaining('"drop_table" is not allowed') },
    });
    expect(spy).not.toHaveBeenCalled();
    expect(statements).toEqual([]);
  });

  it('is rejected by the data engine too, before any data SQL, when the schema is bypassed', async () => {
    const { em, statements } = recordingEm();
    const data = new DataService(em, metadata);
    const tool = createAggregateDataTool({ data, metadata, em, statementTimeoutMs: 1000 });
    await expect(
      tool.execute(
        { objectName: 'deal', aggregations: [{ function: 'drop_table', field: 'amount', alias: 'x' }] },
        { signal: new AbortController().signal },
      ),
    ).rejects.toMatchObject({ code: 'invalid_aggregate_function', details: { function: 'drop_table' } });
    // Only the transaction set-up ran; nothing touched a table.
    expect(statements).toEqual(['SET TRANSACTION READ ONLY', `select set_config('statement_timeout', $1, true)`]);
  });

  it('sum on a text field is refused before SQL', async () => {
    const { em, statements } = recordingEm();
    const data = new DataService(em, metadata);
    await expect(
      data.aggregate('deal', { aggregations: [{ function: 'sum', field: 'owner', alias: 's' }], limit: 10 }, em),
    ).rejects.toMatchObject({
      code: 'invalid_aggregation',
    });
    expect(statements).toEqual([]);
  });
});
