import { Body, Controller, Post } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { ApiRoute, BODY_ERRORS } from '../common/api-route.decorator';
import { Roles } from './auth.decorators';
import { Caller } from './caller';
import { CreateStreamTokenDto, StreamTokenResponse } from './stream-token.dto';
import { StreamTokenService } from './stream-token.service';

@ApiTags('stream-tokens')
@Controller('api/v1/stream-tokens')
export class StreamTokenController {
  constructor(private readonly tokens: StreamTokenService) {}

  @Post()
  @Roles('admin', 'member')
  @ApiRoute({
    summary: 'Create a stream token',
    description:
      'A short-lived token for EventSource, which cannot send Authorization: pass it as ?token= on an event-stream ' +
      'route within its lifetime (STREAM_TOKEN_TTL_MS, 60 s by default); the stream runs as this key and stays open ' +
      "after the token expires. A token bound to a chat opens only that chat's streams (401 on another). Any other " +
      "route refuses tokens (401). A revoked key's tokens stop working and its streams end.",
    status: 201,
    type: StreamTokenResponse,
    errors: [...BODY_ERRORS, 'chat_not_found', 'too_many_stream_tokens'],
  })
  create(@Caller() caller: Caller, @Body() dto: CreateStreamTokenDto): Promise<StreamTokenResponse> {
    return this.tokens.create(caller, dto.chatId);
  }
}
