import { Inject, Injectable } from '@nestjs/common';
import type { CompiledQuery } from 'kysely';
import type { Caller } from '../auth/caller';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { DomainError } from '../common/domain-error';
import { isUuid } from '../common/uuid';
import { DataCallOptions, DataCursorOptions, DataPool, DataSession } from '../database/data-pool';
import { inSavepoint } from '../database/savepoint';
import { UNDEFINED_COLUMN, UNDEFINED_TABLE, sqlState } from '../common/pg-errors';
import { AccessService, SYSTEM_CALLER } from '../governance/access.service';
import type { AccessAction } from '../governance/access-policy.types';
import { MetadataService } from '../metadata/metadata.service';
import { fieldTypeOf } from '../metadata/field-types';
import { FieldMeta, ObjectMeta } from '../metadata/object-metadata.types';
import { compileAggregate, compileAggregatePlan, decodeAggregateRows } from './aggregate.compiler';
import { AggregatePlan, AggregateQuery, FindQuery, FindResult, VersionedRecord } from './data.types';
import { decodeRow, decodeRowsInPlace, fieldDecoder } from './field-value.codec';
import { actionOf, BatchOperation, BatchOperationResult, operationError, parseOperations } from './record-batch';
import { type BatchTransaction, planOperation, type PlannedOperation, runBatch } from './record-batch.runner';
import {
  decodeVersioned,
  deleteRecord,
  encodeWrite,
  invalidReference,
  missedWrite,
  notFound,
  readWritten,
  scopedRows,
  write,
} from './record-write';
import { decodeCursor, dropKeyColumns, encodeCursor, querySignature, rowKeys } from './keyset';
import { orderTerms } from './order-by.compiler';
import {
  compileBoundedCount,
  compileCount,
  compileCountEstimate,
  compileFind,
  compileFieldValues,
  compileFindOne,
  compileInsert,
  compileStream,
  type FieldValuesQuery,
  type StreamQuery,
  compileUpdate,
  compileReadableReferences,
  engineLimit,
  PAGE_COUNT,
  type ReferenceCheck,
} from './records.compiler';
import { clip, requireField } from './where.compiler';
import { applyLinkWrites, checkLinkTargets, type LinkWrite, lockedLinks, lockLinkedRecords, takeLinkWrites } from './links.write';
import { type ChangeCapture, type ChangeSetStamp, newChangeSet } from './change-outbox';

/** Where a data engine call runs. */
export interface DataScope {
  /** Aborts the call and cancels its running statement (the HTTP client left, a tool call was stopped). */
  signal?: AbortSignal;
  /** A transaction of DataPool (e.g. a tool's READ ONLY one) to run in; it carries its own signal. */
  session?: DataSession;
  /**
   * A read that must see the latest committed state (a client revalidating a version it holds, as
   * with If-None-Match): it runs on the primary, never on the read replica.
   */
  fresh?: boolean;
  /** The change set a write belongs to (an import's, an approval's, a revert's); absent: a new one of its own. */
  changeSet?: ChangeSetStamp;
}

/** How DataService.stream reads: see DataCursorOptions (its key is the caller's). */
export type StreamScope = Omit<DataCursorOptions, 'key'>;

/** The pool options of a call: its signal, and the caller's key, whose share of the pool it takes. */
function poolOptions(caller: Caller, scope: DataScope): DataCallOptions {
  return { signal: scope.signal, key: caller.keyId };
}

/**
 * Records read in batches through a server-side cursor (DataService.stream). Each row is an array of
 * decoded values (as find returns them) in the order of `fields`. A batch is the reader's once
 * yielded: the stream never looks at it again, so the reader may empty it when done with it.
 */
export interface RecordStream extends AsyncIterable<unknown[][]> {
  /** The selected fields of the caller's view of the object, id first: the columns of every row. */
  readonly fields: readonly FieldMeta[];
  /** Stops reading: ends the transaction and frees the connection (nothing to do once the rows ran out). Always call it. */
  close(): Promise<void>;
}

/**
 * The data engine: find / count / findOne / aggregate / insert / update / delete over object
 * tables. Identifiers come from metadata only; every value is a bind parameter. Statements run on
 * the DataPool (statement timeout, cancellation, bounded wait for a connection); each method takes
 * a scope with the caller's AbortSignal, or a DataPool transaction to run inside.
 */
@Injectable()
export class DataService {
  constructor(
    private readonly pool: DataPool,
    private readonly metadata: MetadataService,
    private readonly access: AccessService,
    @Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'recordsCountCap'>,
  ) {}

  async find(caller: Caller, objectName: string, query: FindQuery, scope: DataScope = {}): Promise<FindResult> {
    return this.withObject(caller, objectName, 'read', scope, async (object, session) => {
      const terms = orderTerms(object, query.orderBy);
      const signature = querySignature(object.name, query.where, terms, query.search);
      let after: (string | null)[] | undefined;
      if (query.cursor !== undefined) {
        if (query.offset > 0) throw new DomainError('invalid_cursor', 'Send either cursor or offset, not both');
        after = decodeCursor(query.cursor, signature, terms.length);
      }
      const keys = query.withCursor === true;
      const countUpTo = after ? undefined : this.countedWithPage(query);
      const rows = await session.query(compileFind(object, query, { terms, after, keys, countUpTo }));
      const counted = countUpTo === undefined ? undefined : takePageCount(rows);
      const limit = engineLimit(query.limit);
      const more = keys && rows.length > limit;
      if (more) rows.pop();
      const last = more ? rowKeys(rows[rows.length - 1], terms) : undefined;
      dropKeyColumns(rows, terms);
      const result: FindResult = { records: decodeRowsInPlace(object, rows) };
      if (!after) {
        // Without the extra row, a full page may be the last one.
        const mayHaveMore = keys ? more : rows.length === limit;
        Object.assign(result, await this.total(object, query, rows.length, mayHaveMore, session, counted));
      }
      if (keys) result.nextCursor = last ? encodeCursor(signature, last) : null;
      return result;
    });
  }

  /**
   * The cap to count an offset page's matches up to in the page's own statement (compileFind's
   * countUpTo), when total() would count them with compileBoundedCount; undefined otherwise.
   */
  private countedWithPage(query: FindQuery): number | undefined {
    if ((query.total ?? 'estimate') !== 'estimate') return undefined;
    const cap = this.config.recordsCountCap;
    // total() counts only when a full page leaves at most `cap` rows known to match.
    return Math.max(0, Math.floor(query.offset)) + engineLimit(query.limit) + 1 <= cap ? cap : undefined;
  }

  /**
   * The total of an offset page (see TotalMode): counted in the page's statement when it was asked
   * (`counted`, see countedWithPage), else in statements of its own; never by a window count, which
   * would read every match before the first row. A page that ends the matches tells it
   * without counting; a count stops at RECORDS_COUNT_CAP + 1 rows, beyond which the planner's estimate
   * (at least what the page already showed) stands for it: the table's own without any condition,
   * else the rows of the plan of the filter.
   */
  private async total(
    object: ObjectMeta,
    query: FindQuery,
    pageRows: number,
    mayHaveMore: boolean,
    session: DataSession,
    counted?: PageCount,
  ): Promise<Pick<FindResult, 'total' | 'totalExact'>> {
    const mode = query.total ?? 'estimate';
    const offset = Math.max(0, Math.floor(query.offset));
    if (mode === 'none') return {};
    if (!mayHaveMore && (pageRows > 0 || offset === 0)) return { total: offset + pageRows, totalExact: true };
    if (mode === 'exact') {
      const [{ count }] = await session.query(compileCount(object, query.where, query.search));
      return { total: Number(count), totalExact: true };
    }
    const cap = this.config.recordsCountCap;
    // What the page showed: at least this many match (and, past the end, at most `offset`).
    const least = pageRows > 0 ? offset + pageRows + 1 : 0;
    const most = pageRows > 0 ? Infinity : offset;
    let estimate: number | null | undefined;
    if (least <= cap) {
      const [row] = counted ? [counted] : await session.query(compileBoundedCount(object, query.where, query.search, cap));
      if (Number(row.count) <= cap) return { total: Number(row.count), totalExact: true };
      estimate = row.estimate;
    }
    if (estimate === null || estimate === undefined) {
      const [{ 'QUERY PLAN': plan }] = await session.query(compileCountEstimate(object, query.where, query.search));
      estimate = plan[0].Plan['Plan Rows'];
    }
    estimate = Math.round(estimate);
    return { total: Math.min(Math.max(estimate, cap + 1, least), Math.max(most, cap + 1)), totalExact: false };
  }

  /**
   * Every record the caller may read that matches the query, in its order, in batches: the same
   * compiler as find (the caller's row filter, hidden fields and grants apply alike), read through a
   * server-side cursor (DataPool.cursor) instead of pages. The first batch is read before this
   * returns, so a query that fails does so here, before the caller has committed to a response.
   */
  async stream(caller: Caller, objectName: string, query: StreamQuery, scope: StreamScope): Promise<RecordStream> {
    return this.withObject(caller, objectName, 'read', { signal: scope.signal }, async (object) => {
      const { query: statement, fields } = compileStream(object, query);
      const decoders = fields.map(fieldDecoder);
      const batches = decodeBatches(this.pool.cursor(statement, { ...scope, key: caller.keyId }), decoders);
      // Fails (with the connection already released) when the statement does.
      const first = await batches.next();
      return {
        fields,
        async *[Symbol.asyncIterator]() {
          if (first.done) return;
          yield first.value;
          yield* batches;
        },
        close: async () => {
          await batches.return(undefined);
        },
      };
    });
  }

  /** Distinct values of a field the caller sees, with their counts (compileFieldValues); a hidden field is unknown. */
  async fieldValues(
    caller: Caller,
    objectName: string,
    fieldName: string,
    query: FieldValuesQuery,
    scope: DataScope = {},
  ): Promise<Array<{ value: unknown; count: number }>> {
    return this.withObject(caller, objectName, 'read', scope, async (object, session) => {
      const field = requireField(object, fieldName);
      const rows = await session.query(compileFieldValues(object, field, query));
      // A set's values are its options (text); other values decode as the field's.
      const decoded = fieldTypeOf(field.type).shape === 'set' ? undefined : { ...object, fields: [field] };
      return rows.map((row) => ({
        value: decoded ? decodeRow(decoded, { [field.name]: row.value })[field.name] : row.value,
        count: Number(row.count),
      }));
    });
  }

  /** The exact number of records matching `where` the caller may read. */
  async count(caller: Caller, objectName: string, where: unknown, scope: DataScope = {}): Promise<number> {
    return this.withObject(caller, objectName, 'read', scope, async (object, session) => {
      const [row] = await session.query(compileCount(object, where));
      return Number(row.count);
    });
  }

  /** One record by id, or `record_not_found` (a malformed id is not found too). */
  async findOne(
    caller: Caller,
    objectName: string,
    id: unknown,
    fields?: unknown,
    scope: DataScope = {},
  ): Promise<Record<string, unknown>> {
    return (await this.findOneVersioned(caller, objectName, id, fields, scope)).record;
  }

  /** Like findOne, with the record's version (for its ETag). */
  async findOneVersioned(
    caller: Caller,
    objectName: string,
    id: unknown,
    fields?: unknown,
    scope: DataScope = {},
  ): Promise<VersionedRecord> {
    return this.withObject(caller, objectName, 'read', scope, async (object, session) => {
      const query = compileFindOne(object, id, fields);
      if (!isUuid(id)) throw notFound(object.name, id);
      const rows = await session.query(query);
      if (!rows.length) throw notFound(object.name, id);
      return decodeVersioned(object, rows[0]);
    });
  }

  /** Grouped aggregates. Functions, fields and aliases are checked before any SQL is built. */
  async aggregate(
    caller: Caller,
    objectName: string,
    query: AggregateQuery,
    scope: DataScope = {},
  ): Promise<Record<string, unknown>[]> {
    return this.withObject(caller, objectName, 'read', scope, async (object, session) => {
      const compiled = compileAggregate(object, query);
      return decodeAggregateRows(object, compiled, await session.query(compiled.query));
    });
  }

  /**
   * A typed aggregate (the semantic layer's metric queries), through the same compiler, clamps and
   * statement timeout as `aggregate`. A lookup column reads the target object as the caller sees it:
   * one it may not read, or a field hidden from it, is `unknown_field`.
   */
  async aggregatePlan(
    caller: Caller,
    objectName: string,
    plan: AggregatePlan,
    scope: DataScope = {},
  ): Promise<Record<string, unknown>[]> {
    return this.withObject(caller, objectName, 'read', scope, async (object, session) => {
      const targets: Record<string, ObjectMeta> = {};
      for (const lookup of plan.lookups ?? []) {
        const field = requireField(object, lookup.lookup);
        if (field.type !== 'lookup' || !field.reference || targets[field.name]) continue;
        targets[field.name] = await this.access.view(caller, field.reference, 'read').catch((error: unknown) => {
          if (!(error instanceof DomainError) || error.code !== 'object_not_found') throw error;
          throw new DomainError('unknown_field', `Unknown field "${clip(`${lookup.lookup}.${lookup.field}`)}"`, {
            field: clip(`${lookup.lookup}.${lookup.field}`),
          });
        });
      }
      const compiled = compileAggregatePlan(object, plan, targets);
      return decodeAggregateRows(object, compiled, await session.query(compiled.query));
    });
  }

  /** One record, returned with its version (for its ETag). */
  async insert(caller: Caller, objectName: string, input: unknown, scope: DataScope = {}): Promise<VersionedRecord> {
    const [inserted] = await this.insertVersioned(caller, objectName, [input], scope);
    return inserted;
  }

  /** Inserts records in one statement (all or nothing); each is validated like a single insert. */
  async insertMany(
    caller: Caller,
    objectName: string,
    inputs: unknown[],
    scope: DataScope = {},
  ): Promise<Record<string, unknown>[]> {
    return (await this.insertVersioned(caller, objectName, inputs, scope)).map(({ record }) => record);
  }

  /**
   * Partial update: only the given fields change; `updated_at` moves forward. With `versions`
   * (If-Match), only a record still at one of them changes, else `precondition_failed`.
   */
  async update(
    caller: Caller,
    objectName: string,
    id: unknown,
    input: unknown,
    versions?: readonly string[],
    scope: DataScope = {},
  ): Promise<VersionedRecord> {
    return this.withObject(caller, objectName, 'update', scope, async (object, session) => {
      const { rest, links } = takeLinkWrites(object, input, 'update');
      // Links alone are something to update (the record's version and change event move with them).
      const values =
        links.length && !Object.keys(rest as object).length ? new Map<string, unknown>() : encodeWrite(object, rest, 'update');
      if (!isUuid(id)) throw notFound(object.name, id);
      throwFirst(await this.referenceErrors(caller, object, [{ values, id }], session));
      const changeSet = scope.changeSet ?? newChangeSet('api');
      const changedFields = [...values.keys(), ...links.map((l) => l.field.name)];
      const capture: ChangeCapture = { op: 'update', keyId: caller.keyId, changedFields, changeSet };
      const locked = await this.lockedLinks(object.name, { links, changed: [...values.keys()] });
      const run = async (tx: DataSession) => {
        await checkLinkTargets(tx, links);
        await lockLinkedRecords(tx, object, id, locked, links);
        const rows = await this.scopedWrite(caller, object, tx, scope, compileUpdate(object, id, values, versions, capture));
        if (!rows.length) throw await missedWrite(object, id, versions, tx);
        return this.withLinksWritten(tx, object, id, rows[0], links, capture);
      };
      const written = await this.inTransactionFor(links.length > 0 || locked.length > 0, caller, session, scope, run);
      return { ...written, changeSetId: changeSet.id };
    });
  }

  /**
   * Moves one record to the trash; with `versions` (If-Match), only if it is still at one of them.
   * Returns the id of its change set.
   */
  async delete(
    caller: Caller,
    objectName: string,
    id: unknown,
    versions?: readonly string[],
    scope: DataScope = {},
  ): Promise<string> {
    return this.withObject(caller, objectName, 'delete', scope, async (object, session) => {
      if (!isUuid(id)) throw notFound(object.name, id);
      const changeSet = scope.changeSet ?? newChangeSet('api');
      const referrers = await this.metadata.referrers(object.name);
      const locked = await this.lockedLinks(object.name, { links: [] });
      const run = async (tx: DataSession) => {
        await lockLinkedRecords(tx, object, id, locked, []);
        const rows = await deleteRecord(tx, object, id, versions, { op: 'delete', keyId: caller.keyId, changeSet }, referrers);
        if (!rows.length) throw await missedWrite(object, id, versions, tx);
      };
      // Lookups cleared and the record deleted commit together, or neither (a miss rolls the clearing back).
      if ((!referrers.lookups.length && !locked.length) || session.inTransaction) await run(session);
      else await this.pool.transaction(run, poolOptions(caller, scope));
      return changeSet.id;
    });
  }

  /**
   * Creates, updates and deletes of one object in one transaction, each checked exactly like its
   * single-record write (field codec, the caller's access and row filter, If-Match), then run by
   * runBatch (all or nothing when `atomic`, the default).
   */
  async batch(
    caller: Caller,
    objectName: string,
    raw: readonly unknown[],
    atomic: boolean,
    scope: DataScope = {},
  ): Promise<BatchOperationResult[]> {
    const parsed = parseOperations(raw);
    const views = await this.batchViews(caller, objectName, parsed.operations);
    let planned: PlannedOperation[] = [];
    const errors = [...parsed.errors];
    for (const operation of parsed.operations) {
      try {
        planned.push(planOperation(views.get(actionOf(operation))!, operation));
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        errors.push(operationError(operation.index, error));
      }
    }
    const refused = await this.batchReferenceErrors(
      caller,
      planned,
      scope.session ?? this.pool.session(poolOptions(caller, scope)),
    );
    if (refused.size) {
      for (const [index, error] of refused) errors.push(operationError(index, error));
      planned = planned.filter((operation) => !refused.has(operation.index));
    }
    // Inside the caller's transaction (an import's chunks), each attempt is a savepoint of it instead of a transaction.
    const transaction: BatchTransaction = (work) =>
      scope.session?.inTransaction
        ? inSavepoint(scope.session, 'batch_attempt', work)
        : this.pool.transaction(work, { ...poolOptions(caller, scope), changes: clearsElsewhere ? undefined : [objectName] });
    const changeSet = scope.changeSet ?? newChangeSet('batch');
    const referrers = planned.some((o) => o.op === 'delete') ? await this.metadata.referrers(objectName) : undefined;
    // A delete's cleared lookups and removed links are changes of other objects' records too.
    const clearsElsewhere = referrers !== undefined && (referrers.lookups.length > 0 || referrers.links.length > 0);
    return runBatch(
      { operations: parsed.operations, planned, errors },
      atomic,
      { keyId: caller.keyId, changeSet, referrers },
      transaction,
    );
  }

  /**
   * The caller's view of the object for each action the batch needs. An object it may not read is
   * the request's 404; an action it may not take is the error of each operation that needs it.
   */
  private async batchViews(
    caller: Caller,
    objectName: string,
    operations: readonly BatchOperation[],
  ): Promise<Map<AccessAction, ObjectMeta | DomainError>> {
    const views = new Map<AccessAction, ObjectMeta | DomainError>();
    await this.access.view(caller, objectName, 'read');
    for (const action of new Set(operations.map(actionOf))) {
      try {
        views.set(action, await this.access.view(caller, objectName, action));
      } catch (error) {
        if (!(error instanceof DomainError) || error.code === 'object_not_found') throw error;
        views.set(action, error);
      }
    }
    return views;
  }

  /** referenceErrors of a batch's creates and of its updates (each under the caller's view for its action), by index. */
  private async batchReferenceErrors(
    caller: Caller,
    planned: readonly PlannedOperation[],
    session: DataSession,
  ): Promise<Map<number, DomainError>> {
    const refused = new Map<number, DomainError>();
    for (const op of ['create', 'update'] as const) {
      const group = planned.filter((operation) => operation.op === op);
      if (!group.length) continue;
      const writes = group.map((operation) => ({
        values: operation.values!,
        id: operation.op === 'update' ? operation.id : undefined,
      }));
      const found = await this.referenceErrors(caller, group[0].object, writes, session);
      found.forEach((error, i) => error && refused.set(group[i].index, error));
    }
    return refused;
  }

  /**
   * Lookup values must point to records the caller may read: one outside its row filter on the
   * target object, or on an object it may not read, is refused exactly like a missing one
   * (`invalid_reference`), so a lookup reveals no more ids than the caller can read. A value that an
   * updated record already holds passes (the caller reads it there). The error of each write,
   * undefined when it is fine; a key without policies asks nothing (the foreign key decides).
   */
  private async referenceErrors(
    caller: Caller,
    object: ObjectMeta,
    writes: ReadonlyArray<{ values: Map<string, unknown>; id?: string }>,
    session: DataSession,
  ): Promise<Array<DomainError | undefined>> {
    const errors: Array<DomainError | undefined> = writes.map(() => undefined);
    const access = await this.access.forCaller(caller);
    if (!access.restricted) return errors;
    const checks: ReferenceCheck[] = [];
    for (const field of object.fields) {
      if (field.type !== 'lookup' || !field.reference) continue;
      const ids = new Set(writes.map(({ values }) => values.get(field.name)).filter((v): v is string => typeof v === 'string'));
      if (!ids.size) continue;
      const target = access.mayRead(field.reference) ? await this.access.view(access, field.reference, 'read') : undefined;
      if (target && !target.rowFilter) continue;
      checks.push({ field, target, ids: [...ids] });
    }
    if (!checks.length) return errors;
    const query = compileReadableReferences(
      object,
      checks,
      writes.flatMap(({ id }) => (id === undefined ? [] : [id])),
    );
    const readable = checks.map(() => new Set<string>());
    for (const row of query ? await session.query(query) : []) readable[row.k].add(row.id);
    writes.forEach(({ values }, i) => {
      const refused = checks.find(({ field }, k) => {
        const value = values.get(field.name);
        return typeof value === 'string' && !readable[k].has(value);
      });
      if (refused) errors[i] = invalidReference(refused.field);
    });
    return errors;
  }

  private async insertVersioned(
    caller: Caller,
    objectName: string,
    inputs: unknown[],
    scope: DataScope,
  ): Promise<VersionedRecord[]> {
    return this.withObject(caller, objectName, 'create', scope, async (object, session) => {
      if (!inputs.length) return [];
      // The server itself may date what it loads (the sample's history); nobody else sets created_at.
      // Links are written with a single record (REST, tools); many at once (imports) write none.
      const { rest, links } = inputs.length === 1 ? takeLinkWrites(object, inputs[0], 'insert') : { rest: undefined, links: [] };
      const encoded =
        inputs.length === 1
          ? [encodeWrite(object, rest, 'insert', caller === SYSTEM_CALLER)]
          : inputs.map((input) => encodeWrite(object, input, 'insert', caller === SYSTEM_CALLER));
      const writes = encoded.map((values) => ({ values }));
      throwFirst(await this.referenceErrors(caller, object, writes, session));
      const changeSet = scope.changeSet ?? newChangeSet('api');
      const capture: ChangeCapture = { op: 'create', keyId: caller.keyId, changeSet };
      const locked = links.length ? await this.lockedLinks(object.name, { links, changed: [] }) : [];
      const run = async (tx: DataSession): Promise<VersionedRecord[]> => {
        await checkLinkTargets(tx, links);
        const rows = await this.scopedWrite(caller, object, tx, scope, compileInsert(object, encoded, capture));
        if (!links.length) return rows.map((row) => decodeVersioned(object, row));
        // Before the join rows' foreign keys share the records it links (in the order given, not by id).
        await lockLinkedRecords(tx, object, String(rows[0].id), locked, links);
        return [await this.withLinksWritten(tx, object, String(rows[0].id), rows[0], links, capture)];
      };
      const written = await this.inTransactionFor(links.length > 0, caller, session, scope, run);
      return written.map((record) => ({ ...record, changeSetId: changeSet.id }));
    });
  }

  /** `work` in a transaction when it is `needed` (links to write, records to lock first): the session's own, if it is one. */
  private async inTransactionFor<T>(
    needed: boolean,
    caller: Caller,
    session: DataSession,
    scope: DataScope,
    work: (tx: DataSession) => Promise<T>,
  ): Promise<T> {
    if (!needed || session.inTransaction) return work(session);
    return this.pool.transaction(work, poolOptions(caller, scope));
  }

  /** The links fields whose linked records a write of one record of `objectName` locks first (lockLinkedRecords). */
  private async lockedLinks(
    objectName: string,
    write: { links: readonly LinkWrite[]; changed?: readonly string[] },
  ): Promise<FieldMeta[]> {
    const full = await this.metadata.getObject(objectName);
    const targets = new Map<string, ObjectMeta>();
    for (const field of full.fields) {
      const target = field.related?.link && field.related.inverse ? field.related.target : undefined;
      if (target && !targets.has(target)) targets.set(target, await this.metadata.getObject(target));
    }
    return lockedLinks(full, (field) => targets.get(field.related!.target)!, write);
  }

  /** Writes the links of the record just written (`row`) and answers the record with its links as they now are. */
  private async withLinksWritten(
    tx: DataSession,
    object: ObjectMeta,
    id: string,
    row: Record<string, unknown>,
    links: readonly LinkWrite[],
    capture: ChangeCapture,
  ): Promise<VersionedRecord> {
    if (!links.length) return decodeVersioned(object, row);
    await applyLinkWrites(tx, id, links, capture);
    // The links, and the stored values (and version) their triggers changed, as they now are.
    return readWritten(tx, object, id);
  }

  /**
   * Runs an insert or update. With a row filter, the new rows must be inside it too (a key cannot
   * create or move a record where it could not write it): the write and that check share one
   * transaction, rolled back with `forbidden` when a row falls outside.
   */
  private async scopedWrite(
    caller: Caller,
    object: ObjectMeta,
    session: DataSession,
    scope: DataScope,
    query: CompiledQuery<Record<string, unknown>>,
  ): Promise<Record<string, unknown>[]> {
    if (!object.rowFilter) return write(object, session, query);
    const checked = (tx: DataSession) => scopedRows(tx, object, query);
    return session.inTransaction
      ? checked(session)
      : this.pool.transaction(checked, { ...poolOptions(caller, scope), changes: [object.name] });
  }

  /**
   * Runs `work` with the caller's view of the object for `action` (its visible fields and row filter,
   * see CallerAccess) and the session its statements run on: the one place access is applied. If the
   * table no longer matches the definition (another replica changed the object a moment ago), the
   * cache is dropped and the call runs once more.
   */
  private async withObject<T>(
    caller: Caller,
    objectName: string,
    action: AccessAction,
    scope: DataScope,
    work: (object: ObjectMeta, session: DataSession) => Promise<T>,
  ): Promise<T> {
    const reads = action === 'read' && !scope.fresh;
    const session =
      scope.session ??
      (reads ? this.pool.readSession(poolOptions(caller, scope)) : this.pool.session(poolOptions(caller, scope)));
    const object = await this.access.view(caller, objectName, action);
    const result = await work(object, session).catch(async (error: unknown) => {
      const code = sqlState(error);
      if (code !== UNDEFINED_COLUMN && code !== UNDEFINED_TABLE) throw error;
      this.metadata.invalidate();
      if (session.inTransaction) {
        throw new DomainError('metadata_changed', `The definition of "${objectName}" changed while the query ran; try again`);
      }
      return work(await this.access.view(caller, objectName, action), session);
    });
    // Its reads stay on the primary until the read replica has this write (a transaction marks it on commit too).
    // A delete may clear lookups of other objects' records too: their feeds have changes as well.
    if (action !== 'read') await this.pool.wrote(caller.keyId, action === 'delete' ? undefined : [object.name]);
    return result;
  }
}

/** What a page counted with its rows (compileFind's countUpTo): as compileBoundedCount's row. */
interface PageCount {
  count: string;
  estimate?: number | null;
}

/**
 * Takes the count columns off a page's rows; undefined when the page came back empty or ended the
 * matches (then nothing was counted, and total() needs no count).
 */
function takePageCount(rows: Record<string, unknown>[]): PageCount | undefined {
  const first = rows[0];
  const counted =
    first && first[PAGE_COUNT.count] !== null
      ? { count: String(first[PAGE_COUNT.count]), estimate: first[PAGE_COUNT.estimate] as number | null | undefined }
      : undefined;
  for (const row of rows) {
    delete row[PAGE_COUNT.count];
    delete row[PAGE_COUNT.estimate];
  }
  return counted;
}

/** Decodes each batch's rows in place, column by column. */
async function* decodeBatches(
  batches: AsyncGenerator<unknown[][], void, undefined>,
  decoders: ReadonlyArray<(value: unknown) => unknown>,
): AsyncGenerator<unknown[][], void, undefined> {
  for await (const rows of batches) {
    for (const row of rows) for (let i = 0; i < decoders.length; i++) row[i] = decoders[i](row[i]);
    yield rows;
  }
}

/** Throws the first error of a list (of referenceErrors). */
function throwFirst(errors: ReadonlyArray<DomainError | undefined>): void {
  const error = errors.find((e) => e !== undefined);
  if (error) throw error;
}
