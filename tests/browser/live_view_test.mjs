// The live view in a real browser: a daemon, two producers (ranks 0 and 1) pushing known
// streams, `tensorscope view`, and Debian's chromium driven headless by puppeteer-core.
//
//   node tests/browser/live_view_test.mjs --bin build/bin --artifacts DIR [--chromium PATH]
//
// Checks: a tile per stream, laid out by rank; frames only for tiles on screen; steps
// advance while pushing; the stream filter (kept in the URL); the step cursor shows on
// every tile the frame at (or just before) the step, read from finished videos; a view
// of the finished session from its files alone; no console error. Saves screenshots in
// the artifacts directory. Exit 0 when every check passed, 1 otherwise, 77 when
// chromium is missing (ctest: skipped).
import fs from 'node:fs';
import path from 'node:path';
import {
  check, finish, launchBrowser, waitFor, expectedStepAtOrBefore, readVideoSteps, startProcess, testSetup, workFolder,
} from './lib/harness.mjs';

const { bin, artifacts, chromiumPath } = testSetup();
const { work, runtime, output } = workFolder('ts-browser-');
const session = `browser${process.pid}`;
const sessionDir = path.join(output, session);
const env = { ...process.env, TENSORSCOPE_RUNTIME_DIR: runtime };
fs.writeFileSync(path.join(work, 'config.yaml'),
  'video:\n  max_frames: 25\nlive:\n  max_fps: 2\nsupervisor:\n  shutdown_timeout_ms: 10000\n');

const children = [];
const cleanup = () => { for (const c of children) { try { c.kill('SIGKILL'); } catch (e) { /* gone */ } } };
process.on('exit', cleanup);

const STEPS = 240;
const STREAMS = 2 * 11;  // per rank: p.<10 dtypes> and p.const (test_producer --pattern)
const daemon = startProcess(children, path.join(bin, 'tensorscoped'),
  ['--config', path.join(work, 'config.yaml'), '--session', session, '--output', output, '--workers', '2'], env);
await waitFor(() => fs.existsSync(path.join(runtime, `${session}.sock`)), 20000, 'the daemon listens');
const producers = [0, 1].map((rank) => startProcess(children, path.join(bin, 'test_producer'),
  ['--session', session, '--rank', String(rank), '--count', String(STEPS), '--pattern', '--sleep-us', '60000',
   '--ring-slots', '4096', '--no-pacing'], env));  // every step sent: the ring holds them all
const viewer = startProcess(children, path.join(bin, 'tensorscope'), ['view', '--session', session], env);
const url = await viewer.firstLine(15000);
check(/^http:\/\/127\.0\.0\.1:\d+\/#t=[0-9a-f]{32}$/.test(url), `the viewer prints its address (${url})`);

const consoleErrors = [];
const { browser, openPage } = await launchBrowser(chromiumPath, consoleErrors);
const tileState = (page) => page.evaluate(() => [...document.querySelectorAll('figure.tile')].map((f) => {
  const r = f.getBoundingClientRect();
  const img = f.querySelector('img');
  return {
    id: Number(f.dataset.tile), name: f.querySelector('.name').textContent,
    step: f.querySelector('.step').textContent, onScreen: r.bottom > 0 && r.top < innerHeight,
    farOff: r.top > innerHeight + 300,  // beyond the page's look-ahead margin (200 px)
    width: img.naturalWidth, hasImage: img.hasAttribute('src'),
  };
}));

try {
  // ---- live: a tile per stream, rank columns, frames on screen only ----
  const page = await openPage(url, 1500, 900);
  const tilesFromServer = async () => JSON.parse(await (await fetch(url.replace('/#t=', '/api/tiles?t='))).text()).tiles;
  await waitFor(async () => (await tilesFromServer()).length >= STREAMS, 20000, `${STREAMS} streams reach the server`);
  const serverTiles = await tilesFromServer();
  await waitFor(async () => (await tileState(page)).length === serverTiles.length, 30000, 'a tile per stream on the page');
  const names = new Set((await tileState(page)).map((t) => t.name));
  check(names.has('p.Float') && names.has('p.const'), `the tiles name their streams as text (${[...names].join(', ')})`);
  const headers = await page.$$eval('table.grid thead th', (ths) => ths.map((t) => t.textContent));
  check(headers.includes('rank 0 · cpu') && headers.includes('rank 1 · cpu'), `ranks side by side as columns (${headers.join(' | ')})`);
  await waitFor(async () => (await tileState(page)).filter((t) => t.onScreen).every((t) => t.width === 320), 15000,
    'every tile on screen shows a frame (scaled to live.width, 320 pixels)');
  const first = await tileState(page);
  const offScreen = first.filter((t) => t.farOff);
  check(offScreen.length > 0 && offScreen.every((t) => !t.hasImage), `tiles far off screen get no frame (${offScreen.length} of them)`);
  const stepOf = (t) => Number((t.step.match(/step (\d+)/) || [])[1] ?? -1);
  const advanced = (t) => stepOf(t) > stepOf(first.find((f) => f.id === t.id));
  await waitFor(async () => (await tileState(page)).filter((t) => t.onScreen).every(advanced), 30000,
    'steps advance while pushing (every tile on screen)');
  const stats = await page.evaluate(() => window.tensorscopeView.stats);
  const lags = [...stats.lags].sort((a, b) => a - b);
  console.log(`live: ${stats.frames} frames, push-to-page lag p50 ${lags[Math.floor(lags.length / 2)]?.toFixed(0)} ms, ` +
    `p99 ${lags[Math.floor(lags.length * 0.99)]?.toFixed(0)} ms`);
  await page.screenshot({ path: path.join(artifacts, 'live_view.png') });

  // ---- filters, kept in the URL ----
  await page.type('#filter-q', 'Float$');
  await waitFor(async () => (await tileState(page)).length === serverTiles.filter((t) => /Float$/.test(t.stream)).length,
    30000, 'the stream filter leaves the matching tiles');
  check(page.url().includes('q=Float%24'), `the filter is in the URL (${page.url().split('#')[1].replace(/t=[0-9a-f]+/, 't=…')})`);
  await page.select('#filter-rank', '1');
  await waitFor(async () => (await tileState(page)).length === serverTiles.filter((t) => /Float$/.test(t.stream) && t.rank === 1).length,
    30000, 'the rank filter');
  await page.evaluate(() => { location.hash = `t=${window.tensorscopeView.token}`; });
  await waitFor(async () => (await tileState(page)).length === serverTiles.length, 30000, 'clearing the filters shows every tile');

  // ---- the step cursor over finished videos ----
  for (const p of producers) await p.exited(60000);
  await waitFor(() => {
    try {
      const index = JSON.parse(fs.readFileSync(path.join(sessionDir, 'index.json'), 'utf8'));
      return index.files.reduce((n, f) => n + f.frames, 0) >= 2 * 8 * STEPS * 0.9;
    } catch (e) { return false; }
  }, 120000, 'the producers\' videos are finalized and listed');
  const videoSteps = readVideoSteps(sessionDir);
  const cursor = 137;
  await page.setViewport({ width: 1500, height: 6000 });  // every tile on screen
  await page.evaluate((step) => { document.getElementById('cursor-step').value = step; document.getElementById('cursor-step').dispatchEvent(new Event('change')); }, cursor);
  const expectStep = (t) => expectedStepAtOrBefore(videoSteps, serverTiles.find((s) => s.id === t.id), cursor);
  await waitFor(async () => (await tileState(page)).every((t) => stepOf(t) === expectStep(t) && t.width > 0), 30000,
    `every tile shows the frame at step ${cursor}`);
  const atCursor = await tileState(page);
  check(atCursor.every((t) => expectStep(t) === cursor), `each stream had a frame at step ${cursor} (every step pushed)`);
  check(page.url().includes(`step=${cursor}`), 'the cursor is in the URL');
  await page.screenshot({ path: path.join(artifacts, 'cursor_view.png') });
  const videoFrames = await page.evaluate(() => window.tensorscopeView.stats.videoFrames);
  console.log(`cursor: ${atCursor.length} tiles at step ${cursor}, ${videoFrames} frames read from finished videos`);

  // ---- the videos panel ----
  await page.click('#toggle-videos');
  await waitFor(async () => (await page.$$('#videos-panel tr')).length > 0, 30000, 'the videos panel lists finished videos');

  // ---- a finished session, from its files alone ----
  await page.close();
  daemon.kill('SIGTERM');
  await daemon.exited(30000);
  viewer.kill('SIGTERM');
  await viewer.exited(10000);
  const offline = startProcess(children, path.join(bin, 'tensorscope'), ['view', '--dir', sessionDir], env);
  const offlineUrl = await offline.firstLine(15000);
  const page2 = await openPage(offlineUrl, 1500, 6000);
  await waitFor(async () => {
    const s = await tileState(page2);
    return s.length === serverTiles.length && s.every((t) => stepOf(t) === STEPS - 1 && t.width > 0);
  }, 30000, `the finished session's view shows every stream's last step (${STEPS - 1}) from its videos`);
  await page2.screenshot({ path: path.join(artifacts, 'finished_session.png') });
  offline.kill('SIGTERM');
  await offline.exited(10000);
} catch (e) {
  check(false, `unexpected: ${e.stack || e}`);
} finally {
  await browser.close();
}
finish(consoleErrors, cleanup, work);
