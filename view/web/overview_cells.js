// overview_cells.js — a matrix of values drawn as one heatmap into a canvas's plot
// rectangle, a cell a colour of the overview's scale (overview_colors.js): what the
// per-rank heatmaps (overview.js) and the ranks panel (overview_ranks.js) draw.
import { cellColor } from './overview_colors.js';

// values[r][c] (null: no value) and nonfinite[r][c] (1: NaN/Inf) into `plot` ({x, y, w, h}) of `ctx`.
export function paintCells(ctx, plot, values, nonfinite, scale) {
  const rows = values.length, cols = rows ? values[0].length : 0;
  if (!rows || !cols) return;
  const img = ctx.createImageData(cols, rows);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const rgb = cellColor(scale, values[r][c], nonfinite[r][c]);
      const o = 4 * (r * cols + c);
      img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
    }
  }
  const tmp = document.createElement('canvas');
  tmp.width = cols; tmp.height = rows;
  tmp.getContext('2d').putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(tmp, plot.x, plot.y, plot.w, plot.h);
}
