import { Module } from '@nestjs/common';
import { PlaygroundAssets } from './playground.assets';

/** The browser page at `/`: an API key, a chat with an agent, an object browser (PLAYGROUND, default on). */
@Module({ providers: [PlaygroundAssets] })
export class PlaygroundModule {}
