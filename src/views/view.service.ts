import { EntityManager, UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/caller';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { isUuid } from '../common/uuid';
import { ADVISORY_LOCK, lockForTransaction } from '../database/advisory-locks';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { compileAggregate } from '../data/aggregate.compiler';
import { compileProjection, orderTerms } from '../data/order-by.compiler';
import { clip, compileWhere, LOGICAL_OPERATORS } from '../data/where.compiler';
import { AccessService, type DefinitionLens } from '../governance/access.service';
import { assertValidName } from '../metadata/metadata.naming';
import type { ObjectMeta } from '../metadata/object-metadata.types';
import { ViewEntity, type ViewRow } from './view.entity';
import { CreateViewDto, ReplaceViewDto, toViewResponse, ViewListResponse, ViewResponse } from './view.dto';

/** A query of the records API or a tool before and after a view is applied. */
export interface ViewableQuery {
  where?: unknown;
  orderBy?: unknown;
  fields?: unknown;
}

/** The views one object may have per owner (and shared): a grid's tabs, not a data store. */
export const MAX_VIEWS_PER_OWNER = 200;

/**
 * Saved views: a filter, an order, visible fields and a grouping over one object. A key keeps its own
 * (another key, even of the same subject, does not see them); admins also manage shared ones (no
 * owner), which every reader of the object sees. Each is checked against the object as its writer sees
 * it, by the data engine's own compilers, and applied by the data engine as the caller (the caller's
 * policies still apply beneath a view). A view that uses a field the caller cannot see is not a view
 * for it at all (AccessService.definitionLens): absent from lists, view_not_found, never applied.
 * Writes hold the metadata lock, so a field cannot be dropped while a view starting to use it is checked.
 */
@Injectable()
export class ViewService {
  constructor(
    private readonly em: EntityManager,
    private readonly access: AccessService,
  ) {}

  async list(caller: Caller, objectName: string): Promise<ViewListResponse> {
    const object = await this.access.view(caller, objectName, 'read');
    const rows = await this.em
      .fork()
      .find(ViewEntity, { object: object.name, $or: ownedOrShared(caller) }, { orderBy: { name: 'asc', ownerKeyId: 'asc' } });
    const sees = await this.access.definitionLens(caller);
    const views: ViewResponse[] = [];
    for (const row of rows) if (await usable(sees, row)) views.push(toViewResponse(row));
    return { views };
  }

  async get(caller: Caller, objectName: string, viewName: string): Promise<ViewResponse> {
    return toViewResponse(await this.resolve(caller, objectName, viewName));
  }

  async create(caller: Caller, objectName: string, dto: CreateViewDto): Promise<ViewResponse> {
    assertValidName('view', dto.name);
    const ownerKeyId = ownerFor(caller, dto.shared ?? false);
    const object = await this.access.view(caller, objectName, 'read');
    const checked = checkView(object, dto);
    return this.write(dto.name, async (em) => {
      if (await em.findOne(ViewEntity, { object: object.name, name: dto.name, ownerKeyId })) {
        throw exists(object.name, dto.name);
      }
      if ((await em.count(ViewEntity, { object: object.name, ownerKeyId })) >= MAX_VIEWS_PER_OWNER) {
        throw new DomainError('invalid_value', `An object has at most ${MAX_VIEWS_PER_OWNER} views per owner`);
      }
      const now = new Date();
      const row = em.create(ViewEntity, {
        id: randomUUID(),
        object: object.name,
        name: dto.name,
        ownerKeyId,
        ...rowOf(dto),
        uses: checked,
        createdAt: now,
        updatedAt: now,
      });
      await em.persist(row).flush();
      return toViewResponse(row);
    });
  }

  async replace(caller: Caller, objectName: string, viewName: string, dto: ReplaceViewDto): Promise<ViewResponse> {
    const object = await this.access.view(caller, objectName, 'read');
    const checked = checkView(object, dto);
    return this.write(viewName, async (em) => {
      const row = await this.writable(em, caller, object.name, viewName);
      const ownerKeyId = dto.shared === undefined ? row.ownerKeyId : ownerFor(caller, dto.shared);
      if (ownerKeyId !== row.ownerKeyId && (await em.findOne(ViewEntity, { object: object.name, name: row.name, ownerKeyId }))) {
        throw exists(object.name, row.name);
      }
      em.assign(row, { ...rowOf(dto), ownerKeyId, uses: checked, updatedAt: new Date() });
      await em.flush();
      return toViewResponse(row);
    });
  }

  async delete(caller: Caller, objectName: string, viewName: string): Promise<void> {
    const object = await this.access.view(caller, objectName, 'read');
    await this.write(viewName, async (em) => {
      em.remove(await this.writable(em, caller, object.name, viewName));
      await em.flush();
    });
  }

  /**
   * The view `viewName` of the object as the caller may use it: its own first, else a shared one, and
   * only one whose every field the caller sees. An object it may not read is object_not_found; another
   * key's view, or one using a field hidden from the caller, is view_not_found like an unknown one.
   */
  resolve(caller: Caller, objectName: string, viewName: string, em: EntityManager = this.em.fork()): Promise<ViewRow> {
    return this.find(em, caller, objectName, viewName, false);
  }

  /**
   * `query` with the view applied: the view's where ANDed with the query's, its order unless the query
   * has one, its fields unless the query names some. No view: the query as it is.
   */
  async apply<Q extends ViewableQuery>(caller: Caller, objectName: string, viewName: string | undefined, query: Q): Promise<Q> {
    if (viewName === undefined) return query;
    return applyView(await this.resolve(caller, objectName, viewName), query);
  }

  /**
   * A view the caller may change: its own (even one using a field hidden from it since it wrote it:
   * replacing or deleting its own definition tells it nothing), or (admins) a shared one it may use;
   * a shared one for a member is forbidden.
   */
  private async writable(em: EntityManager, caller: Caller, objectName: string, viewName: string): Promise<ViewRow> {
    const row = await this.find(em, caller, objectName, viewName, true);
    if (row.ownerKeyId === null && caller.role !== 'admin') {
      throw new DomainError('forbidden', `View "${clip(viewName)}" is shared; only admins change shared views`);
    }
    return row;
  }

  /** See resolve; `ownAnyway`: the caller's own view even when it may not use it. */
  private async find(
    em: EntityManager,
    caller: Caller,
    objectName: string,
    viewName: string,
    ownAnyway: boolean,
  ): Promise<ViewRow> {
    const object = await this.access.view(caller, objectName, 'read');
    // Only names a view can have reach the database (no NUL bytes, no overlong text).
    if (!IDENTIFIER_PATTERN.test(viewName)) throw notFound(object.name, viewName);
    const rows = await em.find(ViewEntity, { object: object.name, name: viewName, $or: ownedOrShared(caller) });
    rows.sort((a, b) => Number(a.ownerKeyId === null) - Number(b.ownerKeyId === null)); // its own first
    const sees = await this.access.definitionLens(caller);
    for (const row of rows) {
      if ((ownAnyway && row.ownerKeyId !== null) || (await usable(sees, row))) return row;
    }
    throw notFound(object.name, viewName);
  }

  private async write<T>(viewName: string, work: (em: EntityManager) => Promise<T>): Promise<T> {
    try {
      return await this.em.fork().transactional(async (em) => {
        await lockForTransaction(em, ADVISORY_LOCK.metadata);
        return work(em);
      });
    } catch (error) {
      if (error instanceof UniqueConstraintViolationException) throw exists('', viewName);
      throw error;
    }
  }
}

/** See ViewService.apply; `view` is one the caller may use (every field it names is visible to it). */
export function applyView<Q extends ViewableQuery>(view: ViewRow, query: Q): Q {
  const requested = (value: unknown) => value !== undefined && value !== null && value !== '';
  let where = query.where;
  if (view.where) where = requested(query.where) ? { $and: [view.where, query.where] } : view.where;
  return {
    ...query,
    where,
    orderBy: requested(query.orderBy) ? query.orderBy : (view.orderBy ?? query.orderBy),
    fields: requested(query.fields) ? query.fields : view.fields?.length ? view.fields : query.fields,
  };
}

/** Whether the caller sees everything the view uses: its object and every field it names. */
function usable(sees: DefinitionLens, row: ViewRow): Promise<boolean> {
  return sees([row.object], row.uses);
}

/** The views a caller may own or share: its key's own (a caller without a key has none) and the shared ones. */
function ownedOrShared(caller: Caller): Array<{ ownerKeyId: string | null }> {
  return isUuid(caller.keyId) ? [{ ownerKeyId: caller.keyId }, { ownerKeyId: null }] : [{ ownerKeyId: null }];
}

/**
 * Checks each part of a view with the compiler the data engine runs it with, against the object as the
 * writer sees it (a hidden field is unknown). Errors keep the compiler's code, prefixed with the part.
 * Returns every "object.field" the view names.
 */
function checkView(object: ObjectMeta, dto: ReplaceViewDto): string[] {
  part('where', () => compileWhere(object, dto.where, new SqlParams()));
  part('orderBy', () => orderTerms(object, dto.orderBy));
  // Checked only: the statement's bind parameters are not kept.
  part('fields', () => compileProjection(object, dto.fields, { params: new SqlParams() }));
  part('groupBy', () =>
    compileAggregate(object, { groupBy: dto.groupBy, aggregations: [{ function: 'count', alias: 'count' }], limit: 1 }),
  );
  const names = new Set<string>([
    ...whereFields(dto.where),
    ...(dto.orderBy ?? []).map((item) => (item as { field: string }).field),
    ...(dto.fields ?? []).map((name) => name.trim()).filter(Boolean),
    ...(dto.groupBy ?? []),
  ]);
  return [...names].sort().map((name) => `${object.name}.${name}`);
}

function part(name: string, check: () => unknown): void {
  try {
    check();
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    const details = isPlainObject(error.details) ? error.details : {};
    throw new DomainError(error.code, `View ${name}: ${error.message}`, { ...details, part: name });
  }
}

/** The field names a where filter names (it compiled, so its shape is known). */
function whereFields(node: unknown): string[] {
  if (Array.isArray(node)) return node.flatMap(whereFields);
  if (!isPlainObject(node)) return [];
  return Object.entries(node).flatMap(([key, value]) =>
    (LOGICAL_OPERATORS as readonly string[]).includes(key) ? whereFields(value) : key.startsWith('$') ? [] : [key],
  );
}

function rowOf(dto: ReplaceViewDto): Pick<ViewRow, 'label' | 'description' | 'where' | 'orderBy' | 'fields' | 'groupBy'> {
  return {
    label: dto.label,
    description: dto.description ?? null,
    where: dto.where ?? null,
    orderBy: dto.orderBy ?? null,
    fields: dto.fields ?? null,
    groupBy: dto.groupBy ?? null,
  };
}

/** The owner a view gets: the caller's key, or none for a shared view (admins only). */
function ownerFor(caller: Caller, shared: boolean): string | null {
  if (shared) {
    if (caller.role !== 'admin') throw new DomainError('forbidden', 'Only admins create or change shared views');
    return null;
  }
  if (!isUuid(caller.keyId)) throw new DomainError('forbidden', 'Only an API key owns a private view');
  return caller.keyId;
}

function notFound(objectName: string, viewName: string): DomainError {
  return new DomainError('view_not_found', `No view "${clip(viewName)}" on "${objectName}"`);
}

function exists(objectName: string, viewName: string): DomainError {
  const on = objectName ? ` on "${objectName}"` : '';
  return new DomainError('view_exists', `View "${clip(viewName)}" already exists${on}`);
}
