// classes.js — the classes of pca / tsne frames (tensors pushed with labels): pointing
// at a class's legend entry picks out its points.
// A frame's legend (header.legend: the plot's box and each class's legend entry, as
// fractions of the frame, with the class's colour) lets the pointer pick out a class:
// over its legend entry, the tile shows the frame with every pixel of the plot that is
// not near the class's colour dimmed.
const DIM = [28, 30, 34];  // the frames' background
export function legendEntryAt(t, pointer) {
  const img = t.el && t.el.querySelector('img');
  if (!t.legend || !img || !img.naturalWidth) return -1;
  const r = img.getBoundingClientRect();  // object-fit: contain in the tile's box
  const scale = Math.min(r.width / img.naturalWidth, r.height / img.naturalHeight);
  const w = img.naturalWidth * scale, h = img.naturalHeight * scale;
  const x = (pointer.clientX - r.left - (r.width - w) / 2) / w, y = (pointer.clientY - r.top - (r.height - h) / 2) / h;
  return t.legend.classes.findIndex((c) => x >= c.box[0] && x <= c.box[2] && y >= c.box[1] && y <= c.box[3]);
}
export function pointAtLegend(t, e) {
  t.pointer = { clientX: e.clientX, clientY: e.clientY };  // kept for the frames that follow
  const index = legendEntryAt(t, t.pointer);
  if (index !== (t.highlighted ?? -1)) highlightClass(t, index);
}
export function highlightClass(t, index) {
  const canvas = t.el && t.el.querySelector('canvas.highlight');
  const img = t.el && t.el.querySelector('img');
  if (!canvas || !img) return;
  const entry = t.legend && index >= 0 ? t.legend.classes[index] : null;
  t.highlighted = entry ? index : -1;
  if (!entry || !img.naturalWidth) { canvas.hidden = true; return; }
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(img, 0, 0);
  const [x0, y0, x1, y1] = t.legend.plot.map((v, i) => Math.round(v * (i % 2 ? canvas.height : canvas.width)));
  if (x1 > x0 && y1 > y0) {
    const data = ctx.getImageData(x0, y0, x1 - x0, y1 - y0);
    const d = data.data, c = entry.color;
    for (let i = 0; i < d.length; i += 4) {
      const far = Math.abs(d[i] - c[0]) + Math.abs(d[i + 1] - c[1]) + Math.abs(d[i + 2] - c[2]) > 90;
      if (far) for (let k = 0; k < 3; k++) d[i + k] = Math.round(d[i + k] * 0.2 + DIM[k] * 0.8);
    }
    ctx.putImageData(data, x0, y0);
  }
  const b = entry.box;  // the legend entry, outlined
  ctx.strokeStyle = `rgb(${entry.color.join(',')})`;
  ctx.lineWidth = Math.max(1, canvas.width / 320);
  ctx.strokeRect(b[0] * canvas.width, b[1] * canvas.height, (b[2] - b[0]) * canvas.width, (b[3] - b[1]) * canvas.height);
  canvas.hidden = false;
}
