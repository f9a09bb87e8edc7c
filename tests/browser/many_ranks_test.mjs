// The overview of 512 ranks in a real browser: 64 nodes x 8 ranks, each node's session
// folder under a common parent (as per-node daemons write them to shared storage), their
// summary tables written as the daemon writes them; rank 301's gradient at one layer
// grows 50x from step 30 on. `tensorscope view --dir PARENT`, Debian's chromium driven
// headless by puppeteer-core.
//
//   node tests/browser/many_ranks_test.mjs --bin build/bin --artifacts DIR [--chromium PATH]
//
// Checks: the page opens on the ranks x layers panel of all 512 ranks in under 2 s (from
// the page's first byte, once the viewer has read the tables); the rank that diverged is
// named and marked, and its layers x steps heatmap is the one shown; the sharded
// gradient (a part on every rank) is shown whole, its norm merged from the 512 parts;
// before the step it
// diverged, no rank stands out; clicking another rank's row shows its heatmap, and a
// step change redraws, each within a second. Saves screenshots. Exit 0 when every check
// passed, 1 otherwise, 77 without chromium.
import fs from 'node:fs';
import path from 'node:path';
import { check, finish, launchBrowser, waitFor, startProcess, testSetup, workFolder } from './lib/harness.mjs';

const { bin, artifacts, chromiumPath } = testSetup();
const { work, runtime } = workFolder('ts-manyranks-');
const parent = path.join(work, 'runs');
const env = { ...process.env, TENSORSCOPE_RUNTIME_DIR: runtime };
const children = [];
const cleanup = () => { for (const c of children) { try { c.kill('SIGKILL'); } catch (e) { /* gone */ } } };
process.on('exit', cleanup);

const NODES = 64, PER_NODE = 8, STEPS = 40, LAYERS = 24;
const ODD_RANK = 301, ODD_LAYER = 7, ODD_STEP = 30;
const HEADER = 'step,rank,track,order,stream,kind,numel,l2,max_abs,mean,std,nan_count,inf_count,zero_fraction,' +
  'update_ratio,steps,cast_format,dynamic_range,underflow_fraction,overflow_fraction,shard,whole_numel,dtype';
const RANKS = NODES * PER_NODE, SHARDED = 'net.embed.weight.grad';
// The norm of rank r's part of the sharded gradient at `step` (FSDP2: a part on every rank),
// and of the whole tensor.
const partNorm = (rank, step) => 1e-3 * (1 + (rank % 7)) * (1 + step / STEPS);
const wholeNorm = (step) => Math.sqrt([...Array(RANKS).keys()].reduce((sum, r) => sum + partNorm(r, step) ** 2, 0));

// A rank's table: every layer's output, then the gradients as backward gives them (the
// embedding's gradient, sharded, last); each value with a rank's own few percent of
// noise. And its run_info, as the daemon writes it: every rank of one rendezvous.
function writeTable(dir, rank) {
  const lines = [HEADER];
  let seed = rank * 7919 + 1;
  const noise = () => { seed = (seed * 48271) % 2147483647; return 1 + 0.04 * (seed / 2147483647 - 0.5); };
  for (let step = 0; step < STEPS; ++step) {
    let order = 0;
    for (const grad of [false, true]) {
      for (let i = 0; i < LAYERS; ++i) {
        const m = grad ? LAYERS - 1 - i : i;
        const odd = grad && rank === ODD_RANK && m === ODD_LAYER && step >= ODD_STEP ? 50 : 1;
        const v = (1 + m) * (grad ? 1e-3 : 1) * noise() * odd;
        lines.push(`${step},${rank},net,${order++},net.${m}${grad ? '.grad' : ''},${grad ? 'gradient' : 'activation'},` +
          `64,${(v * 8).toPrecision(5)},${(v * 3).toPrecision(5)},0,${v.toPrecision(5)},0,0,0.125,,1,,,,,,,float32`);
      }
    }
    const g = partNorm(rank, step);
    lines.push(`${step},${rank},net,${order++},${SHARDED},parameter_gradient,64,${g},${g / 4},0,${g / 8},0,0,0,,1,,,,,` +
      `S0@${rank}/${RANKS},${64 * RANKS},float32`);
  }
  fs.writeFileSync(path.join(dir, 'summaries', `rank${rank}_pid${1000 + rank}.csv`), lines.join('\n') + '\n');
  fs.writeFileSync(path.join(dir, 'run_info', `rank${rank}_pid${1000 + rank}.json`), JSON.stringify({
    registered_unix_ms: 1795968563000 + rank, env: { MASTER_ADDR: 'node00', MASTER_PORT: '29500', WORLD_SIZE: String(RANKS) } }));
}
for (let node = 0; node < NODES; ++node) {
  const session = path.join(parent, `node${String(node).padStart(2, '0')}`, 'exp');
  fs.mkdirSync(path.join(session, 'summaries'), { recursive: true });
  fs.mkdirSync(path.join(session, 'run_info'), { recursive: true });
  fs.writeFileSync(path.join(session, 'index.json'), '{"files":[]}\n');
  for (let k = 0; k < PER_NODE; ++k) writeTable(session, node * PER_NODE + k);
}

const consoleErrors = [];
const { browser, openPage } = await launchBrowser(chromiumPath, consoleErrors);
try {
  const viewer = startProcess(children, path.join(bin, 'tensorscope'), ['view', '--dir', parent], env);
  const url = await viewer.firstLine(15000);
  // The viewer reads the tables at the first request: made before the page is timed.
  const token = /t=([0-9a-f]+)/.exec(url)[1];
  const readStart = Date.now();
  const first = await (await fetch(new URL(`api/overview/ranks?t=${token}&metric=grad_norm`, url))).json();
  check(first.ranks.length === NODES * PER_NODE,
    `the viewer reads ${NODES * PER_NODE} ranks' tables (${first.ranks.length}, ${Date.now() - readStart} ms)`);
  const page = await openPage(`${url.split('#')[0]}#t=${token}&page=overview&metric=grad_norm`, 1600, 1000);
  const panel = () => page.evaluate(() => {
    const c = document.querySelector('#overview-many canvas');
    return {
      ranks: c && c.ranks ? c.ranks.data.ranks.length : 0,
      step: c && c.ranks ? c.ranks.data.step : null,
      drawnAt: c && c.ranks ? performance.now() : null,
      outliers: document.getElementById('overview-outliers') ? document.getElementById('overview-outliers').textContent : '',
      tables: [...document.querySelectorAll('#overview-ranks h3')].map((h) => h.textContent),
    };
  });
  await waitFor(async () => (await panel()).ranks === NODES * PER_NODE, 30000, 'the ranks panel shows every rank');
  const opened = await page.evaluate(() => performance.now());  // (an upper bound: the panel was drawn before)
  check(opened < 2000, `the page opens with all ${NODES * PER_NODE} ranks in under 2 s (${opened.toFixed(0)} ms)`);
  const oddName = `rank ${ODD_RANK} · node${String(Math.floor(ODD_RANK / PER_NODE)).padStart(2, '0')}/exp`;
  await waitFor(async () => (await panel()).outliers.includes(oddName), 15000, `the rank that diverged is named (${oddName})`);
  let s = await panel();
  check(!/stand out: .*,/.test(s.outliers), `and only it (${s.outliers})`);
  await waitFor(async () => {
    s = await panel();
    const ranks = s.tables.filter((t) => !t.startsWith('whole tensors'));
    return ranks.length === 1 && ranks[0].includes(`rank ${ODD_RANK}`);
  }, 15000, `its layers x steps heatmap is the one shown (${s.tables.join(' | ')})`);
  const at = await page.evaluate((r, stream) => window.tensorscopeView.rankCellCenter(r, stream), ODD_RANK, `net.${ODD_LAYER}.grad`);
  await page.mouse.move(at.x, at.y);
  const tip = await page.evaluate(() => document.getElementById('overview-tip').textContent);
  check(tip.includes(`net.${ODD_LAYER}.grad`) && tip.includes(`rank ${ODD_RANK}`) && tip.includes('outlier'),
    `hovering its cell names it as an outlier (${JSON.stringify(tip)})`);
  await page.screenshot({ path: path.join(artifacts, 'overview_512_ranks.png') });
  // The sharded gradient whole, merged from the 512 ranks' parts on 64 nodes.
  s = await panel();
  check(s.tables.some((t) => t.startsWith(`whole tensors · merged from the parts of ranks 0–${RANKS - 1} · 1 tensor`)),
    `the whole tensors' heatmap is shown (${s.tables.join(' | ')})`);
  const cell = await page.evaluate((stream, step) => {
    document.querySelector('.overview-rank[data-key^="whole"]').scrollIntoView();
    return window.tensorscopeView.cellCenter('whole', stream, step);
  }, SHARDED, 20);
  await page.mouse.move(cell.x, cell.y);
  const wholeTip = await page.evaluate(() => document.getElementById('overview-tip').textContent);
  check(wholeTip.includes(`: ${Number(wholeNorm(20).toPrecision(4))}`) && wholeTip.includes(`ranks 0–${RANKS - 1}`),
    `its cell is the whole gradient's norm at step 20, ${wholeNorm(20).toPrecision(4)} (${JSON.stringify(wholeTip)})`);
  await page.screenshot({ path: path.join(artifacts, 'overview_512_ranks_whole.png') });
  await page.evaluate(() => window.scrollTo(0, 0));

  // A click on another rank's row: its heatmap too, within a second.
  const other = await page.evaluate((r, stream) => window.tensorscopeView.rankCellCenter(r, stream), 17, 'net.3.grad');
  let t0 = Date.now();
  await page.mouse.click(other.x, other.y);
  await waitFor(async () => (await panel()).tables.some((t) => t.includes('rank 17 ')), 10000, 'a click on rank 17 shows its heatmap');
  check(Date.now() - t0 < 1000 + 300, `within a second (${Date.now() - t0} ms)`);
  // Before the step it diverged, no rank stands out.
  t0 = Date.now();
  await page.evaluate((step) => {
    const slider = document.getElementById('overview-step');
    slider.value = String(step);
    slider.dispatchEvent(new Event('input'));
    slider.dispatchEvent(new Event('change'));
  }, ODD_STEP - 5);
  await waitFor(async () => (await panel()).step === ODD_STEP - 5, 10000, `the slider goes to step ${ODD_STEP - 5}`);
  check(Date.now() - t0 < 1000 + 300, `redrawn within a second (${Date.now() - t0} ms)`);
  s = await panel();
  check(s.outliers.includes('no rank stands out'), `before step ${ODD_STEP} no rank stands out (${s.outliers})`);
  await page.screenshot({ path: path.join(artifacts, 'overview_512_ranks_before.png') });
  viewer.kill('SIGTERM');
  await viewer.exited(10000);
} catch (e) {
  check(false, `unexpected: ${e.stack || e}`);
} finally {
  await browser.close();
}
finish(consoleErrors, cleanup, work);
