// videos.js — finished videos: their list (filtered as the tiles are), played or shown
// in the page, and single frames of them for the tiles when the cursor is on a step the
// live history no longer holds.
import { $, fileUrl, state } from './state.js';
import { filterFn, showImage } from './tiles.js';

// Frames of finished videos: a small pool of hidden video elements seeks each to the frame
// and copies it into the tile (the newest request per tile wins).
const extractor = { queue: [], busy: 0, latest: new Map() };
export function requestVideoFrame(m) {
  extractor.latest.set(m.tile, m);
  extractor.queue.push(m);
  pumpExtractor();
}
function pumpExtractor() {
  while (extractor.busy < 3 && extractor.queue.length) {
    const m = extractor.queue.shift();
    if (extractor.latest.get(m.tile) !== m) continue;
    extractor.busy++;
    extractFrame(m).catch(() => {}).finally(() => { extractor.busy--; pumpExtractor(); });
  }
}
function extractFrame(m) {
  return new Promise((resolve, reject) => {
    const v = document.createElement('video');
    v.muted = true;
    v.preload = 'auto';
    const done = (ok) => { v.removeAttribute('src'); v.load(); ok ? resolve() : reject(); };
    const timer = setTimeout(() => done(false), 15000);
    v.onerror = () => { clearTimeout(timer); done(false); };
    v.onloadedmetadata = () => {
      const per = v.duration / Math.max(1, m.frames);
      v.currentTime = Math.min(v.duration, (m.frame + 0.5) * per);
    };
    v.onseeked = () => {
      clearTimeout(timer);
      const t = state.tiles.get(m.tile);
      if (!t || extractor.latest.get(m.tile) !== m) return done(true);
      const c = document.createElement('canvas');
      c.width = v.videoWidth; c.height = v.videoHeight;
      c.getContext('2d').drawImage(v, 0, 0);
      c.toBlob((blob) => {
        if (blob && extractor.latest.get(m.tile) === m) {
          state.stats.videoFrames++;
          showImage(t, blob, m.step);
        }
        done(true);
      }, 'image/jpeg', 0.9);
    };
    v.src = fileUrl(m.source, m.path);
  });
}

// ---- finished videos ----
export async function loadVideos() {
  const res = await fetch(`api/videos?t=${encodeURIComponent(state.token)}`);
  if (!res.ok) return;
  const data = await res.json();
  const panel = $('videos-panel');
  const table = document.createElement('table');
  const keep = filterFn();
  let n = 0;
  for (const s of data.sources) {
    for (const f of s.files) {
      if (!keep(f)) continue;
      n++;
      const tr = table.insertRow();
      tr.insertCell().textContent = f.stream;
      tr.insertCell().textContent = `rank ${f.rank} · ${f.device} · ${f.mode}`;
      tr.insertCell().textContent = `steps ${f.first_step}–${f.last_step} (${f.frames} frames)`;
      const png = f.path.endsWith('.png');
      const play = document.createElement('button');
      play.textContent = png ? 'show' : 'play';
      play.onclick = () => {
        if (png) {
          const img = document.createElement('img');
          img.src = fileUrl(s.source, f.path); img.alt = f.path;
          play.replaceWith(img);
          return;
        }
        const v = document.createElement('video');
        v.controls = true; v.src = fileUrl(s.source, f.path);
        play.replaceWith(v);
        v.play().catch(() => {});
      };
      tr.insertCell().appendChild(play);
      const a = document.createElement('a');
      a.href = fileUrl(s.source, f.path); a.download = f.path.split('/').pop(); a.textContent = 'download';
      tr.insertCell().appendChild(a);
    }
  }
  panel.replaceChildren(n ? table : document.createTextNode('No finished video yet (a video is listed once its segment is finalized).'));
}
