import { join } from 'node:path';
import { projectRoot } from '../common/project-root';

/** TypeScript, HTML and CSS of the page, bundled by `npm run build` (scripts/build-playground.ts). */
export const PLAYGROUND_SOURCE_DIR = join(projectRoot(), 'src', 'playground', 'client');

/** The built page: what the server sends. The same folder whether the server runs from src/ (tests) or dist/src/. */
export const PLAYGROUND_BUILD_DIR = join(projectRoot(), 'dist', 'playground');

/** The page's entry file; its absence means the build did not run. */
export const PLAYGROUND_INDEX = 'index.html';
