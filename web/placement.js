// placement.js: the placement product's view, when placer serve runs with
// --db FILE (GET /api/db, the data placer report draws): each RL run's
// training curve (the best and the mean step of each update's samples)
// and each confirmation's sides (the shortlist's picks against the
// baselines, mean confirmed step with its standard error).
import {getJSON} from './api.js';
import {el, svg} from './svg.js';

export class Placement {
  constructor(root, bus) {
    this.root = root;
    this.bus = bus;
    this.probe();
  }

  async probe() {
    const r = await getJSON('/api/db');
    if (!r.ok || !r.data.db) return;
    document.querySelector('#tabs button[data-tab="placement"]').hidden = false;
    this.data = r.data;
    this.draw();
  }

  draw() {
    const d = this.data;
    this.root.textContent = '';
    const h = document.createElement('p');
    h.textContent = `profile database ${d.db}: ${d.runs.length} placer runs, ${d.confirms.length} confirmations`;
    this.root.appendChild(h);
    for (const run of d.runs) {
      const samples = (d.samples[String(run.id)] || []).filter(s => s[2] !== null && !s[3]);
      const by = new Map();
      for (const [u, , us] of samples) {
        const a = by.get(u) || [];
        a.push(us);
        by.set(u, a);
      }
      if (by.size < 2) continue;
      const ups = [...by.keys()].sort((a, b) => a - b);
      const best = ups.map(u => Math.min(...by.get(u)) / 1e3), mean = ups.map(u => by.get(u).reduce((a, b) => a + b, 0) / by.get(u).length / 1e3);
      const p = document.createElement('div');
      p.className = 'panel';
      p.innerHTML = `<b>run ${run.id}: ${run.method}</b> <span class="note">${run.args}</span>`;
      this.root.appendChild(p);
      const W = 700, H = 220, m = 40, s = svg(W, H, p);
      const lo = Math.min(...best), hi = Math.max(...mean);
      const X = (i) => m + (i / Math.max(1, ups.length - 1)) * (W - m - 10), Y = (v) => H - m - ((v - lo) / Math.max(1e-9, hi - lo)) * (H - m - 10);
      const path = (ys) => ys.map((v, i) => `${i ? 'L' : 'M'}${X(i)},${Y(v)}`).join(' ');
      el('path', {d: path(mean), stroke: '#bab0ac', fill: 'none'}, s);
      el('path', {d: path(best), stroke: '#4e79a7', fill: 'none', 'stroke-width': 2, class: 'rl-curve'}, s);
      el('text', {x: m, y: 12, text: `step ms: best (blue) and mean (grey) of each update; ${lo.toFixed(1)} - ${hi.toFixed(1)} ms`}, s);
      el('text', {x: W / 2, y: H - 8, text: 'update'}, s);
    }
    for (const c of d.confirms) {
      const sides = c.sides.filter(x => x.mean_us !== null);
      if (!sides.length) continue;
      const p = document.createElement('div');
      p.className = 'panel';
      p.innerHTML = `<b>${c.label || 'confirmation'}</b> <span class="note">${c.schedule}, m = ${c.micro_batches}: confirmed step (ms)</span>`;
      this.root.appendChild(p);
      const W = 700, rowH = 18, s = svg(W, sides.length * (rowH + 4) + 10, p);
      const hi = Math.max(...sides.map(x => x.mean_us)) * 1.1;
      sides.forEach((x, i) => {
        const y = 4 + i * (rowH + 4);
        el('text', {x: 0, y: y + 13, text: x.side}, s);
        el('rect', {x: 120, y, width: (x.mean_us / hi) * (W - 200), height: rowH, fill: x.side === 'rl' ? '#f28e2b' : '#4e79a7', class: 'side'}, s);
        el('text', {x: 125 + (x.mean_us / hi) * (W - 200), y: y + 13, text: `${(x.mean_us / 1e3).toFixed(2)} ± ${((x.se_us || 0) / 1e3).toFixed(2)}`}, s);
      });
    }
  }
}
