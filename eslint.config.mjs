// ESLint's flat config for the browser's own scripts (web/static; scripts/lint-web.sh runs it in
// `make test`). They are classic scripts, not modules: each is one strict IIFE loaded by a page.
import js from '@eslint/js';
import globals from 'globals';

export default [
  {
    files: ['web/static/**/*.js'],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'script',
      globals: { ...globals.browser },
    },
  },
];
