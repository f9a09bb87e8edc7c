// The classes of a projection in a real browser: a daemon, a Python process pushing rows
// of three labelled clusters as a pca stream, `tensorscope view`, and Debian's chromium
// driven headless by puppeteer-core.
//
//   node tests/browser/classes_test.mjs --bin build/bin --python-path build/python
//        --artifacts DIR [--python /usr/bin/python3] [--chromium PATH]
//
// Checks: the tile's frames come with their class legend; pointing at a class's legend
// entry picks that class out (its points keep their colour, the other classes' points
// are dimmed, the entry is outlined); moving away shows the frame as it is. Saves a
// screenshot. Exit 0 when every check passed, 1 otherwise, 77 when chromium or torch is
// missing.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, finish, launchBrowser, waitFor, startProcess, testSetup, workFolder } from './lib/harness.mjs';

const { bin, pythonPath, python, artifacts, chromiumPath } = testSetup({ torch: true });
const { work, runtime, output } = workFolder('ts-classes-');
const session = `classes${process.pid}`;
const env = { ...process.env, TENSORSCOPE_RUNTIME_DIR: runtime, PYTHONPATH: pythonPath };
fs.writeFileSync(path.join(work, 'config.yaml'), 'live:\n  max_fps: 4\n');

const children = [];
const cleanup = () => { for (const c of children) { try { c.kill('SIGKILL'); } catch (e) { /* gone */ } } };
process.on('exit', cleanup);

const producer = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lib', 'labelled_clusters.py');
startProcess(children, path.join(bin, 'tensorscoped'),
  ['--config', path.join(work, 'config.yaml'), '--session', session, '--output', output], env);
await waitFor(() => fs.existsSync(path.join(runtime, `${session}.sock`)), 20000, 'the daemon listens');
startProcess(children, python, [producer, session, '2000'], env);
const viewer = startProcess(children, path.join(bin, 'tensorscope'), ['view', '--session', session], env);
const url = await viewer.firstLine(15000);

const consoleErrors = [];
const { browser, openPage } = await launchBrowser(chromiumPath, consoleErrors);
try {
  const page = await openPage(url, 900, 700);
  await waitFor(() => page.evaluate(() => {
    const t = [...window.tensorscopeView.tiles.values()].find((x) => x.stream === 'emb');
    const img = t && t.el && t.el.querySelector('img');
    return Boolean(t && t.legend && img && img.naturalWidth > 0 && img.complete);
  }), 60000, 'the pca tile shows a frame with its class legend');
  const legend = await page.evaluate(() => [...window.tensorscopeView.tiles.values()].find((x) => x.stream === 'emb').legend);
  check(JSON.stringify(legend.classes.map((c) => c.name)) === '["ant","bee","cow"]',
    `the legend names the classes (${legend.classes.map((c) => c.name).join(', ')})`);

  // Counts, in the plot's box of the tile's frame (as drawn) and of its highlight canvas,
  // the pixels near each class's colour; and where the pointer goes for entry `index`.
  const measure = (index) => page.evaluate((index) => {
    const t = [...window.tensorscopeView.tiles.values()].find((x) => x.stream === 'emb');
    const img = t.el.querySelector('img');
    const canvas = t.el.querySelector('canvas.highlight');
    if (!img.complete || !img.naturalWidth || !t.legend) return null;  // a new frame loading: ask again
    const near = (source, c) => {
      const w = img.naturalWidth, h = img.naturalHeight;
      const tmp = document.createElement('canvas');
      tmp.width = w; tmp.height = h;
      const ctx = tmp.getContext('2d');
      ctx.drawImage(source, 0, 0);
      const [x0, y0, x1, y1] = t.legend.plot.map((v, i) => Math.round(v * (i % 2 ? h : w)));
      const d = ctx.getImageData(x0, y0, x1 - x0, y1 - y0).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) {
        if (Math.abs(d[i] - c[0]) + Math.abs(d[i + 1] - c[1]) + Math.abs(d[i + 2] - c[2]) < 40) n++;
      }
      return n;
    };
    const r = img.getBoundingClientRect();
    const scale = Math.min(r.width / img.naturalWidth, r.height / img.naturalHeight);
    const w = img.naturalWidth * scale, h = img.naturalHeight * scale;
    const box = t.legend.classes[index].box;
    return {
      pointer: { x: r.left + (r.width - w) / 2 + (box[0] + box[2]) / 2 * w, y: r.top + (r.height - h) / 2 + (box[1] + box[3]) / 2 * h },
      hidden: canvas.hidden,
      frame: t.legend.classes.map((c) => near(img, c.color)),
      highlight: canvas.hidden ? null : t.legend.classes.map((c) => near(canvas, c.color)),
    };
  }, index);
  const measured = async (index, what) => {
    let m = null;
    await waitFor(async () => (m = await measure(index)) !== null, 30000, what);
    return m;
  };

  const before = await measured(1, 'the frame can be measured');
  check(before.hidden, 'no class is picked out before the pointer comes');
  check(before.frame.every((n) => n > 50), `every class has points in its colour (${before.frame.join(', ')})`);
  await page.mouse.move(before.pointer.x, before.pointer.y);
  let picked = null;
  await waitFor(async () => (picked = await measure(1)) !== null && !picked.hidden, 30000,
    'pointing at "bee" in the legend picks it out');
  check(picked.highlight[1] > 0.5 * picked.frame[1], `bee's points keep their colour (${picked.highlight[1]} of ${picked.frame[1]})`);
  check(picked.highlight[0] < 0.1 * picked.frame[0] && picked.highlight[2] < 0.1 * picked.frame[2],
    `the other classes are dimmed (ant ${picked.highlight[0]} of ${picked.frame[0]}, cow ${picked.highlight[2]} of ${picked.frame[2]})`);
  const tile = await page.$('figure.tile');
  await tile.screenshot({ path: path.join(artifacts, 'classes_hover.png') });
  await page.mouse.move(5, 5);
  await waitFor(async () => { const m = await measure(1); return m !== null && m.hidden; }, 30000,
    'moving away shows the frame as it is');

  // A pointer that comes to rest on an entry while the tile has no legend to match it
  // against (a frame still loading, the first labelled frame not yet come) picks the
  // class out once the next frame comes, without moving again.
  const shown = await page.evaluate(() => {
    const t = [...window.tensorscopeView.tiles.values()].find((x) => x.stream === 'emb');
    t.legend = null;
    return t.shownStep;
  });
  await page.mouse.move(before.pointer.x, before.pointer.y);
  await waitFor(async () => (picked = await measure(1)) !== null && !picked.hidden
    && await page.evaluate((s) => [...window.tensorscopeView.tiles.values()].find((x) => x.stream === 'emb').shownStep !== s, shown),
  30000, 'the next frame picks out "bee" under the resting pointer');
  check(picked.highlight[1] > 0.5 * picked.frame[1] && picked.highlight[0] < 0.1 * picked.frame[0],
    `the resting pointer picks bee out (bee ${picked.highlight[1]} of ${picked.frame[1]}, ant ${picked.highlight[0]} of ${picked.frame[0]})`);
} catch (e) {
  check(false, `the classes test ran to its end (${e.message})`);
}
await browser.close();
finish(consoleErrors, cleanup, work);
