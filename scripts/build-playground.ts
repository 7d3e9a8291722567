/**
 * Builds the playground page into dist/playground (part of `npm run build`): the TypeScript bundled
 * for the browser with the AI SDK's chat client, the stylesheet, the HTML. Nothing is fetched at run
 * time: the page loads only these files, from this server.
 */
import { build } from 'esbuild';
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PLAYGROUND_BUILD_DIR, PLAYGROUND_INDEX, PLAYGROUND_SOURCE_DIR } from '../src/playground/playground.paths';

const COPIED = [PLAYGROUND_INDEX, 'favicon.svg'];

async function main(): Promise<void> {
  await rm(PLAYGROUND_BUILD_DIR, { recursive: true, force: true });
  await mkdir(PLAYGROUND_BUILD_DIR, { recursive: true });
  await build({
    entryPoints: [
      { in: join(PLAYGROUND_SOURCE_DIR, 'main.ts'), out: 'playground' },
      { in: join(PLAYGROUND_SOURCE_DIR, 'playground.css'), out: 'playground' },
    ],
    outdir: PLAYGROUND_BUILD_DIR,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022'],
    minify: true,
    sourcemap: 'linked',
    legalComments: 'linked',
    logLevel: 'warning',
  });
  await Promise.all(COPIED.map((file) => copyFile(join(PLAYGROUND_SOURCE_DIR, file), join(PLAYGROUND_BUILD_DIR, file))));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
