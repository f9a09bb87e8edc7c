// The overview of a long finished run in a real browser: two ranks of 20,000 summarised
// steps each (rank 1's fifth module turns NaN at step 15,000), written as the daemon
// writes them, shown by `tensorscope view --dir`, in Debian's chromium driven headless by
// puppeteer-core.
//
//   node tests/browser/long_run_test.mjs --bin build/bin --artifacts DIR [--chromium PATH]
//
// Checks: the page lands on the overview and draws both ranks whole (their columns
// merged to fit the page), the tables read over a few requests; the banner names the
// first NaN and the first divergence from a reference run; hovering the NaN cell names
// it; the viewer's memory stays bounded (a page's first request, fewer columns than the
// run has, once made it loop allocating without end). Saves a screenshot. Exit 0 when every check passed, 1 otherwise, 77 without
// chromium.
import fs from 'node:fs';
import path from 'node:path';
import { check, finish, launchBrowser, waitFor, startProcess, testSetup, workFolder } from './lib/harness.mjs';

const { bin, artifacts, chromiumPath } = testSetup();
const { work, runtime, output } = workFolder('ts-longrun-');
const sessionDir = path.join(output, 'longrun');
const env = { ...process.env, TENSORSCOPE_RUNTIME_DIR: runtime };
const children = [];
const cleanup = () => { for (const c of children) { try { c.kill('SIGKILL'); } catch (e) { /* gone */ } } };
process.on('exit', cleanup);

const STEPS = 20000, BAD_STEP = 15000, BAD_RANK = 1, BAD_MODULE = 'net.4', MODULES = 6;
const HEADER = 'step,rank,track,order,stream,kind,numel,l2,max_abs,mean,std,nan_count,inf_count,zero_fraction,update_ratio';

// A rank's summary table as the daemon writes it: outputs in forward order, then their
// gradients; from BAD_STEP on, rank BAD_RANK's module 4 and everything after it is NaN.
function writeTable(rank, pid) {
  const file = fs.openSync(path.join(sessionDir, 'summaries', `rank${rank}_pid${pid}.csv`), 'w', 0o600);
  fs.writeSync(file, `${HEADER}\n`);
  let chunk = [];
  for (let step = 0; step < STEPS; ++step) {
    const bad = rank === BAD_RANK && step >= BAD_STEP;
    let order = 0;
    for (const grad of [false, true]) {
      for (let m = 0; m < MODULES; ++m) {
        const name = `net.${m}${grad ? '.grad' : ''}`;
        const nan = bad && m >= 4 ? 32 : 0;
        const scale = (1 + m) * (grad ? 1e-3 : 1) * (1 + 0.3 * Math.sin(step / 500));
        const std = nan ? 0 : scale;
        chunk.push(`${step},${rank},net,${order++},${name},${grad ? 'gradient' : 'activation'},32,` +
          `${(std * 5.6).toPrecision(6)},${(std * 3).toPrecision(6)},0.01,${std.toPrecision(6)},${nan},0,0.125,`);
      }
    }
    if (chunk.length > 20000) { fs.writeSync(file, `${chunk.join('\n')}\n`); chunk = []; }
  }
  if (chunk.length) fs.writeSync(file, `${chunk.join('\n')}\n`);
  fs.closeSync(file);
}

fs.mkdirSync(path.join(sessionDir, 'summaries'), { recursive: true });
writeTable(0, 101);
writeTable(1, 102);
fs.writeFileSync(path.join(sessionDir, 'index.json'), '{"files":[]}\n');
fs.writeFileSync(path.join(sessionDir, 'anomalies.jsonl'),
  '{"tensorscope":"anomalies","version":1}\n' +
  JSON.stringify({ type: 'non_finite', step: BAD_STEP, rank: BAD_RANK, pid: 102, track: 'net', stream: BAD_MODULE,
    kind: 'activation', message: `first non-finite value: step ${BAD_STEP}, rank ${BAD_RANK}, ${BAD_MODULE}`,
    details: { nan_count: 32 } }) + '\n' +
  JSON.stringify({ type: 'divergence', step: BAD_STEP - 5, rank: 0, pid: 101, track: 'net', stream: 'net.2',
    kind: 'activation', message: `first divergence from the reference: step ${BAD_STEP - 5}, rank 0, net.2`,
    details: { metric: 'l2', order: 2 } }) + '\n');
const tableBytes = fs.statSync(path.join(sessionDir, 'summaries', 'rank0_pid101.csv')).size;

// The viewer's resident memory in MiB (Linux).
function residentMiB(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : -1;
}

const consoleErrors = [];
const { browser, openPage } = await launchBrowser(chromiumPath, consoleErrors);
try {
  const viewerChild = startProcess(children, path.join(bin, 'tensorscope'), ['view', '--dir', sessionDir], env);
  const url = await viewerChild.firstLine(15000);
  const viewerPid = children[children.length - 1].pid;
  const page = await openPage(url, 1600, 900);
  const state = () => page.evaluate(() => ({
    page: window.tensorscopeView.page,
    canvases: [...document.querySelectorAll('#overview-ranks canvas')].map((c) => c.overview ? c.overview.cols : 0),
    note: document.getElementById('overview-note').textContent,
    banner: document.getElementById('banner').hidden ? '' : document.getElementById('banner-text').textContent,
  }));
  await waitFor(async () => (await state()).page === 'overview', 60000, 'the page lands on the overview');
  await waitFor(async () => {
    const s = await state();
    return s.canvases.length === 2 && s.canvases.every((c) => c > 0) && s.note === '';
  }, 120000, `both ranks drawn, their ${(2 * tableBytes / 1048576).toFixed(0)} MiB of tables read`);
  const s = await state();
  check(s.canvases.every((c) => c >= 300 && c <= 2000), `the whole run in columns that fit the page (${s.canvases.join(', ')})`);
  await waitFor(async () => (await state()).banner.includes(`First NaN/Inf: step ${BAD_STEP}, rank ${BAD_RANK}, ${BAD_MODULE}`),
    30000, `the banner names the first NaN: step ${BAD_STEP}, rank ${BAD_RANK}, ${BAD_MODULE}`);
  check((await state()).banner.includes(`First divergence from the reference: step ${BAD_STEP - 5}, rank 0, net.2`),
    'the banner names the first divergence from the reference run too');
  await page.evaluate(() => document.querySelector('#overview-metrics button[data-metric="act_std"]').click());
  let tip = '';
  await waitFor(async () => {
    const at = await page.evaluate((r, m, t) => window.tensorscopeView.cellCenter(r, m, t), BAD_RANK, BAD_MODULE, BAD_STEP + 100);
    if (!at) return false;
    await page.mouse.move(at.x, at.y);
    tip = await page.evaluate(() => document.getElementById('overview-tip').textContent);
    return tip.includes('NaN/Inf') && tip.includes(BAD_MODULE);
  }, 30000, 'hovering rank 1\'s module 4 after the NaN names it as NaN/Inf');
  const before = await page.evaluate((r, m, t) => window.tensorscopeView.cellCenter(r, m, t), BAD_RANK, BAD_MODULE, 1000);
  check(!!before, 'a cell early in the run is there too');
  await page.screenshot({ path: path.join(artifacts, 'overview_long_run.png') });
  const rss = residentMiB(viewerPid);
  check(rss > 0 && rss < 1024, `the viewer's memory stays bounded (${rss.toFixed(0)} MiB resident)`);
  // A script (not the page: its console stays clean) asking for the fewest columns, the
  // most, and out of range: answered at once, bounded.
  const token = /t=([0-9a-f]+)/.exec(url)[1];
  for (const q of ['columns=16', 'columns=2000', 'columns=601&metric=grad_norm', 'columns=15', 'columns=99999999999999999999']) {
    const r = await fetch(new URL(`api/overview?t=${token}&${q}`, url), { signal: AbortSignal.timeout(60000) });
    const res = { status: r.status, bytes: (await r.text()).length };
    const bad = /=15$|=9{5}/.test(q);
    check(bad ? res.status === 400 : res.status === 200 && res.bytes < 64 << 20, `/api/overview?${q}: ${res.status}, ${res.bytes} bytes`);
  }
  check(residentMiB(viewerPid) < 1024, 'still bounded after them');
  viewerChild.kill('SIGTERM');
  await viewerChild.exited(10000);
} catch (e) {
  check(false, `unexpected: ${e.stack || e}`);
} finally {
  await browser.close();
}
finish(consoleErrors, cleanup, work);
