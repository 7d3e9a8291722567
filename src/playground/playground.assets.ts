import fastifyStatic from '@fastify/static';
import { Inject, Injectable, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { APP_CONFIG, type AppConfig } from '../config/app-config';
import { playgroundHeaders } from './playground.headers';
import { PlaygroundSignIn } from './playground-sign-in.service';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX } from './playground.paths';

/**
 * Serves the built playground at `/` when PLAYGROUND is on. These are plain Fastify routes, outside
 * Nest's guard: the page needs no API key (it asks for one and sends it on each API call itself).
 * Only the files the build wrote are routes (no wildcard), so every other path stays Nest's 404.
 */
@Injectable()
export class PlaygroundAssets implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly signIn: PlaygroundSignIn,
  ) {}

  onModuleInit(): void {
    if (!this.config.playground) return;
    if (!existsSync(join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX))) {
      throw new Error(
        `PLAYGROUND is on but the page is not built (${join(PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX)} is missing): ` +
          'run npm run build, or set PLAYGROUND=false',
      );
    }
    const fastify = this.adapterHost.httpAdapter.getInstance<FastifyInstance>();
    // An encapsulated scope, so that the page's headers apply to its files and to nothing under /api.
    void fastify.register(async (scope) => {
      scope.addHook('onSend', async (_request, reply) => {
        void reply.headers(playgroundHeaders(await this.signIn.connectOrigins()));
      });
      await scope.register(fastifyStatic, {
        root: PLAYGROUND_BUILD_DIR,
        prefix: '/',
        wildcard: false,
        index: PLAYGROUND_INDEX,
        // The swagger UI registers this plugin too; only one may decorate the reply.
        decorateReply: false,
        cacheControl: false,
      });
    });
  }
}
