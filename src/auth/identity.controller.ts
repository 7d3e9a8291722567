import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Patch, Post, Put, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import { DomainError } from '../common/domain-error';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { ApiKeyService } from './api-key.service';
import { Roles } from './auth.decorators';
import { Caller } from './caller';
import {
  IdentityMappingDto,
  IdentityMappingResponse,
  LiftRevocationDto,
  MeResponse,
  RevokeUserDto,
  UpdateUserDto,
  UserListResponse,
  UserResponse,
} from './identity.dto';
import { UserPrincipalService } from './user-principal.service';

@ApiTags('identity')
@Controller('api/v1')
export class IdentityController {
  constructor(
    private readonly users: UserPrincipalService,
    private readonly keys: ApiKeyService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  @Get('me')
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Who the caller is: an API key or a user of an identity provider, with its role, policies and attributes',
    type: MeResponse,
  })
  async me(@Caller() caller: Caller): Promise<MeResponse> {
    const row = await this.keys.principal(caller.keyId);
    if (!row) throw new DomainError('unauthorized', 'Unknown or revoked API key');
    return {
      kind: row.kind,
      ...(row.kind === 'user' && row.issuer ? { issuer: row.issuer } : {}),
      subject: row.subject,
      role: row.role,
      policies: row.policies ?? [],
      attributes: row.attributes ?? {},
    };
  }

  @Get('identity/mapping')
  @Roles('admin')
  @ApiRoute({
    summary: "How identity providers' token claims map to a user's subject, role, policies and attributes",
    type: IdentityMappingResponse,
  })
  getMapping(): Promise<IdentityMappingResponse> {
    return this.users.getMapping();
  }

  @Put('identity/mapping')
  @Roles('admin')
  @ApiRoute({
    summary: 'Replace the mapping of token claims; every user runs under it from its next request',
    type: IdentityMappingResponse,
    errors: [...BODY_ERRORS, 'invalid_policy'],
  })
  putMapping(@Caller() caller: Caller, @Body() dto: IdentityMappingDto): Promise<IdentityMappingResponse> {
    return this.users.putMapping({ ...dto }, caller);
  }

  @Post('identity/revocations')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({
    summary: 'Revoke a user: its requests, event streams and chat turns stop, and its tokens are refused',
    status: 204,
    errors: BODY_ERRORS,
  })
  async revoke(@Caller() caller: Caller, @Body() dto: RevokeUserDto): Promise<void> {
    if (!this.config.oidcIssuers.some((issuer) => issuer.issuer === dto.issuer)) {
      throw new DomainError('validation_failed', `"${dto.issuer.slice(0, 200)}" is not a configured issuer`);
    }
    await this.keys.revokeUser(dto.issuer, dto.subject, caller);
  }

  @Delete('identity/revocations')
  @Roles('admin')
  @HttpCode(204)
  @ApiRoute({
    summary: "Lift a user's revocation: its next valid token is accepted again",
    description:
      'The issuer and subject come in a JSON body or as query parameters (`?issuer=…&subject=…`). 404 user_not_found when that user is unknown or not revoked.',
    status: 204,
    errors: [...BODY_ERRORS, 'user_not_found'],
  })
  async liftRevocation(
    @Caller() caller: Caller,
    @Body() body: LiftRevocationDto,
    @Query() query: LiftRevocationDto,
  ): Promise<void> {
    const issuer = body.issuer ?? query.issuer;
    const subject = body.subject ?? query.subject;
    if (!issuer || !subject) throw new DomainError('validation_failed', 'issuer and subject are required');
    await this.keys.liftUserRevocation(issuer, subject, caller);
  }

  @Get('identity/users')
  @Roles('admin')
  @ApiRoute({
    summary: 'List the users of the identity providers seen so far (and users revoked ahead), with their ids',
    type: UserListResponse,
  })
  listUsers(): Promise<UserListResponse> {
    return this.keys.listUsers();
  }

  @Patch('identity/users/:id')
  @Roles('admin')
  @ApiRoute({
    summary: "Set a user's daily token quota; its role, policies and attributes come from its tokens through the mapping",
    type: UserResponse,
    errors: [...BODY_ERRORS, 'user_not_found'],
  })
  updateUser(@Caller() caller: Caller, @Param('id') id: string, @Body() dto: UpdateUserDto): Promise<UserResponse> {
    return this.keys.updateUser(id, dto.tokensPerDay, caller);
  }
}
