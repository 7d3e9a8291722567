/**
 * Two tiers. `unit`: the specs next to the code (src, evals, test/support) and beside the fixtures they check
 * (test/fixtures), pure, no database, run in seconds by `npm run test:unit`. `e2e`: test/e2e over the real app
 * and a real Postgres, which the globalSetup starts only when a spec of this project is selected. `npm test` runs
 * both.
 */
const shared = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  moduleFileExtensions: ['ts', 'js', 'json'],
};

const projects = [
  {
    ...shared,
    displayName: 'unit',
    roots: ['<rootDir>/src', '<rootDir>/evals', '<rootDir>/test/support', '<rootDir>/test/fixtures'],
    testRegex: '.*\\.spec\\.ts$',
  },
  {
    ...shared,
    displayName: 'e2e',
    roots: ['<rootDir>/test/e2e'],
    testRegex: '.*\\.e2e-spec\\.ts$',
    globalSetup: '<rootDir>/test/support/global-setup.ts',
    globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  },
];

// `npm run test:unit` picks its tier with TEST_TIER rather than --selectProjects, whose list would swallow
// the spec paths and names given after it.
const tier = process.env.TEST_TIER;
if (tier && !projects.some((project) => project.displayName === tier)) throw new Error(`TEST_TIER=${tier}: no such tier`);

module.exports = {
  // Run-wide options: Jest reads these here, not from a project.
  maxWorkers: 2,
  testTimeout: 60000,
  projects: tier ? projects.filter((project) => project.displayName === tier) : projects,
};
