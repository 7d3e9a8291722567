/**
 * The module layering, checked by `npm run lint` (docs/architecture.md explains it).
 *
 * Each folder of src/ sits on one layer; a file may import its own folder, any folder on a lower layer,
 * and a folder on its own layer only where PEERS says so. Imports therefore run from the front doors
 * down to the data engine and infrastructure, never back up, and the folders cannot form a circle.
 */

/** Bottom to top. A layer lists folders of src/ ('app' stands for the files at the root of src/). */
const LAYERS = [
  ['config'],
  ['common'],
  ['database'],
  ['jobs'],
  ['audit'],
  ['auth'],
  ['observability'],
  ['llm', 'metadata'],
  ['governance'],
  ['data'],
  ['views', 'metrics', 'changes'],
  ['history'],
  ['webhooks'],
  ['tools', 'transfer'],
  ['agents'],
  ['runtime', 'writes'],
  ['chats', 'openai-compat', 'mcp', 'records', 'seed', 'playground'],
  ['charts', 'health', 'approvals', 'schedules'],
  ['app'],
];

/** Imports allowed between folders of one layer: [from, to]. */
const PEERS = [];

const folderPath = (folder) => (folder === 'app' ? '^src/[^/]+$' : `^src/${folder}/`);
const anyOf = (folders) => folders.map(folderPath).join('|');

const layerRules = LAYERS.flatMap((layer, index) => {
  const above = LAYERS.slice(index + 1).flat();
  return layer.flatMap((folder) => {
    const peers = layer.filter((other) => other !== folder && !PEERS.some(([from, to]) => from === folder && to === other));
    const rules = [];
    if (above.length) {
      rules.push({
        name: `layers-${folder}`,
        comment: `src/${folder} is below ${above.join(', ')}: it must not import them (layers in .dependency-cruiser.cjs)`,
        severity: 'error',
        from: { path: folderPath(folder) },
        to: { path: anyOf(above) },
      });
    }
    if (peers.length) {
      rules.push({
        name: `peers-${folder}`,
        comment: `src/${folder} shares a layer with ${peers.join(', ')}: it must not import them`,
        severity: 'error',
        from: { path: folderPath(folder) },
        to: { path: anyOf(peers) },
      });
    }
    return rules;
  });
});

const known = LAYERS.flat();

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Files that import each other in a circle (src/, bench/, evals/, scripts/, test/)',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'folder-on-a-layer',
      comment: 'Every folder of src/ has a layer: add a new one to LAYERS in .dependency-cruiser.cjs',
      severity: 'error',
      from: { path: '^src/[^/]+/', pathNot: `^src/(${known.join('|')})/` },
      to: {},
    },
    {
      name: 'app-code-not-on-tests',
      comment: 'Application code does not import tests, benchmarks or evals (unit specs beside it may)',
      severity: 'error',
      from: { path: '^src/', pathNot: '\\.spec\\.ts$' },
      to: { path: '^(test|bench|evals)/' },
    },
    ...layerRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
