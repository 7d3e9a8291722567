import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { Public } from '../auth/auth.decorators';
import { ApiRoute } from '../common/api-route.decorator';
import { PlaygroundSignInResponse } from './playground-sign-in.dto';
import { PlaygroundSignIn } from './playground-sign-in.service';

@ApiTags('playground')
@Controller('playground')
export class PlaygroundController {
  constructor(private readonly signIn: PlaygroundSignIn) {}

  @Get('sign-in')
  @Public()
  @ApiRoute({
    summary: "The playground's sign-in with the identity provider: whether it is on, and its public client settings",
    type: PlaygroundSignInResponse,
    public: true,
  })
  settings(): PlaygroundSignInResponse {
    return this.signIn.settings();
  }
}
