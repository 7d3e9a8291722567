// Lint rules for the whole TypeScript tree: typescript-eslint's type-checked recommendations;
// formatting is Prettier's job (eslint-config-prettier turns off the rules that would fight it).
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.data/**'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
  },
  { files: ['**/*.mjs', '**/*.js', '**/*.cjs'], ...tseslint.configs.disableTypeChecked },
  // jest.config.js and .dependency-cruiser.cjs are CommonJS, loaded by Node: `module`, `require`, `exports` and
  // `process` are their globals.
  {
    files: ['jest.config.js', '.dependency-cruiser.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { process: 'readonly' } },
  },
  prettier,
);
