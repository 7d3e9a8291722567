/**
 * Writes the module graph of src/ into docs/architecture.md (between its module-graph markers): one box per
 * module folder, an arrow for each import between folders that no longer path already implies (the
 * transitive reduction), read from dependency-cruiser's output. Run: npm run docs:graph.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '../src/common/project-root';

interface Cruise {
  modules: { source: string; dependencies: { resolved: string }[] }[];
}

const START = '<!-- module-graph: start (written by npm run docs:graph) -->';
const END = '<!-- module-graph: end -->';

/** The module a file belongs to: a folder of src/ (chats/ counts as its durable/ and stateless/ halves), or "app". */
function moduleOf(path: string): string | undefined {
  const match = /^src\/(chats\/(?:durable|stateless)|[^/]+)(\/)?/.exec(path);
  if (!match || path.endsWith('.spec.ts') || path.startsWith('src/playground/client/')) return undefined;
  if (!match[2]) return 'app';
  return match[1];
}

function edges(root: string): Map<string, Set<string>> {
  const depcruise = join(root, 'node_modules', '.bin', 'depcruise');
  const json = execFileSync(
    depcruise,
    [
      'src',
      '--no-config',
      '--ts-config',
      'tsconfig.json',
      '--ts-pre-compilation-deps',
      '--include-only',
      '^src/',
      '--output-type',
      'json',
    ],
    {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    },
  );
  const graph = new Map<string, Set<string>>();
  for (const module of (JSON.parse(json) as Cruise).modules) {
    const from = moduleOf(module.source);
    if (!from) continue;
    if (!graph.has(from)) graph.set(from, new Set());
    for (const dependency of module.dependencies) {
      const to = moduleOf(dependency.resolved);
      if (to && to !== from) graph.get(from)!.add(to);
    }
  }
  return graph;
}

/** Keeps an arrow only when no longer path joins its ends. */
function reduce(graph: Map<string, Set<string>>): [string, string][] {
  const reach = (from: string, skip: string): Set<string> => {
    const seen = new Set<string>();
    const stack = [...(graph.get(from) ?? [])].filter((to) => to !== skip);
    while (stack.length) {
      const next = stack.pop()!;
      if (seen.has(next)) continue;
      seen.add(next);
      stack.push(...(graph.get(next) ?? []));
    }
    return seen;
  };
  const kept: [string, string][] = [];
  for (const [from, targets] of [...graph].sort(([a], [b]) => a.localeCompare(b))) {
    for (const to of [...targets].sort()) if (!reach(from, to).has(to)) kept.push([from, to]);
  }
  return kept;
}

function mermaid(arrows: [string, string][]): string {
  const id = (name: string) => name.replace(/[^a-z]/g, '_');
  const lines = ['```mermaid', 'flowchart TD'];
  for (const [from, to] of arrows) lines.push(`  ${id(from)}["${from}"] --> ${id(to)}["${to}"]`);
  lines.push('```');
  return lines.join('\n');
}

const root = projectRoot();
const file = join(root, 'docs', 'architecture.md');
const doc = readFileSync(file, 'utf8');
const start = doc.indexOf(START);
const end = doc.indexOf(END);
if (start < 0 || end < start) throw new Error(`${file} has no module-graph markers`);
writeFileSync(file, `${doc.slice(0, start + START.length)}\n\n${mermaid(reduce(edges(root)))}\n\n${doc.slice(end)}`);
console.log(`module graph written to ${file}`);
