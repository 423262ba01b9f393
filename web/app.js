// app.js: the page's entry: tabs, and the bus through which the views hand
// each other a layout (a plan row, a published run -> the explorer; the
// explorer's layout -> the pipeline view). One module per view.
import {getJSON} from './api.js';
import {Explorer} from './explorer.js';
import {Pipeline} from './pipeline.js';
import {Planner} from './planner.js';
import {Published} from './published.js';
import {Placement} from './placement.js';

const bus = {
  show(tab) {
    for (const b of document.querySelectorAll('#tabs button')) b.classList.toggle('on', b.dataset.tab === tab);
    for (const v of document.querySelectorAll('.view')) v.classList.toggle('on', v.id === tab);
    const view = bus.views[tab];
    if (view && view.shown) view.shown();
  },
  status(text) { document.getElementById('status').textContent = text || ''; },
  views: {},
};

async function main() {
  const [models, clusters] = await Promise.all([getJSON('/api/models'), getJSON('/api/clusters')]);
  bus.models = models.ok ? models.data : {models: [], presets: []};
  bus.clusters = clusters.ok ? clusters.data : {clusters: []};
  bus.views.explorer = new Explorer(document.getElementById('explorer'), bus);
  bus.views.pipeline = new Pipeline(document.getElementById('pipeline'), bus);
  bus.views.planner = new Planner(document.getElementById('planner'), bus);
  bus.views.published = new Published(document.getElementById('published'), bus);
  bus.views.placement = new Placement(document.getElementById('placement'), bus);
  for (const b of document.querySelectorAll('#tabs button')) b.addEventListener('click', () => bus.show(b.dataset.tab));
  window.placer = bus; // for the browser tests (tests/web) and the console
  document.body.dataset.ready = '1';
}

main();
