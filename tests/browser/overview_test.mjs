// The overview page in a real browser: a daemon, two Python training processes (ranks 0
// and 1; rank 1's fifth module turns NaN at step 37), `tensorscope view`, and Debian's
// chromium driven headless by puppeteer-core.
//
//   node tests/browser/overview_test.mjs --bin build/bin --python-path build/python
//        --artifacts DIR [--python /usr/bin/python3] [--chromium PATH]
//
// Checks: the page lands on the overview, a heatmap per rank side by side; the banner
// names the first NaN (step, rank, module) while training runs; hovering a cell names its
// module, step and value; clicking it opens that module's tile of that rank with the step
// cursor on that step; the finished session's view shows the same. Saves screenshots.
// Exit 0 when every check passed, 1 otherwise, 77 when chromium or torch is missing.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, finish, launchBrowser, waitFor, startProcess, testSetup, workFolder } from './lib/harness.mjs';

const { bin, pythonPath, python, artifacts, chromiumPath } = testSetup({ torch: true });
const { work, runtime, output } = workFolder('ts-overview-');
const session = `overview${process.pid}`;
const sessionDir = path.join(output, session);
const env = { ...process.env, TENSORSCOPE_RUNTIME_DIR: runtime, PYTHONPATH: pythonPath };
fs.writeFileSync(path.join(work, 'config.yaml'), 'live:\n  max_fps: 2\nsupervisor:\n  shutdown_timeout_ms: 20000\n');

const children = [];
const cleanup = () => { for (const c of children) { try { c.kill('SIGKILL'); } catch (e) { /* gone */ } } };
process.on('exit', cleanup);

const STEPS = 80, BAD_STEP = 37, BAD_RANK = 1, BAD_MODULE = 'net.4';
const training = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lib', 'diverging_training.py');
const daemon = startProcess(children, path.join(bin, 'tensorscoped'),
  ['--config', path.join(work, 'config.yaml'), '--session', session, '--output', output, '--workers', '2'], env);
await waitFor(() => fs.existsSync(path.join(runtime, `${session}.sock`)), 20000, 'the daemon listens');
const ranks = [0, 1].map((rank) => startProcess(children, python,
  [training, session, String(rank), String(STEPS), String(rank === BAD_RANK ? BAD_STEP : -1)], env));
const viewer = startProcess(children, path.join(bin, 'tensorscope'), ['view', '--session', session], env);
const url = await viewer.firstLine(15000);

const consoleErrors = [];
const { browser, openPage } = await launchBrowser(chromiumPath, consoleErrors);
const overviewState = (page) => page.evaluate(() => ({
  page: window.tensorscopeView.page,
  ranks: [...document.querySelectorAll('#overview-ranks h3')].map((h) => h.textContent),
  canvases: [...document.querySelectorAll('#overview-ranks canvas')].map((c) => c.overview ? c.overview.cols : 0),
  banner: document.getElementById('banner').hidden ? '' : document.getElementById('banner-text').textContent,
}));

// Whether tooltip `tip` is that of the cell of (rank, stream) that holds `step`.
function tipNamesCell(tip, rank, stream, step) {
  const m = /· steps? (\d+)(?:–(\d+))?/.exec(tip || '');
  return !!m && tip.startsWith(`${stream}\n`) && tip.includes(`rank ${rank} ·`) &&
    Number(m[1]) <= step && step <= Number(m[2] ?? m[1]);
}
// Hovers the cell of (rank, stream, step) on `page`; returns the tooltip and the point.
// While training runs the heatmap grows a column per step, so a cell may move between
// finding it and moving there: tried again until the tooltip names that cell.
async function hoverCellAt(page, rank, stream, step) {
  let tip = null, at = null;
  for (let attempt = 0; attempt < 50; ++attempt) {
    at = await page.evaluate((r, s, t) => window.tensorscopeView.cellCenter(r, s, t), rank, stream, step);
    if (!at) return { tip: null, at };
    await page.mouse.move(at.x, at.y);
    tip = await page.evaluate(() => (document.getElementById('overview-tip').hidden ? '' : document.getElementById('overview-tip').textContent));
    if (tipNamesCell(tip, rank, stream, step)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { tip, at };
}
const hoverCell = async (page, rank, stream, step) => (await hoverCellAt(page, rank, stream, step)).tip;
const tileSteps = (page) => page.evaluate(() => [...document.querySelectorAll('figure.tile')].map((f) => ({
  name: f.querySelector('.name').textContent, step: f.querySelector('.step').textContent,
  hasImage: f.querySelector('img').hasAttribute('src'),
})));

async function checkOverview(page, label) {
  await waitFor(async () => (await overviewState(page)).page === 'overview', 30000, `${label}: the page lands on the overview`);
  await waitFor(async () => {
    const s = await overviewState(page);
    return s.ranks.length === 2 && s.canvases.every((c) => c > 0);
  }, 30000, `${label}: a heatmap per rank, side by side`);
  const s = await overviewState(page);
  check(s.ranks[0].startsWith('rank 0') && s.ranks[1].startsWith('rank 1'), `${label}: ranks in order (${s.ranks.join(' | ')})`);
  const tops = await page.$$eval('#overview-ranks canvas', (cs) => cs.map((c) => c.getBoundingClientRect().top));
  check(Math.abs(tops[0] - tops[1]) < 2, `${label}: the ranks are side by side (tops ${tops.join(', ')})`);
  await waitFor(async () => (await overviewState(page)).banner.includes(`First NaN/Inf: step ${BAD_STEP}, rank ${BAD_RANK}, ${BAD_MODULE}`),
    30000, `${label}: the banner names the first NaN: step ${BAD_STEP}, rank ${BAD_RANK}, ${BAD_MODULE}`);
  // No tracked output is ever exactly zero: no fraction-of-zeros heatmap to choose.
  const choices = await page.evaluate(() => [...document.querySelectorAll('#overview-metrics button')].map((b) => b.dataset.metric));
  check(choices.includes('act_std') && !choices.includes('zero_fraction'), `${label}: the metrics shown (${choices.join(', ')})`);
  // The metric with the module's own row: activation std.
  await page.evaluate(() => document.querySelector('#overview-metrics button[data-metric="act_std"]').click());
  await waitFor(async () => (await hoverCell(page, BAD_RANK, BAD_MODULE, BAD_STEP) || '').includes('NaN/Inf'), 15000,
    `${label}: the activation std heatmap has a NaN cell at (rank ${BAD_RANK}, ${BAD_MODULE}, step ${BAD_STEP})`);
  const tip = await hoverCell(page, BAD_RANK, BAD_MODULE, BAD_STEP);
  check(tip.includes(BAD_MODULE) && tip.includes(`rank ${BAD_RANK}`) && /step/.test(tip) && tip.includes('activation std'),
    `${label}: hovering names module, rank, step and metric (${JSON.stringify(tip)})`);
  // Rank 0's summaries of that step may arrive after rank 1's (a loaded machine): waited for.
  let healthy = null;
  await waitFor(async () => {
    healthy = await hoverCell(page, 0, BAD_MODULE, BAD_STEP);
    return !!healthy && /activation std: /.test(healthy);
  }, 15000, `${label}: rank 0's cell at step ${BAD_STEP} is drawn`).catch(() => {});
  check(healthy && !healthy.includes('NaN') && /activation std: \d/.test(healthy), `${label}: rank 0's cell is a number (${JSON.stringify(healthy)})`);
  const before = await hoverCell(page, BAD_RANK, BAD_MODULE, BAD_STEP - 1);
  check(before && !before.includes('NaN/Inf'), `${label}: the step before is finite (${JSON.stringify(before)})`);
  await page.screenshot({ path: path.join(artifacts, `overview_${label}.png`) });
}

try {
  const page = await openPage(url, 1600, 900);
  await checkOverview(page, 'live');
  for (const r of ranks) await r.exited(120000);

  // Click: that module's tile of that rank, the cursor on that step.
  const cellStep = BAD_STEP;
  const { tip: clickedTip, at } = await hoverCellAt(page, BAD_RANK, BAD_MODULE, cellStep);
  check(tipNamesCell(clickedTip, BAD_RANK, BAD_MODULE, cellStep), `the cell to click is found (${JSON.stringify(clickedTip)})`);
  await page.mouse.click(at.x, at.y);
  await waitFor(async () => (await overviewState(page)).page === 'tiles', 30000, 'a click opens the tiles');
  const hash = decodeURIComponent(page.url().split('#')[1]);
  check(hash.includes(`step=${cellStep}`) && hash.includes(`rank=${BAD_RANK}`) && hash.includes('q=^net\\.4$'),
    `the URL keeps the module, rank and step (${hash.replace(/t=[0-9a-f]+/, 't=…')})`);
  await waitFor(async () => {
    const tiles = await tileSteps(page);
    return tiles.length > 0 && tiles.every((t) => t.name === BAD_MODULE && t.step === `step ${cellStep}` && t.hasImage);
  }, 60000, `the ${BAD_MODULE} tile of rank ${BAD_RANK} shows step ${cellStep}`);
  await page.screenshot({ path: path.join(artifacts, 'overview_click_tile.png') });

  // The finished session, from its files alone.
  await page.close();
  daemon.kill('SIGTERM');
  await daemon.exited(60000);
  viewer.kill('SIGTERM');
  await viewer.exited(10000);
  const pngs = fs.readdirSync(sessionDir).filter((f) => /^overview__rank\d+__pid\d+__\w+\.png$/.test(f));
  // Gradient norm and activation std; no fraction of zeros: no tracked output is ever 0.
  check(pngs.length === 2 * 2, `a PNG of the whole run per rank and metric (${pngs.join(', ')})`);
  const offline = startProcess(children, path.join(bin, 'tensorscope'), ['view', '--dir', sessionDir], env);
  const page2 = await openPage(await offline.firstLine(15000), 1600, 900);
  await checkOverview(page2, 'finished');
  offline.kill('SIGTERM');
  await offline.exited(10000);
} catch (e) {
  check(false, `unexpected: ${e.stack || e}`);
} finally {
  await browser.close();
}
finish(consoleErrors, cleanup, work);
