// planner.js: the planner in the page. POST /api/plan runs placer plan with
// its progress streamed; the top layouts fill a sortable table; a click on
// a row loads it into the explorer; copy buttons give the Megatron-LM,
// torchtitan and DeepSpeed exports of a row (POST /api/export: placer plan
// --export's writer). Leaving or pressing Cancel closes the stream, which
// cancels the plan on the server.
import {postText, streamPlan} from './api.js';
import {fmt} from './svg.js';

// The plan row's layout (plan/export_json.c's object) as layout text.
export function rowLayoutText(row) {
  const l = row.layout;
  let t = `tp=${l.tp},sp=${l.sp},cp=${l.cp},pp=${l.pp},vp=${l.vp},dp=${l.dp},zero=${l.zero},mbs=${l.micro_batch},` +
    `gbs=${l.global_batch},recompute=${l.recompute},precision=${l.precision}`;
  if (l.fp8 || l.fp8_recipe) t += `,fp8=${l.fp8 || l.fp8_recipe}`;
  if (l.sched && l.sched !== '1f1b') t += `,sched=${l.sched}`;
  if (l.ep) t += `,ep=${l.ep}`;
  if (l.etp) t += `,etp=${l.etp}`;
  if (row.chunk_layers && row.chunk_layers.length > 1) t += `,stages=${row.chunk_layers.join('/')}`;
  return t;
}

const COLS = [['#', r => r.rank], ['layout', r => r.short], ['step ms', r => r.predicted.step_ms],
  ['tokens/s', r => r.predicted.tokens_per_s], ['MFU', r => r.predicted.mfu],
  ['mem GB', r => r.predicted.memory_bytes.total / 1e9], ['free GB', r => r.predicted.headroom_bytes / 1e9]];

export class Planner {
  constructor(root, bus) {
    this.root = root;
    this.bus = bus;
    this.sortCol = 2;
    this.sortDir = 1;
    const p = document.createElement('div');
    p.className = 'panel';
    root.appendChild(p);
    const models = (bus.models.models || []).map(m => `<option>${m.name}</option>`).join('');
    const clusters = (bus.clusters.clusters || []).map(c => `<option>${c.name}</option>`).join('');
    p.innerHTML = `
      model <select id="pn-model">${models}</select>
      cluster <select id="pn-cluster">${clusters}</select>
      GPUs <input id="pn-gpus" type="number" min="1" value="64" style="width:6em">
      global batch <input id="pn-gbs" type="number" min="1" value="256" style="width:6em">
      precision <input id="pn-precision" value="bf16" style="width:8em">
      top <input id="pn-top" type="number" min="1" max="50" value="10" style="width:4em">
      <button id="pn-run">Plan</button> <button id="pn-cancel" disabled>Cancel</button>
      <div><progress id="pn-progress" max="1" value="0"></progress></div>
      <div id="pn-status" class="note"></div><div id="pn-error" class="error"></div>`;
    const sel = (id, v) => { const e = p.querySelector(id); if ([...e.options].some(o => o.value === v)) e.value = v; };
    sel('#pn-model', 'llama-3-8b');
    sel('#pn-cluster', 'dgx-h100');
    this.table = document.createElement('div');
    this.table.className = 'panel';
    root.appendChild(this.table);
    p.querySelector('#pn-run').addEventListener('click', () => this.run());
    p.querySelector('#pn-cancel').addEventListener('click', () => this.abort && this.abort.abort());
  }

  request() {
    const v = (id) => this.root.querySelector(id).value;
    return {model: v('#pn-model'), cluster: v('#pn-cluster'), gpus: +v('#pn-gpus'), global_batch: +v('#pn-gbs'),
      precision: v('#pn-precision'), top: +v('#pn-top')};
  }

  async run() {
    const q = this.request();
    this.q = q;
    const st = this.root.querySelector('#pn-status'), pr = this.root.querySelector('#pn-progress');
    const err = this.root.querySelector('#pn-error');
    err.textContent = '';
    this.abort = new AbortController();
    this.root.querySelector('#pn-cancel').disabled = false;
    this.root.dataset.done = 'running';
    let r;
    try {
      r = await streamPlan(q, (g) => {
        pr.max = Math.max(1, g.total);
        pr.value = g.done;
        st.textContent = `pass ${g.pass + 1} of ${g.n_passes}: ${g.done} of ${g.total} bounded layouts, ` +
          `${g.considered} considered, ${g.pruned_memory} pruned by memory, ${g.pruned_bound} by the bound, ` +
          `${g.simulated} simulated, ${g.elapsed_s.toFixed(1)} s` +
          (g.best ? `; best so far ${(g.best.step_us / 1e3).toFixed(2)} ms` : '');
      }, this.abort.signal);
    } catch (e) {
      r = {ok: false, data: {error: e.name === 'AbortError' ? 'cancelled' : String(e)}};
    }
    this.root.querySelector('#pn-cancel').disabled = true;
    if (!r.ok) {
      err.textContent = r.data.error;
      this.root.dataset.done = 'error';
      return;
    }
    const s = r.data.search || {};
    pr.value = pr.max;
    st.textContent = `${s.considered} layouts considered, ${s.pruned_memory} pruned by memory, ${s.pruned_bound} by ` +
      `the bound, ${s.simulated} simulated in ${Number(s.wall_s).toFixed(2)} s` + (r.data.fits ? '' : '; none fits');
    this.rows = (r.data.top || []).map((row, i) => ({...row, rank: i + 1, text: rowLayoutText(row),
      short: `tp${row.layout.tp} cp${row.layout.cp} pp${row.layout.pp}${row.layout.vp > 1 ? 'x' + row.layout.vp : ''} ` +
        `dp${row.layout.dp} mbs${row.layout.micro_batch} ${row.layout.recompute} ${row.layout.zero === 'fsdp' ? 'fsdp' : 'z' + row.layout.zero}`}));
    this.drawTable();
    this.root.dataset.done = 'done';
  }

  drawTable() {
    const rows = [...this.rows].sort((a, b) => {
      const f = COLS[this.sortCol][1];
      const x = f(a), y = f(b);
      return (x < y ? -1 : x > y ? 1 : 0) * this.sortDir;
    });
    this.table.textContent = '';
    const t = document.createElement('table');
    t.id = 'pn-table';
    const hr = t.insertRow();
    COLS.forEach(([name], i) => {
      const th = document.createElement('th');
      th.textContent = name + (i === this.sortCol ? (this.sortDir > 0 ? ' ▲' : ' ▼') : '');
      th.addEventListener('click', () => {
        this.sortDir = this.sortCol === i ? -this.sortDir : 1;
        this.sortCol = i;
        this.drawTable();
      });
      hr.appendChild(th);
    });
    hr.appendChild(document.createElement('th')).textContent = 'exports';
    for (const row of rows) {
      const tr = t.insertRow();
      tr.className = 'clickable';
      tr.dataset.rank = row.rank;
      tr.dataset.layout = row.text;
      const cells = [row.rank, row.short, row.predicted.step_ms.toFixed(2), fmt(row.predicted.tokens_per_s, 0),
        `${(100 * row.predicted.mfu).toFixed(1)}%`, (row.predicted.memory_bytes.total / 1e9).toFixed(2),
        (row.predicted.headroom_bytes / 1e9).toFixed(2)];
      for (const c of cells) tr.insertCell().textContent = c;
      const ex = tr.insertCell();
      for (const f of ['megatron', 'torchtitan', 'deepspeed']) {
        const b = document.createElement('button');
        b.className = 'small';
        b.textContent = `copy ${f}`;
        b.addEventListener('click', (e) => { e.stopPropagation(); this.copy(row, f, b); });
        ex.appendChild(b);
      }
      tr.addEventListener('click', () => this.bus.views.explorer.load({model: this.q.model, cluster: this.q.cluster,
        layout: row.text}));
    }
    this.table.appendChild(t);
  }

  async copy(row, format, button) {
    const r = await postText('/api/export', {model: this.q.model, cluster: this.q.cluster, layout: row.text, format});
    const text = r.ok ? r.text : r.error;
    this.lastExport = text;
    try { await navigator.clipboard.writeText(text); button.textContent = 'copied'; }
    catch (e) { button.textContent = r.ok ? 'see below' : 'refused'; }
    let pre = this.table.querySelector('pre');
    if (!pre) { pre = document.createElement('pre'); pre.id = 'pn-export'; this.table.appendChild(pre); }
    pre.textContent = text;
  }
}
