// svg.js: small SVG helpers shared by the views (no chart library).

const NS = 'http://www.w3.org/2000/svg';

export function el(tag, attrs = {}, parent = null) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v);
  }
  if (parent) parent.appendChild(e);
  return e;
}

export function svg(w, h, parent) {
  const s = el('svg', {width: w, height: h, viewBox: `0 0 ${w} ${h}`});
  if (parent) parent.appendChild(s);
  return s;
}

export const PART_COLORS = {
  compute: '#4e79a7', recompute: '#a0cbe8', tp: '#f28e2b', cp: '#ffbe7d', dp: '#59a14f', pp: '#8cd17d',
  bubble: '#bab0ac', optimizer: '#e15759', ep: '#b07aa1',
  params: '#4e79a7', grads: '#f28e2b', optimizer_mem: '#e15759', activations: '#59a14f',
  embedding_head: '#b07aa1', buffers: '#bab0ac', experts: '#9c755f',
};

// A horizontal stacked bar of parts [{name, value, color}] scaled to total
// width w; returns the svg.
export function stackedBar(parent, parts, w, h, total) {
  const s = svg(w, h + 4, parent);
  const sum = total || parts.reduce((a, p) => a + Math.max(0, p.value), 0) || 1;
  let x = 0;
  for (const p of parts) {
    if (!(p.value > 0)) continue;
    const pw = (p.value / sum) * w;
    const r = el('rect', {x, y: 2, width: Math.max(pw, 0.5), height: h, fill: p.color}, s);
    el('title', {text: `${p.name}: ${p.label || p.value}`}, r);
    x += pw;
  }
  return s;
}

export function legend(parent, items) {
  const d = document.createElement('div');
  d.className = 'legend';
  for (const it of items) {
    const sp = document.createElement('span');
    const i = document.createElement('i');
    i.style.background = it.color;
    sp.appendChild(i);
    sp.appendChild(document.createTextNode(it.name));
    d.appendChild(sp);
  }
  parent.appendChild(d);
  return d;
}

export function fmt(x, d = 1) {
  return Number(x).toLocaleString('en-US', {minimumFractionDigits: d, maximumFractionDigits: d});
}
