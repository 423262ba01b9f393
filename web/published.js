// published.js: predicted against published for every check set (GET
// /api/published: placer check-published --json and --moe --json), one
// scatter per set with the y = x line and the ±10% band. A click on a
// point loads that run into the explorer with the step check-published
// prints for it.
import {getJSON} from './api.js';
import {el, svg} from './svg.js';

// Each set's points: {set, row, x: published, y: predicted, unit}.
export function points(data) {
  const dense = (data.dense && data.dense.rows) || [];
  const fp8 = ((data.dense && data.dense.fp8 && data.dense.fp8.rows) || []).filter(r => !r.skipped);
  const moe = ((data.moe && data.moe.rows) || []).filter(r => !r.skipped);
  return [
    {name: 'dense (Megatron SC21 Tables 1, 2; Llama 3 Table 4)', set: 'dense', unit: 'TFLOP/s per GPU',
      pts: dense.map(r => ({row: r.label, x: r.published_tflops, y: r.predicted_tflops}))},
    {name: 'FP8', set: 'fp8', unit: 'tokens/s per GPU',
      pts: fp8.map(r => ({row: r.run_id, x: r.published_tokens_per_gpu, y: r.predicted_tokens_per_gpu}))},
    {name: 'mixture of experts', set: 'moe', unit: 'step s',
      pts: moe.map(r => ({row: r.run_id, x: r.published_step_s, y: r.predicted_step_s}))},
  ];
}

export class Published {
  constructor(root, bus) {
    this.root = root;
    this.bus = bus;
  }

  async shown() {
    if (this.loaded) return;
    this.loaded = true;
    this.root.textContent = 'predicting the check sets ...';
    const r = await getJSON('/api/published');
    this.root.textContent = '';
    if (!r.ok) {
      this.root.textContent = r.data.error;
      return;
    }
    const row = document.createElement('div');
    row.className = 'row';
    this.root.appendChild(row);
    for (const set of points(r.data)) this.scatter(row, set);
    this.root.dataset.done = '1';
  }

  scatter(parent, set) {
    const p = document.createElement('div');
    p.className = 'panel';
    p.innerHTML = `<b>${set.name}</b> <span class="note">(${set.pts.length} rows; ${set.unit}; band ±10%)</span>`;
    parent.appendChild(p);
    const W = 380, H = 360, m = 50;
    const s = svg(W, H, p);
    s.classList.add('scatter');
    s.dataset.set = set.set;
    const hi = Math.max(1e-9, ...set.pts.flatMap(q => [q.x, q.y])) * 1.1;
    const X = (v) => m + (v / hi) * (W - m - 10), Y = (v) => H - m - (v / hi) * (H - m - 10);
    el('polygon', {points: `${X(0)},${Y(0)} ${X(hi)},${Y(hi * 1.1)} ${X(hi)},${Y(hi * 0.9)}`, fill: '#e6f0e6'}, s);
    el('line', {x1: X(0), y1: Y(0), x2: X(hi), y2: Y(hi), stroke: '#888'}, s);
    el('line', {x1: X(0), y1: Y(0), x2: X(hi), y2: Y(0), stroke: '#333'}, s);
    el('line', {x1: X(0), y1: Y(0), x2: X(0), y2: Y(hi), stroke: '#333'}, s);
    el('text', {x: W / 2 - 30, y: H - 12, text: 'published'}, s);
    el('text', {x: m + 6, y: 14, text: 'predicted'}, s);
    for (const k of [0.5, 1]) {
      el('text', {x: X(hi * k), y: Y(0) + 14, 'text-anchor': 'end', text: (hi * k).toPrecision(3)}, s);
      el('text', {x: m - 4, y: Y(hi * k) + 4, 'text-anchor': 'end', text: (hi * k).toPrecision(3)}, s);
    }
    for (const q of set.pts) {
      const off = Math.abs(q.y / q.x - 1) > 0.1;
      const c = el('circle', {cx: X(q.x), cy: Y(q.y), r: 5, fill: off ? '#e15759' : '#4e79a7', class: 'point',
        'data-set': set.set, 'data-row': q.row, style: 'cursor:pointer'}, s);
      el('title', {text: `${q.row}: published ${q.x}, predicted ${q.y.toFixed(3)} (${(100 * (q.y / q.x - 1)).toFixed(1)}%)`}, c);
      c.addEventListener('click', () => this.bus.views.explorer.showCheck(set.set, q.row));
    }
  }
}
