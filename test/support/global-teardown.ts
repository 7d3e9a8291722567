import { rm } from 'node:fs/promises';

export default async function globalTeardown(): Promise<void> {
  await globalThis.__TEST_POSTGRES__?.stop();
  if (globalThis.__TEST_POSTGRES_DIR__) await rm(globalThis.__TEST_POSTGRES_DIR__, { recursive: true, force: true });
}
