// Charts: this node's (or another's) produce and fetch rates and fsync
// latency over the last hour, and every group's lag, drawn as SVG.

import {el, field, note, section} from '../dom.js';
import {lineChart} from '../chart.js';
import * as fmt from '../format.js';

// At most this many groups get a line of their own on the lag chart:
// those with the most lag now.
const LAG_LINES = 6;

export default {
  title: 'Charts',
  mount(root, ctx) {
    let node = ctx.query.node || String(ctx.who.node);
    const nodeSel = el('select', {id: 'chart-node', 'aria-label': 'Node'});
    nodeSel.addEventListener('change', () => {
      node = nodeSel.value;
      history.replaceState(null, '', '#/charts?node=' + encodeURIComponent(node));
      load();
    });
    const rates = el('div');
    const fsync = el('div');
    const lag = el('div');
    root.append(
      el('div', {class: 'toolbar'}, field('Node', nodeSel),
        note('Each node samples its own counters every 10 s and keeps an hour, in memory. Longer history: scrape /metrics.')),
      section('Records per second on this node', rates),
      el('div', {class: 'grid'}, section('fsync latency', fsync), section('Consumer group lag', lag)),
    );

    async function load() {
      const [series, lags, brokers] = await Promise.all([
        ctx.api.get('series', node === String(ctx.who.node) ? {} : {node}),
        ctx.api.get('lag'),
        ctx.api.get('overview').then((o) => (o.brokers || []).map((b) => String(b.id)), () => [String(ctx.who.node)]),
      ]);
      if (!ctx.live()) return;
      const ids = [...new Set([...brokers, node])].sort((a, b) => a - b);
      if (ids.join() !== [...nodeSel.options].map((o) => o.value).join()) {
        nodeSel.replaceChildren(...ids.map((id) => el('option', {value: id, selected: id === node}, 'broker ' + id)));
      }
      const s = series.samples || [];
      rates.replaceChildren(lineChart({
        series: [
          {name: 'produced', points: s.map((p) => [p.time, p.produced_per_second])},
          {name: 'fetched', points: s.map((p) => [p.time, p.fetched_per_second])},
        ],
        format: (v) => fmt.metric(v) + '/s',
      }));
      fsync.replaceChildren(lineChart({
        series: [
          {name: 'mean', points: s.map((p) => [p.time, p.fsync_mean_ms])},
          {name: 'max', points: s.map((p) => [p.time, p.fsync_max_ms])},
        ],
        format: fmt.duration,
      }));
      const groups = (lags.groups || []).slice()
        .sort((a, b) => last(b) - last(a))
        .slice(0, LAG_LINES);
      lag.replaceChildren(lineChart({
        series: groups.map((g) => ({name: g.group, points: (g.points || []).map((p) => [p.time, p.lag])})),
        format: fmt.metric,
        empty: 'No group has committed offsets yet.',
      }), (lags.groups || []).length > LAG_LINES ? note(`The ${LAG_LINES} groups with the most lag now, of ${lags.groups.length}.`) : null);
    }
    return {refresh: load};
  },
};

function last(g) {
  const ps = g.points || [];
  return ps.length ? ps[ps.length - 1].lag : 0;
}
