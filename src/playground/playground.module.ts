import { Module } from '@nestjs/common';
import { PlaygroundAssets } from './playground.assets';
import { PlaygroundController } from './playground.controller';
import { PlaygroundSignIn } from './playground-sign-in.service';

/** The browser page at `/`: an API key or a sign-in, a chat with an agent, an object browser (PLAYGROUND, default on). */
@Module({ controllers: [PlaygroundController], providers: [PlaygroundAssets, PlaygroundSignIn] })
export class PlaygroundModule {}
