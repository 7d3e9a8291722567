import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The folder holding package.json, found from this file whether it runs from src/ (tests) or dist/src/. */
export function projectRoot(): string {
  let dir = __dirname;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('package.json not found above ' + __dirname);
    dir = parent;
  }
  return dir;
}
