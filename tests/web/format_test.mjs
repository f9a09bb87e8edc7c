// format_test.mjs — how the page writes values, ages, rank lists and literal names
// (view/web/format.js), with Node's own test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { escapeRegExp, formatAge, formatRanks, formatValue } from '../../view/web/format.js';

test('values keep four significant digits, exponents for the very small and large', () => {
  assert.equal(formatValue(null), 'no value');
  assert.equal(formatValue(0), '0');
  assert.equal(formatValue(1.234567), '1.235');
  assert.equal(formatValue(-0.5), '-0.5');
  assert.equal(formatValue(0.0001234), '1.23e-4');
  assert.equal(formatValue(123456), '1.23e+5');
  assert.equal(formatValue(12345), '12350');
});

test('ages read in milliseconds, seconds or minutes', () => {
  assert.equal(formatAge(undefined), '');
  assert.equal(formatAge(850), '850 ms');
  assert.equal(formatAge(12500), '12.5 s');
  assert.equal(formatAge(600000), '10 min');
});

test('a stream name matches only itself once escaped', () => {
  const name = 'model.layers[0].attn#calls.grad';
  const re = new RegExp(`^${escapeRegExp(name)}$`);
  assert.ok(re.test(name));
  assert.ok(!re.test('modelXlayers[0].attn#calls.grad'));
  assert.equal(escapeRegExp('a+b*(c)?'), 'a\\+b\\*\\(c\\)\\?');
});

test('ranks read as runs, long lists cut', () => {
  assert.equal(formatRanks([3]), 'rank 3');
  assert.equal(formatRanks([0, 1, 2, 3]), 'ranks 0–3');
  assert.equal(formatRanks([0, 1, 4, 6, 7]), 'ranks 0–1, 4, 6–7');
  assert.equal(formatRanks([0, 2, 4, 6], 2), 'ranks 0, 2, … (4 ranks)');
});
