// explorer.js: the layout explorer. Model, cluster, GPUs and framework;
// sliders and selects for every dimension of the layout. Each change
// re-simulates (POST /api/layout: placer layout --json's object) and shows
// the step, tokens/s, MFU, the time breakdown, memory per GPU against the
// GPU's capacity with the OOM line, and the stage that bounds the step.
// Values the library would refuse are greyed with its one-line reason
// (POST /api/validate). Fields are read by name; extra fields are ignored.
import {postJSON} from './api.js';
import {el, svg, stackedBar, legend, fmt, PART_COLORS} from './svg.js';

const DIMS = [
  {key: 'tp', values: [1, 2, 4, 8, 16, 32, 64]},
  {key: 'cp', values: [1, 2, 4, 8, 16, 32]},
  {key: 'pp', values: [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]},
  {key: 'vp', values: [1, 2, 3, 4, 5, 6, 7, 8]},
  {key: 'dp', values: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]},
  {key: 'ep', values: [1, 2, 4, 8, 16, 32, 64, 128, 256], moe: true},
  {key: 'etp', values: [1, 2, 4, 8], moe: true},
  {key: 'mbs', values: [1, 2, 4, 8, 16]},
  {key: 'gbs', values: [8, 16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 4096, 8192, 15360, 16384]},
];
const SELECTS = [
  {key: 'recompute', values: ['none', 'selective', 'full']},
  {key: 'precision', values: ['bf16', 'fp16', 'fp8=delayed', 'fp8=tensorwise', 'fp8=blockwise', 'fp8=mxfp8']},
  {key: 'sched', values: ['1f1b', 'zb-h1', 'zb-h2', 'zb-v', 'dualpipev']},
  {key: 'zero', values: ['0', '1', '2', '3', 'fsdp']},
];
const TIME_PARTS = ['compute', 'tp', 'cp', 'dp', 'pp', 'ep', 'bubble', 'optimizer'];
const MEM_PARTS = [['params', 'params'], ['grads', 'grads'], ['optimizer', 'optimizer_mem'],
  ['activations', 'activations'], ['embedding_head', 'embedding_head'], ['buffers', 'buffers']];

function ctl(parent, label) {
  const d = document.createElement('div');
  d.className = 'ctl';
  const l = document.createElement('label');
  l.textContent = label;
  d.appendChild(l);
  parent.appendChild(d);
  return d;
}

// "k=v,k=v" into an object (the layout's text form).
export function parseLayoutText(text) {
  const o = {};
  for (const kv of (text || '').split(',')) {
    const i = kv.indexOf('=');
    if (i > 0) o[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return o;
}

export class Explorer {
  constructor(root, bus) {
    this.root = root;
    this.bus = bus;
    this.seq = 0;
    this.check = null;           // {set, row} while showing a published run's own simulation
    this.state = {tp: 1, cp: 1, pp: 1, vp: 1, dp: 8, ep: 1, etp: 1, mbs: 1, gbs: 64,
      recompute: 'none', precision: 'bf16', sched: '1f1b', zero: '1'};
    this.build();
    this.refresh();
  }

  build() {
    const row = document.createElement('div');
    row.className = 'row';
    this.root.appendChild(row);
    const c = document.createElement('div');
    c.className = 'panel controls';
    row.appendChild(c);
    const models = this.bus.models.models || [];
    this.models = Object.fromEntries(models.map(m => [m.name, m]));
    // model
    let d = ctl(c, 'model');
    this.modelSel = document.createElement('select');
    this.modelSel.id = 'ex-model';
    for (const m of models) this.modelSel.add(new Option(m.name, m.name));
    for (const p of this.bus.models.presets || []) this.modelSel.add(new Option(`preset: ${p}`, p));
    this.modelSel.add(new Option('paste a config.json ...', '__paste__'));
    this.modelSel.value = this.models['llama-3-8b'] ? 'llama-3-8b' : (models[0] || {}).name || 'gpt12';
    d.appendChild(this.modelSel);
    this.paste = document.createElement('textarea');
    this.paste.id = 'ex-config';
    this.paste.rows = 6;
    this.paste.placeholder = 'a Hugging Face config.json (at most 256 KiB)';
    this.paste.hidden = true;
    c.appendChild(this.paste);
    // cluster, GPUs, framework
    d = ctl(c, 'cluster');
    this.clusterSel = document.createElement('select');
    this.clusterSel.id = 'ex-cluster';
    for (const k of this.bus.clusters.clusters || []) this.clusterSel.add(new Option(`${k.name} (${k.gpus} GPUs)`, k.name));
    if ([...this.clusterSel.options].some(o => o.value === 'dgx-h100')) this.clusterSel.value = 'dgx-h100';
    d.appendChild(this.clusterSel);
    d = ctl(c, 'GPUs');
    this.gpus = document.createElement('input');
    this.gpus.id = 'ex-gpus';
    this.gpus.type = 'number';
    this.gpus.min = 1;
    this.gpus.placeholder = 'tp·cp·pp·dp';
    d.appendChild(this.gpus);
    d = ctl(c, 'framework');
    this.fwSel = document.createElement('select');
    this.fwSel.id = 'ex-framework';
    for (const f of ['megatron', 'torchtitan', 'hf']) this.fwSel.add(new Option(f, f));
    d.appendChild(this.fwSel);
    // the dimensions
    this.sliders = {};
    this.ticks = {};
    for (const dim of DIMS) {
      d = ctl(c, dim.key);
      d.dataset.dim = dim.key;
      const s = document.createElement('input');
      s.type = 'range';
      s.min = 0;
      s.max = dim.values.length - 1;
      s.step = 1;
      s.id = `ex-${dim.key}`;
      d.appendChild(s);
      const v = document.createElement('span');
      v.id = `ex-${dim.key}-value`;
      d.appendChild(v);
      const t = document.createElement('div');
      t.className = 'ticks';
      d.appendChild(t);
      this.sliders[dim.key] = {input: s, value: v, dim, row: d};
      this.ticks[dim.key] = t;
      s.addEventListener('input', () => { this.state[dim.key] = dim.values[+s.value]; this.changed(); });
      for (const [i, val] of dim.values.entries()) {
        const sp = document.createElement('span');
        sp.textContent = val;
        sp.dataset.value = val;
        sp.addEventListener('click', () => { this.state[dim.key] = val; s.value = i; this.changed(); });
        t.appendChild(sp);
      }
    }
    this.selects = {};
    for (const sel of SELECTS) {
      d = ctl(c, sel.key);
      const s = document.createElement('select');
      s.id = `ex-${sel.key}`;
      for (const v of sel.values) s.add(new Option(v, v));
      d.appendChild(s);
      this.selects[sel.key] = s;
      s.addEventListener('change', () => { this.state[sel.key] = s.value; this.changed(); });
    }
    // before the refresh below: a new model drops the keys kept from a loaded layout
    this.modelSel.addEventListener('change', () => { this.paste.hidden = this.modelSel.value !== '__paste__'; this.state.kept = {}; });
    for (const e of [this.modelSel, this.clusterSel, this.fwSel]) e.addEventListener('change', () => this.changed());
    this.gpus.addEventListener('change', () => this.changed());
    this.paste.addEventListener('change', () => this.changed());
    this.text = document.createElement('div');
    this.text.className = 'note';
    this.text.id = 'ex-layout-text';
    c.appendChild(this.text);
    // results
    const out = document.createElement('div');
    out.className = 'panel';
    out.style.flex = '1';
    row.appendChild(out);
    this.banner = document.createElement('div');
    this.banner.className = 'banner';
    this.banner.hidden = true;
    out.appendChild(this.banner);
    this.error = document.createElement('div');
    this.error.className = 'error';
    this.error.id = 'ex-error';
    out.appendChild(this.error);
    this.figures = document.createElement('div');
    this.figures.className = 'figures';
    out.appendChild(this.figures);
    const fig = (id, k) => {
      const a = document.createElement('div');
      a.innerHTML = `<div class="k">${k}</div><div id="${id}">-</div>`;
      this.figures.appendChild(a);
      return a.lastChild;
    };
    this.fStep = fig('ex-step', 'step');
    this.fTokens = fig('ex-tokens', 'tokens/s');
    this.fMfu = fig('ex-mfu', 'MFU');
    this.fVerdict = fig('ex-verdict', 'memory');
    this.fGpus = fig('ex-world', 'GPUs');
    this.fMb = fig('ex-mb', 'micro-batches');
    this.fBound = fig('ex-bound', 'bounding stage');
    this.fTflops = fig('ex-tflops', 'TFLOP/s per GPU');
    const h = (t) => { const e = document.createElement('h4'); e.textContent = t; out.appendChild(e); };
    h('time of the bounding stage');
    this.breakdown = document.createElement('div');
    this.breakdown.id = 'ex-breakdown';
    out.appendChild(this.breakdown);
    h('memory per GPU, by stage, against the GPU\'s capacity');
    this.memory = document.createElement('div');
    this.memory.id = 'ex-memory';
    out.appendChild(this.memory);
  }

  isMoe() {
    const m = this.models[this.modelSel.value];
    return !!(m && m.experts > 0);
  }

  // The layout's text form from the controls (placer layout's --layout).
  layoutText() {
    const s = this.state;
    const [prec, recipe] = s.precision.split('=');
    let t = `tp=${s.tp},sp=${s.tp > 1 ? 1 : 0},cp=${s.cp},pp=${s.pp},vp=${s.vp}`;
    if (!this.gpus.value) t += `,dp=${s.dp}`;
    t += `,zero=${s.zero},mbs=${s.mbs},gbs=${s.gbs},recompute=${s.recompute},precision=${prec}`;
    if (recipe) t += `,fp8=${recipe}`;
    if (s.sched !== '1f1b') t += `,sched=${s.sched}`;
    if (this.isMoe()) t += `,ep=${s.ep},etp=${s.etp}`;
    // keys with no control, kept from a loaded layout (a plan row, a published run)
    for (const [k, v] of Object.entries(s.kept || {})) if (k === 'mem' || this.isMoe()) t += `,${k}=${v}`;
    if (s.stages) t += `,stages=${s.stages}`;
    return t;
  }

  // The request placer layout would run for the controls.
  request() {
    const q = {cluster: this.clusterSel.value, layout: this.layoutText(), framework: this.fwSel.value};
    if (this.modelSel.value === '__paste__') q.config = this.paste.value;
    else q.model = this.modelSel.value;
    if (this.gpus.value) q.gpus = +this.gpus.value;
    return q;
  }

  // Controls from the state (after a load).
  syncControls() {
    for (const [k, sl] of Object.entries(this.sliders)) {
      let i = sl.dim.values.indexOf(+this.state[k]);
      if (i < 0) { // a value off the slider's list: add it in order
        sl.dim.values.push(+this.state[k]);
        sl.dim.values.sort((a, b) => a - b);
        this.rebuildTicks(k);
        i = sl.dim.values.indexOf(+this.state[k]);
        sl.input.max = sl.dim.values.length - 1;
      }
      sl.input.value = i;
      sl.value.textContent = this.state[k];
      sl.row.hidden = !!sl.dim.moe && !this.isMoe();
      sl.input.disabled = k === 'dp' && !!this.gpus.value;
    }
    for (const [k, s] of Object.entries(this.selects)) {
      if (![...s.options].some(o => o.value === this.state[k])) s.add(new Option(this.state[k], this.state[k]));
      s.value = this.state[k];
    }
    this.text.textContent = this.layoutText();
  }

  rebuildTicks(k) {
    const t = this.ticks[k], sl = this.sliders[k];
    t.textContent = '';
    for (const [i, val] of sl.dim.values.entries()) {
      const sp = document.createElement('span');
      sp.textContent = val;
      sp.dataset.value = val;
      sp.addEventListener('click', () => { this.state[k] = val; sl.input.value = i; this.changed(); });
      t.appendChild(sp);
    }
  }

  changed() {
    this.check = null;
    this.state.stages = undefined;
    this.refresh();
  }

  // Load a layout from elsewhere (a plan row): {model, cluster, layout, gpus}.
  load(q) {
    this.check = null;
    if (q.model && [...this.modelSel.options].some(o => o.value === q.model)) this.modelSel.value = q.model;
    if (q.cluster) this.clusterSel.value = q.cluster;
    this.gpus.value = '';
    this.setFromText(q.layout);
    this.bus.show('explorer');
    return this.refresh();
  }

  setFromText(text) {
    const o = parseLayoutText(text);
    for (const k of ['tp', 'cp', 'pp', 'vp', 'dp', 'ep', 'etp', 'mbs', 'gbs']) if (o[k] !== undefined) this.state[k] = +o[k];
    if (o.recompute) this.state.recompute = o.recompute;
    if (o.zero !== undefined) this.state.zero = o.zero;
    this.state.precision = o.precision === 'fp8' ? `fp8=${o.fp8 || 'delayed'}` : (o.precision || 'bf16');
    this.state.sched = o.sched || '1f1b';
    this.state.stages = o.stages;
    this.state.kept = {};
    for (const k of ['dispatcher', 'overlap', 'mem']) if (o[k] !== undefined) this.state.kept[k] = o[k];
  }

  // A published run as the check simulated it (POST /api/layout with "check").
  async showCheck(set, row) {
    this.bus.show('explorer');
    const seq = ++this.seq;
    const r = await postJSON('/api/layout', {check: {set, row}});
    if (seq !== this.seq) return;
    if (!r.ok) return this.showError(r.data.error);
    this.check = {set, row};
    this.setFromText(r.data.layout);
    // a shipped model (the MoE set names it): selected, so a control moved next simulates the run's model
    if (this.models[r.data.model]) { this.modelSel.value = r.data.model; this.paste.hidden = true; }
    if ([...this.clusterSel.options].some(o => o.value === r.data.cluster)) this.clusterSel.value = r.data.cluster;
    this.syncControls();
    this.banner.hidden = false;
    this.banner.textContent = `Published run "${row}" (${set} check set): the step check-published predicts for it. ` +
      'Move any control to simulate the layout with the model chosen on the left.';
    this.show(r.data);
  }

  async refresh() {
    this.syncControls();
    this.banner.hidden = true;
    const q = this.request();
    const seq = ++this.seq;
    this.bus.status('simulating ...');
    const t0 = performance.now();
    const r = await postJSON('/api/layout', q);
    if (seq !== this.seq) return;
    this.bus.status(`answered in ${(performance.now() - t0).toFixed(0)} ms`);
    if (!r.ok) this.showError(r.data.error);
    else this.show(r.data);
    this.validate(q);
  }

  showError(msg) {
    this.error.textContent = msg || 'error';
    this.fStep.textContent = '-';
    this.fStep.dataset.stepUs = '';
    this.fStep.dataset.layout = '';
    this.root.dataset.done = String(this.seq);
  }

  show(d) {
    this.error.textContent = '';
    this.last = d;
    this.fStep.textContent = `${(d.step_us / 1e3).toFixed(3)} ms`;
    this.fStep.dataset.stepUs = String(d.step_us);
    this.fStep.dataset.layout = d.layout;
    this.fTokens.textContent = fmt(d.tokens_per_s, 0);
    this.fMfu.textContent = `${(100 * d.mfu).toFixed(1)}%`;
    const mem = d.memory || {};
    this.fVerdict.innerHTML = '';
    const v = document.createElement('span');
    v.className = mem.oom ? 'verdict-oom' : 'verdict-fits';
    v.textContent = mem.oom ? 'OOM' : 'fits';
    this.fVerdict.appendChild(v);
    this.fVerdict.appendChild(document.createTextNode(` ${(mem.total / 1e9).toFixed(2)} of ${(mem.cap / 1e9).toFixed(2)} GB`));
    this.fGpus.textContent = d.gpus;
    this.fMb.textContent = d.micro_batches;
    const bound = d.bounding_stage !== undefined ? d.bounding_stage : d.critical_stage;
    this.fBound.textContent = `stage ${bound}`;
    this.fTflops.textContent = fmt(d.tflops_per_gpu, 1);
    this.drawBreakdown(d);
    this.drawMemory(d);
    this.root.dataset.done = String(this.seq);
  }

  drawBreakdown(d) {
    this.breakdown.textContent = '';
    const b = d.breakdown_us || {};
    const parts = TIME_PARTS.filter(p => b[p] > 0).map(p => ({name: p, value: b[p], color: PART_COLORS[p],
      label: `${(b[p] / 1e3).toFixed(2)} ms`}));
    stackedBar(this.breakdown, parts, 620, 22, d.step_us);
    legend(this.breakdown, parts.map(p => ({name: `${p.name} ${p.label}`, color: p.color})));
  }

  drawMemory(d) {
    this.memory.textContent = '';
    const mem = d.memory || {};
    const stages = mem.per_stage || [mem.total];
    const cap = mem.cap || 1;
    const W = 620, rowH = 14, maxV = Math.max(cap * 1.1, ...stages);
    const n = Math.min(stages.length, 64);
    const s = svg(W, 30 + n * (rowH + 3) + 30, this.memory);
    const x = (v) => 80 + (v / maxV) * (W - 100);
    // the worst stage's parts, stacked
    let x0 = x(0);
    el('text', {x: 0, y: 16, text: `stage ${mem.worst_stage} parts`}, s);
    for (const [k, c] of MEM_PARTS) {
      const v = mem[k] || 0;
      if (v <= 0) continue;
      const r = el('rect', {x: x0, y: 5, width: x(v) - x(0), height: rowH, fill: PART_COLORS[c]}, s);
      el('title', {text: `${k}: ${(v / 1e9).toFixed(2)} GB`}, r);
      x0 += x(v) - x(0);
    }
    for (let i = 0; i < n; i++) {
      const y = 30 + i * (rowH + 3);
      el('text', {x: 0, y: y + 11, text: `stage ${i}`}, s);
      const over = stages[i] > cap;
      const r = el('rect', {x: x(0), y, width: x(stages[i]) - x(0), height: rowH,
        fill: over ? '#e15759' : '#76b7b2', class: 'stage-mem'}, s);
      el('title', {text: `stage ${i}: ${(stages[i] / 1e9).toFixed(2)} GB`}, r);
    }
    const yEnd = 30 + n * (rowH + 3);
    el('line', {x1: x(cap), x2: x(cap), y1: 0, y2: yEnd, stroke: '#b00020', 'stroke-width': 2, class: 'oom-line'}, s);
    el('text', {x: x(cap) - 4, y: yEnd + 14, fill: '#b00020', 'text-anchor': 'end', text: `capacity ${(cap / 1e9).toFixed(1)} GB: OOM beyond the line`}, s);
    legend(this.memory, MEM_PARTS.map(([k, c]) => ({name: k, color: PART_COLORS[c]})));
  }

  // Grey the values the library refuses, with its reason.
  async validate(q) {
    const tries = {};
    for (const dim of DIMS) if (!(dim.moe && !this.isMoe()) && !(dim.key === 'dp' && q.gpus)) tries[dim.key] = dim.values;
    for (const s of SELECTS) if (s.key !== 'precision') tries[s.key] = s.values;
    const body = {cluster: q.cluster, layout: q.layout, try: tries};
    if (q.model) body.model = q.model; else body.config = q.config;
    if (q.gpus) body.gpus = q.gpus;
    const seq = this.seq;
    const r = await postJSON('/api/validate', body);
    if (!r.ok || seq !== this.seq) return;
    for (const [k, reasons] of Object.entries(r.data)) {
      if (this.ticks[k]) {
        for (const sp of this.ticks[k].children) {
          const why = reasons[sp.dataset.value];
          sp.classList.toggle('bad', !!why);
          sp.classList.toggle('cur', +sp.dataset.value === +this.state[k]);
          sp.title = why || '';
        }
      } else if (this.selects[k]) {
        for (const o of this.selects[k].options) {
          const why = reasons[o.value];
          o.disabled = !!why && o.value !== this.state[k];
          o.title = why || '';
        }
      }
    }
  }
}
