// What the browser tests share: their command line and work folder, checks that count
// failures, waits with deadlines, child processes with their output kept, headless
// chromium with its pages' errors collected, and the steps of finished videos read from
// disk.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

// A browser test's command line (--bin, --artifacts, --chromium, and --python-path,
// --python for tests with a Python process), with defaults; exits 77 (ctest: skipped)
// when chromium is missing or, with `torch`, the python cannot import torch. Makes the
// artifacts folder.
export function testSetup({ torch = false } = {}) {
  const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
    return acc;
  }, []));
  const setup = {
    bin: path.resolve(args.bin || 'build/bin'),
    pythonPath: path.resolve(args['python-path'] || 'build/python'),
    python: args.python || '/usr/bin/python3',
    artifacts: path.resolve(args.artifacts || 'build/browser_artifacts'),
    chromiumPath: args.chromium || '/usr/bin/chromium',
  };
  if (!fs.existsSync(setup.chromiumPath)) {
    console.log(`SKIP: no chromium at ${setup.chromiumPath}`);
    process.exit(77);
  }
  if (torch && spawnSync(setup.python, ['-c', 'import torch'], { stdio: 'ignore' }).status !== 0) {
    console.log(`SKIP: ${setup.python} has no torch`);
    process.exit(77);
  }
  fs.mkdirSync(setup.artifacts, { recursive: true });
  return setup;
}

// A work folder for one test (`prefix` names it): { work, runtime (mode 0700, for
// TENSORSCOPE_RUNTIME_DIR), output (the daemon's --output) }.
export function workFolder(prefix) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const runtime = path.join(work, 'rt');
  fs.mkdirSync(runtime, { mode: 0o700 });
  return { work, runtime, output: path.join(work, 'out') };
}

let failed = 0;
export function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failed++;
  return ok;
}
export const failures = () => failed;

// Polls `condition` (sync or async) until true; throws naming `what` at the deadline.
export async function waitFor(condition, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return check(true, what);
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// A child process whose output is kept (printed when the test fails) and whose first
// stdout line can be awaited.
export function startProcess(children, file, args, env) {
  const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '', err = '';
  const exit = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  process.on('exit', () => { if (failed) console.log(`--- ${path.basename(file)} ${args.join(' ')}\n${out}${err}`.slice(0, 4000)); });
  return {
    kill: (signal) => child.kill(signal),
    exited: async (timeoutMs) => {
      const r = await Promise.race([exit, new Promise((resolve) => setTimeout(() => resolve(null), timeoutMs))]);
      if (!r) throw new Error(`${path.basename(file)} did not exit within ${timeoutMs} ms`);
      return r;
    },
    firstLine: async (timeoutMs) => {
      const deadline = Date.now() + timeoutMs;
      while (!out.includes('\n')) {
        if (Date.now() > deadline) throw new Error(`${path.basename(file)} printed nothing in ${timeoutMs} ms: ${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return out.split('\n')[0];
    },
  };
}

// The steps of every finished video of a session, by "stream|device|rank|mode", from its
// index.json and steps/ files.
export function readVideoSteps(sessionDir) {
  const index = JSON.parse(fs.readFileSync(path.join(sessionDir, 'index.json'), 'utf8'));
  const steps = new Map();
  for (const f of index.files) {
    const text = fs.readFileSync(path.join(sessionDir, 'steps', `${f.path}.steps`), 'utf8');
    const lines = text.split('\n').slice(2).filter((l) => l !== '').map(Number).slice(0, f.frames);
    const key = `${f.stream}|${f.device}|${f.rank}|${f.mode}`;
    steps.set(key, (steps.get(key) || []).concat(lines));
  }
  for (const list of steps.values()) list.sort((a, b) => a - b);
  return steps;
}

// The largest step <= `step` among the finished frames of `tile`, or -1.
export function expectedStepAtOrBefore(videoSteps, tile, step) {
  const list = videoSteps.get(`${tile.stream}|${tile.device}|${tile.rank}|${tile.mode}`) || [];
  let best = -1;
  for (const s of list) if (s <= step && s > best) best = s;
  return best;
}

// Headless chromium at `executablePath`; openPage(address, width, height) opens a page
// whose console errors, page errors and failed requests go to `errors` (a test checks it
// stays empty).
export async function launchBrowser(executablePath, errors) {
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--autoplay-policy=no-user-gesture-required'],
  });
  const openPage = async (address, width, height) => {
    const page = await browser.newPage();
    await page.setViewport({ width, height });
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
    await page.goto(address, { waitUntil: 'load' });
    return page;
  };
  return { browser, openPage };
}

// The end of a browser test: no console error on its pages, its processes and work
// folder gone, PASS or FAIL printed, exit 0 when every check passed, else 1.
export function finish(errors, cleanup, work) {
  check(errors.length === 0, `no console error (${errors.slice(0, 5).join(' / ')})`);
  cleanup();
  fs.rmSync(work, { recursive: true, force: true });
  console.log(failed === 0 ? 'PASS' : `FAIL: ${failed} check(s) failed`);
  process.exit(failed === 0 ? 0 : 1);
}
