import { EntityManager, UniqueConstraintViolationException } from '@mikro-orm/postgresql';
import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Caller } from '../auth/auth.decorators';
import { DomainError } from '../common/domain-error';
import { isPlainObject } from '../common/plain-object';
import { ADVISORY_LOCK, lockForTransaction } from '../database/advisory-locks';
import { IDENTIFIER_PATTERN } from '../database/sql-identifier';
import { SqlParams } from '../database/sql-params';
import { compileAggregate } from '../data/aggregate.compiler';
import { compileProjection, orderTerms } from '../data/order-by.compiler';
import { clip, compileWhere, LOGICAL_OPERATORS } from '../data/where.compiler';
import { AccessService } from '../governance/access.service';
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
 * Saved views: a filter, an order, visible fields and a grouping over one object. Members keep their
 * own; admins also manage shared ones (no owner), which every reader of the object sees. Each is checked
 * against the object as its writer sees it, by the data engine's own compilers, and applied by the data
 * engine as the caller (the caller's policies still apply beneath a view). Writes hold the metadata
 * lock, so a field cannot be dropped while a view starting to use it is checked.
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
      .find(
        ViewEntity,
        { object: object.name, $or: [{ owner: caller.subject }, { owner: null }] },
        { orderBy: { name: 'asc', owner: 'asc' } },
      );
    return { views: rows.map(toViewResponse) };
  }

  async get(caller: Caller, objectName: string, viewName: string): Promise<ViewResponse> {
    return toViewResponse(await this.resolve(caller, objectName, viewName));
  }

  async create(caller: Caller, objectName: string, dto: CreateViewDto): Promise<ViewResponse> {
    assertValidName('view', dto.name);
    const owner = ownerFor(caller, dto.shared ?? false);
    const object = await this.access.view(caller, objectName, 'read');
    const checked = checkView(object, dto);
    return this.write(dto.name, async (em) => {
      if (await em.findOne(ViewEntity, { object: object.name, name: dto.name, owner })) throw exists(object.name, dto.name);
      if ((await em.count(ViewEntity, { object: object.name, owner })) >= MAX_VIEWS_PER_OWNER) {
        throw new DomainError('invalid_value', `An object has at most ${MAX_VIEWS_PER_OWNER} views per owner`);
      }
      const now = new Date();
      const row = em.create(ViewEntity, {
        id: randomUUID(),
        object: object.name,
        name: dto.name,
        owner,
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
      const owner = dto.shared === undefined ? row.owner : ownerFor(caller, dto.shared);
      if (owner !== row.owner && (await em.findOne(ViewEntity, { object: object.name, name: row.name, owner }))) {
        throw exists(object.name, row.name);
      }
      em.assign(row, { ...rowOf(dto), owner, uses: checked, updatedAt: new Date() });
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
   * The view `viewName` of the object as the caller may see it: its own first, else a shared one.
   * An object it may not read is object_not_found; another owner's view is view_not_found.
   */
  async resolve(caller: Caller, objectName: string, viewName: string, em: EntityManager = this.em.fork()): Promise<ViewRow> {
    const object = await this.access.view(caller, objectName, 'read');
    // Only names a view can have reach the database (no NUL bytes, no overlong text).
    if (!IDENTIFIER_PATTERN.test(viewName)) throw notFound(object.name, viewName);
    const rows = await em.find(ViewEntity, {
      object: object.name,
      name: viewName,
      $or: [{ owner: caller.subject }, { owner: null }],
    });
    const row = rows.find((r) => r.owner !== null) ?? rows[0];
    if (!row) throw notFound(object.name, viewName);
    return row;
  }

  /**
   * `query` with the view applied: the view's where ANDed with the query's, its order unless the query
   * has one, its fields unless the query names some. No view: the query as it is.
   */
  async apply<Q extends ViewableQuery>(caller: Caller, objectName: string, viewName: string | undefined, query: Q): Promise<Q> {
    if (viewName === undefined) return query;
    const view = await this.resolve(caller, objectName, viewName);
    return applyView(view, query, await this.access.view(caller, objectName, 'read'));
  }

  /** A view the caller may change: its own, or (admins) a shared one; a shared one for a member is forbidden. */
  private async writable(em: EntityManager, caller: Caller, objectName: string, viewName: string): Promise<ViewRow> {
    const row = await this.resolve(caller, objectName, viewName, em);
    if (row.owner === null && caller.role !== 'admin') {
      throw new DomainError('forbidden', `View "${clip(viewName)}" is shared; only admins change shared views`);
    }
    return row;
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

/**
 * See ViewService.apply. A shared view may show fields hidden from this caller: those columns and sort
 * keys are left out for it (its filter is not: dropping a condition would show more rows, so a filter on
 * a hidden field stays an error).
 */
export function applyView<Q extends ViewableQuery>(view: ViewRow, query: Q, visibleTo: ObjectMeta): Q {
  const requested = (value: unknown) => value !== undefined && value !== null && value !== '';
  const visible = new Set(visibleTo.fields.map((f) => f.name));
  let where = query.where;
  if (view.where) where = requested(query.where) ? { $and: [view.where, query.where] } : view.where;
  const orderBy = view.orderBy?.filter((item) => visible.has((item as { field: string }).field));
  const fields = view.fields?.filter((name) => visible.has(name));
  return {
    ...query,
    where,
    orderBy: requested(query.orderBy) ? query.orderBy : (orderBy ?? query.orderBy),
    fields: requested(query.fields) ? query.fields : fields?.length ? fields : query.fields,
  };
}

/**
 * Checks each part of a view with the compiler the data engine runs it with, against the object as the
 * writer sees it (a hidden field is unknown). Errors keep the compiler's code, prefixed with the part.
 * Returns every "object.field" the view names.
 */
function checkView(object: ObjectMeta, dto: ReplaceViewDto): string[] {
  part('where', () => compileWhere(object, dto.where, new SqlParams()));
  part('orderBy', () => orderTerms(object, dto.orderBy));
  part('fields', () => compileProjection(object, dto.fields));
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

/** The owner a view gets: the caller's subject, or none for a shared view (admins only). */
function ownerFor(caller: Caller, shared: boolean): string | null {
  if (!shared) return caller.subject;
  if (caller.role !== 'admin') throw new DomainError('forbidden', 'Only admins create or change shared views');
  return null;
}

function notFound(objectName: string, viewName: string): DomainError {
  return new DomainError('view_not_found', `No view "${clip(viewName)}" on "${objectName}"`);
}

function exists(objectName: string, viewName: string): DomainError {
  const on = objectName ? ` on "${objectName}"` : '';
  return new DomainError('view_exists', `View "${clip(viewName)}" already exists${on}`);
}
