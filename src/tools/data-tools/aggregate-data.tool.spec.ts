import type { Caller } from '../../auth/caller';
import { DataService } from '../../data/data.service';
import type { DataPool, DataSession } from '../../database/data-pool';
import type { AccessService } from '../../governance/access.service';
import type { MetadataService } from '../../metadata/metadata.service';
import { SYSTEM_FIELDS, type ObjectMeta } from '../../metadata/object-metadata.types';
import { match } from '../../../test/support/matchers';
import { ToolRegistry } from '../tool.registry';
import { createAggregateDataTool } from './aggregate-data.tool';
import type { HistoryService } from '../../history/history.service';
import type { ViewService } from '../../views/view.service';

const DEAL: ObjectMeta = {
  name: 'deal',
  label: 'Deal',
  fields: [
    ...SYSTEM_FIELDS,
    { name: 'amount', label: 'Amount', type: 'currency', required: false, unique: false, indexed: false },
    { name: 'owner', label: 'Owner', type: 'text', required: false, unique: false, indexed: false },
  ],
};

const CALLER: Caller = { keyId: 'k', role: 'member', subject: 's', owner: 's' };

/** A data pool that records every SQL statement instead of running it (transactions and reader sessions included). */
function recordingPool(): { pool: DataPool; statements: string[] } {
  const statements: string[] = [];
  const session = (inTransaction: boolean): DataSession => ({
    inTransaction,
    query: <T>(query: { sql: string }) => {
      statements.push(query.sql);
      return Promise.resolve([] as T[]);
    },
  });
  const pool = {
    session: () => session(false),
    readSession: () => session(false),
    readerSession: () => session(false),
    transaction: <T>(work: (tx: DataSession) => Promise<T>) => {
      statements.push('begin');
      return work(session(true));
    },
  };
  return { pool: pool as unknown as DataPool, statements };
}

describe('aggregate_data with a forbidden function', () => {
  const metadata = { getObject: () => Promise.resolve(DEAL) } as unknown as MetadataService;
  const access = { view: () => Promise.resolve(DEAL) } as unknown as AccessService;

  it('is rejected by the schema, naming the function, before the tool (and any SQL) runs', async () => {
    const { pool, statements } = recordingPool();
    const data = new DataService(pool, metadata, access, { recordsCountCap: 10_000 });
    const spy = jest.spyOn(data, 'aggregate');
    const registry = new ToolRegistry();
    registry.register(
      createAggregateDataTool({ data, metadata, pool, access, views: {} as ViewService, history: {} as HistoryService }),
    );
    const result = await registry.execute(
      {
        id: 'c',
        name: 'aggregate_data',
        arguments: { objectName: 'deal', aggregations: [{ function: 'drop_table', field: 'amount', alias: 'x' }] },
      },
      { caller: CALLER, signal: new AbortController().signal },
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatchObject({
      error: { code: 'invalid_arguments', message: match.stringContaining('"drop_table" is not allowed') },
    });
    expect(spy).not.toHaveBeenCalled();
    expect(statements).toEqual([]);
  });

  it('is rejected by the data engine too, before any data SQL, when the schema is bypassed', async () => {
    const { pool, statements } = recordingPool();
    const data = new DataService(pool, metadata, access, { recordsCountCap: 10_000 });
    const tool = createAggregateDataTool({
      data,
      metadata,
      pool,
      access,
      views: {} as ViewService,
      history: {} as HistoryService,
    });
    await expect(
      tool.execute(
        { objectName: 'deal', aggregations: [{ function: 'drop_table', field: 'amount', alias: 'x' }] },
        { caller: CALLER, signal: new AbortController().signal },
      ),
    ).rejects.toMatchObject({ code: 'invalid_aggregate_function', details: { function: 'drop_table' } });
    // Nothing reached the database.
    expect(statements).toEqual([]);
  });

  it('sum on a text field is refused before SQL', async () => {
    const { pool, statements } = recordingPool();
    const data = new DataService(pool, metadata, access, { recordsCountCap: 10_000 });
    await expect(
      data.aggregate(CALLER, 'deal', { aggregations: [{ function: 'sum', field: 'owner', alias: 's' }], limit: 10 }),
    ).rejects.toMatchObject({
      code: 'invalid_aggregation',
    });
    expect(statements).toEqual([]);
  });
});
