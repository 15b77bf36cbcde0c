// A line chart drawn as inline SVG, without a chart library: time on
// the x axis, one line per series, a y axis from 0 to a rounded maximum
// with labels in the series' unit, and a readout of every series' value
// at the time under the pointer.

import {el, svg} from './dom.js';
import {clock} from './format.js';

const W = 720;
const H = 220;
const PAD = {left: 64, right: 16, top: 12, bottom: 28};

// lineChart({series, format, empty}) returns an element holding the
// chart. series is [{name, points: [[ms, value], ...]}] (a value of null
// is a gap); format(value) labels the y axis and the readout.
export function lineChart({series, format = String, empty = 'No samples yet.'}) {
  const all = series.flatMap((s) => s.points.filter((p) => p[1] !== null && p[1] !== undefined));
  const box = el('figure', {class: 'chart'});
  if (all.length === 0) {
    box.append(el('p', {class: 'muted empty'}, empty));
    return box;
  }
  let t0 = Math.min(...all.map((p) => p[0]));
  let t1 = Math.max(...all.map((p) => p[0]));
  if (t1 === t0) {
    t0 -= 30e3;
    t1 += 30e3;
  }
  const top = niceMax(Math.max(...all.map((p) => p[1])));
  const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * (W - PAD.left - PAD.right);
  const y = (v) => PAD.top + (1 - v / top) * (H - PAD.top - PAD.bottom);

  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, class: 'chart-svg', role: 'img', 'aria-label': series.map((s) => s.name).join(', ')});
  // Horizontal grid lines and y labels at 0, 1/4, ... of the top.
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    root.append(
      svg('line', {x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v), class: i === 0 ? 'axis' : 'grid'}),
      svg('text', {x: PAD.left - 6, y: y(v) + 4, class: 'tick', 'text-anchor': 'end'}, format(v)),
    );
  }
  // Time labels: five across.
  for (let i = 0; i <= 4; i++) {
    const t = t0 + ((t1 - t0) * i) / 4;
    root.append(svg('text', {x: x(t), y: H - 8, class: 'tick', 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle'}, clock(t)));
  }
  series.forEach((s, i) => {
    for (const run of runs(s.points)) {
      if (run.length === 1) {
        root.append(svg('circle', {cx: x(run[0][0]), cy: y(run[0][1]), r: 2.5, class: 'dot series-' + (i % 6)}));
      } else {
        const d = run.map((p, j) => (j ? 'L' : 'M') + x(p[0]).toFixed(1) + ' ' + y(p[1]).toFixed(1)).join(' ');
        root.append(svg('path', {d, class: 'line series-' + (i % 6)}));
      }
    }
  });
  const cursor = svg('line', {y1: PAD.top, y2: H - PAD.bottom, class: 'cursor', visibility: 'hidden'});
  root.append(cursor);

  const legend = el('figcaption', {class: 'legend'});
  const values = series.map((s, i) => {
    const v = el('span', {class: 'legend-value'});
    legend.append(el('span', {class: 'legend-item'}, el('span', {class: 'swatch series-' + (i % 6)}), s.name, ' ', v));
    return v;
  });
  const readTime = el('span', {class: 'legend-time muted'});
  legend.append(readTime);

  // The readout shows the values nearest the pointer's time, or the
  // last ones when the pointer is elsewhere.
  function show(t) {
    series.forEach((s, i) => {
      const p = nearest(s.points, t);
      values[i].textContent = p && p[1] !== null && p[1] !== undefined ? format(p[1]) : '—';
    });
    readTime.textContent = t === null ? 'latest' : clock(t);
  }
  root.addEventListener('mousemove', (ev) => {
    const r = root.getBoundingClientRect();
    const px = ((ev.clientX - r.left) / r.width) * W;
    if (px < PAD.left || px > W - PAD.right) return;
    const t = t0 + ((px - PAD.left) / (W - PAD.left - PAD.right)) * (t1 - t0);
    cursor.setAttribute('x1', px);
    cursor.setAttribute('x2', px);
    cursor.setAttribute('visibility', 'visible');
    show(t);
  });
  root.addEventListener('mouseleave', () => {
    cursor.setAttribute('visibility', 'hidden');
    show(null);
  });
  show(null);
  box.append(root, legend);
  return box;
}

// runs splits points into stretches without gaps (null values).
function runs(points) {
  const out = [];
  let cur = [];
  for (const p of points) {
    if (p[1] === null || p[1] === undefined) {
      if (cur.length) out.push(cur);
      cur = [];
    } else cur.push(p);
  }
  if (cur.length) out.push(cur);
  return out;
}

// nearest is the point of points closest in time to t (the last for
// null).
function nearest(points, t) {
  if (!points.length) return null;
  if (t === null) return points[points.length - 1];
  let best = points[0];
  for (const p of points) if (Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
  return best;
}

// niceMax rounds a maximum up to 1, 2, 4 or 8 times a power of ten, so
// that the axis's quarters are round numbers too.
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 4, 8]) if (m * p >= v) return m * p;
  return 10 * p;
}
