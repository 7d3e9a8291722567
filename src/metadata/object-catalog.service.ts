import { Inject, Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller';
import { ObjectListResponse, ObjectResponse } from './metadata.dto';
import { toObjectResponse } from './metadata.mapper';
import { MetadataService } from './metadata.service';
import { OBJECT_LENS, type ObjectLens } from './object-lens';

/** The objects as a caller may see them (GET /api/v1/objects): only those it may read, only their visible fields. */
@Injectable()
export class ObjectCatalogService {
  constructor(
    private readonly metadata: MetadataService,
    @Inject(OBJECT_LENS) private readonly lens: ObjectLens,
  ) {}

  async list(caller: Caller): Promise<ObjectListResponse> {
    const all = await this.metadata.listObjects();
    const readable = await this.lens.readableBy(
      caller,
      all.map((o) => o.name),
    );
    const objects = all.filter((_, i) => readable[i]);
    return {
      // The count is of the (non-system) fields the caller will see when it describes the object.
      objects: await Promise.all(
        objects.map(async (o) => ({
          ...o,
          fieldCount: (await this.lens.viewFor(caller, o.name)).fields.filter((f) => !f.system).length,
        })),
      ),
    };
  }

  async describe(caller: Caller, name: string): Promise<ObjectResponse> {
    return toObjectResponse(await this.lens.viewFor(caller, name));
  }
}
