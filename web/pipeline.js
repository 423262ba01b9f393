// pipeline.js: the pipeline view. One pipeline replica's ops per rank from
// the layout simulator (POST /api/trace: layout_sim_ops through placer
// layout's path): F, B and W per micro-batch and chunk, the sends, the idle
// time shaded; the bubble (idle over compute per rank) beside its closed
// form (p-1)/(v m). "Animate" plays the ops in time order, as the deck does;
// its last frame is the static timeline. Two sources: the explorer's
// layout, or an ideal pipeline (uniform stages, free sends) of any order.
import {postJSON} from './api.js';
import {el, svg, legend} from './svg.js';

const ORDERS = ['gpipe', '1f1b', 'interleaved', 'zb-h1', 'zb-h2', 'zb-v', 'dualpipev'];
const KIND_COLORS = {F: ['#4e79a7', '#76a0cf', '#2d5a87', '#a0c4e8'], B: ['#59a14f', '#8cd17d', '#3b7a33', '#b5e0ad'],
  W: ['#f28e2b', '#ffbe7d', '#c46a10', '#ffd9b0']};

export class Pipeline {
  constructor(root, bus) {
    this.root = root;
    this.bus = bus;
    this.build();
  }

  build() {
    const p = document.createElement('div');
    p.className = 'panel';
    this.root.appendChild(p);
    p.innerHTML = `
      <label><input type="radio" name="pl-src" value="ideal" checked> ideal pipeline (uniform stages, free sends)</label>
      <label><input type="radio" name="pl-src" value="explorer"> the explorer's layout</label>
      <div id="pl-ideal-controls">
        order <select id="pl-order">${ORDERS.map(o => `<option>${o}</option>`).join('')}</select>
        ranks p <input id="pl-p" type="number" min="2" max="32" value="4" style="width:4em">
        micro-batches m <input id="pl-m" type="number" min="1" max="256" value="8" style="width:4em">
        chunks v (interleaved) <input id="pl-v" type="number" min="1" max="8" value="2" style="width:4em">
      </div>
      <button id="pl-draw">Draw</button> <button id="pl-animate">Animate</button>
      <div id="pl-error" class="error"></div>
      <div id="pl-bubble"></div>`;
    this.out = document.createElement('div');
    this.out.className = 'panel';
    this.out.id = 'pl-timeline';
    this.root.appendChild(this.out);
    this.details = document.createElement('div');
    this.details.className = 'note';
    this.details.id = 'pl-details';
    this.root.appendChild(this.details);
    p.querySelector('#pl-draw').addEventListener('click', () => this.draw());
    p.querySelector('#pl-animate').addEventListener('click', () => this.animate());
  }

  shown() { if (!this.data) this.draw(); }

  // The trace request: the explorer's, or an ideal pipeline of the chosen order.
  request() {
    const src = this.root.querySelector('input[name="pl-src"]:checked').value;
    if (src === 'explorer') return {...this.bus.views.explorer.request(), gpus: undefined};
    const order = this.root.querySelector('#pl-order').value;
    const p = +this.root.querySelector('#pl-p').value, m = +this.root.querySelector('#pl-m').value;
    const v = order === 'interleaved' ? Math.max(2, +this.root.querySelector('#pl-v').value)
      : (order === 'zb-v' || order === 'dualpipev' ? 2 : 1);
    const layers = p * v * 2;  // uniform chunks of two layers each
    let layout = `tp=1,cp=1,pp=${p},vp=${v},dp=1,mbs=1,gbs=${m},recompute=none,precision=bf16`;
    if (!['gpipe', '1f1b', 'interleaved'].includes(order)) layout += `,sched=${order}`;
    const q = {model: `gpt12,layers=${layers}`, cluster: 'dgx-h100', layout, ideal: true};
    if (order === 'gpipe') q.gpipe = true;
    return q;
  }

  async draw() {
    const q = this.request();
    const err = this.root.querySelector('#pl-error');
    err.textContent = '';
    const r = await postJSON('/api/trace', q);
    if (!r.ok) {
      err.textContent = r.data.error;
      this.root.dataset.done = 'error';
      return;
    }
    this.data = r.data;
    this.end = Math.max(...r.data.ranks.flatMap(k => k.ops.map(o => o[5])), 1);
    const b = this.root.querySelector('#pl-bubble');
    const cf = r.data.bubble_closed_form;
    b.innerHTML = `<b>${r.data.order}</b>, p = ${r.data.pp}, v = ${r.data.vp}, m = ${r.data.micro_batches}: ` +
      `bubble (idle / compute per rank) <span id="pl-bubble-sim">${r.data.idle_over_busy.toFixed(4)}</span>, ` +
      `closed form (p-1)/(v m) <span id="pl-bubble-cf">${cf === null ? 'none for this order' : cf.toFixed(4)}</span>; ` +
      `idle ${(100 * r.data.idle_fraction).toFixed(1)}% of the ranks' time; step ${(r.data.step_us / 1e3).toFixed(3)} ms`;
    b.dataset.sim = r.data.idle_over_busy;
    b.dataset.closed = cf === null ? '' : cf;
    this.render(this.end);
    this.root.dataset.done = 'static';
  }

  // Draw every op as it stands at time t (ops that started, cut at t).
  render(t) {
    const d = this.data;
    this.out.textContent = '';
    const W = 1100, rowH = 26, left = 56, sendH = 4;
    const s = svg(W, d.ranks.length * (rowH + sendH + 6) + 20, this.out);
    s.id = 'pl-svg';
    const x = (u) => left + (u / this.end) * (W - left - 10);
    d.ranks.forEach((rk, i) => {
      const y = 4 + i * (rowH + sendH + 6);
      const g = el('g', {class: 'rank', 'data-rank': rk.rank}, s);
      el('text', {x: 0, y: y + 17, text: `rank ${rk.rank}`}, g);
      // idle shaded: the row's background shows where no op runs
      el('rect', {x: x(0), y, width: x(Math.min(t, this.end)) - x(0), height: rowH, fill: '#e4e4e4', class: 'idle'}, g);
      for (const op of rk.ops) {
        const [kind, mb, chunk, stage, t0, t1] = op;
        if (t0 >= t && t < this.end) continue;
        const e = Math.min(t1, t);
        if (kind === 'send_fwd' || kind === 'send_bwd') {
          el('rect', {x: x(t0), y: y + rowH + 1, width: Math.max(x(e) - x(t0), 0.5), height: sendH,
            fill: kind === 'send_fwd' ? '#9c755f' : '#d37295', class: 'send'}, g);
          continue;
        }
        const w = Math.max(x(e) - x(t0), 0.5);
        const r = el('rect', {x: x(t0), y, width: w, height: rowH, fill: KIND_COLORS[kind][chunk % 4],
          class: `op op-${kind}`, 'data-mb': mb, 'data-chunk': chunk}, g);
        el('title', {text: `${kind} micro-batch ${mb}, chunk ${chunk} (stage ${stage}): ${t0.toFixed(1)} - ${t1.toFixed(1)} us`}, r);
        r.addEventListener('click', () => {
          this.details.textContent = `rank ${rk.rank}: ${kind} of micro-batch ${mb}, chunk ${chunk} (stage ${stage}), ` +
            `${t0.toFixed(1)} to ${t1.toFixed(1)} us (${(t1 - t0).toFixed(1)} us)`;
        });
        if (w > 16) el('text', {x: x(t0) + 2, y: y + 16, fill: '#fff', text: `${kind}${mb}`}, g);
      }
    });
    legend(this.out, [{name: 'F forward', color: KIND_COLORS.F[0]}, {name: 'B backward', color: KIND_COLORS.B[0]},
      {name: 'W weight gradient', color: KIND_COLORS.W[0]}, {name: 'send forward', color: '#9c755f'},
      {name: 'send backward', color: '#d37295'}, {name: 'idle', color: '#e4e4e4'}]);
  }

  async animate() {
    if (!this.data) await this.draw();
    if (!this.data) return;
    this.root.dataset.done = 'animating';
    const dur = 3000, start = performance.now();
    await new Promise(resolve => {
      const frame = (now) => {
        const f = Math.min(1, (now - start) / dur);
        this.render(f * this.end);
        if (f < 1) requestAnimationFrame(frame);
        else resolve();
      };
      requestAnimationFrame(frame);
    });
    this.root.dataset.done = 'animated';
  }
}
