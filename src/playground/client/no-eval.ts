/**
 * Imported first by main.ts, before the AI SDK loads zod: zod probes whether it may compile
 * validators with `new Function`, and under the page's policy (no 'unsafe-eval') that probe is
 * reported as a violation. Jitless zod never probes, and validates the same way.
 */
const scope = globalThis as { __zod_globalConfig?: { jitless?: boolean } };
scope.__zod_globalConfig = { ...scope.__zod_globalConfig, jitless: true };

export {};
