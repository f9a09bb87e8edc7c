// overview_colors_test.mjs — the overview's colors as the page maps them through the
// server's scale (view/web/overview_colors.js), with Node's own test runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { BELOW, NONFINITE, NO_VALUE, cellColor, position, scaleLabel, viridis } from '../../view/web/overview_colors.js';

const LOG = { log: true, lo: -5, hi: 1 };
const LINEAR = { log: false, lo: 0, hi: 1 };

test('a log scale places decades evenly and zero below it', () => {
  assert.equal(position(LOG, 1e-5), 0);
  assert.equal(position(LOG, 10), 1);
  assert.ok(Math.abs(position(LOG, 1e-2) - 0.5) < 1e-12);
  assert.ok(position(LOG, 0) < 0);
  assert.ok(position(LOG, -3) < 0);
  assert.ok(position(LOG, 1000) > 1, 'an explosion lies above the scale');
});

test('a linear scale is the value between its ends', () => {
  assert.equal(position(LINEAR, 0.25), 0.25);
  assert.equal(position({ log: false, lo: 0, hi: 4 }, 1), 0.25);
});

test('viridis runs from dark purple to yellow and clamps outside 0..1', () => {
  assert.deepEqual(viridis(0), [0x44, 0x01, 0x54]);
  assert.deepEqual(viridis(1), [0xfd, 0xe7, 0x25]);
  assert.deepEqual(viridis(-1), viridis(0));
  assert.deepEqual(viridis(7), viridis(1));
  const mid = viridis(0.5);
  assert.deepEqual(mid, [0x21, 0x91, 0x8c], 'the middle stop');
  const quarter = viridis(1 / 16);  // half way between the first two stops
  assert.deepEqual(quarter, [0x46, 0x17, 0x68]);
});

test('a cell is NaN/Inf before anything, then no value, then below, then its shade', () => {
  assert.equal(cellColor(LOG, 1, true), NONFINITE);
  assert.equal(cellColor(LOG, null, false), NO_VALUE);
  assert.equal(cellColor(null, 1, false), NO_VALUE, 'no scale: nothing to shade');
  assert.equal(cellColor(LOG, 0, false), BELOW);
  assert.deepEqual(cellColor(LOG, 10, false), viridis(1));
  assert.notDeepEqual(cellColor(LOG, 1e-4, false), cellColor(LOG, 1, false), 'decades apart, colors apart');
});

test('scale labels are decades on a log scale, values on a linear one', () => {
  assert.equal(scaleLabel(LOG, -5), '1e-5');
  assert.equal(scaleLabel(LOG, -2), '0.01');
  assert.equal(scaleLabel(LOG, 3), '1000');
  assert.equal(scaleLabel(LOG, 4), '1e4');
  assert.equal(scaleLabel(LINEAR, 1), '1');
});
