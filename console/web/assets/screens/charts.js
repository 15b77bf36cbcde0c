// Charts: this node's (or another's) produce and fetch rates and fsync
// latency over the last hour, and every group's lag, drawn as SVG.

import {el, field, fill, note, section} from '../dom.js';
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
      section('fsync latency on this node (mean and longest of each interval)', fsync),
      section('Consumer group lag (records)', lag),
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
          {name: 'produced', points: s.map((p) => [p.time, p.producedPerSec])},
          {name: 'fetched', points: s.map((p) => [p.time, p.fetchedPerSec])},
        ],
        format: (v) => fmt.metric(v) + '/s',
      }));
      fsync.replaceChildren(lineChart({
        series: [
          {name: 'mean', points: s.map((p) => [p.time, p.fsyncs ? p.fsyncMeanMs : null])},
          {name: 'max', points: s.map((p) => [p.time, p.fsyncs ? p.fsyncMaxMs : null])},
        ],
        format: fmt.duration,
      }));
      const groups = lags.groups.slice()
        .sort((a, b) => last(b) - last(a))
        .slice(0, LAG_LINES);
      fill(lag, lineChart({
        series: groups.map((g) => ({name: g.group, points: g.lag.map((v, i) => [lags.times[i], v])})),
        format: fmt.metric,
        empty: 'No group has committed offsets yet.',
      }), lags.groups.length > LAG_LINES ? note(`The ${LAG_LINES} groups with the most lag now, of ${lags.groups.length}.`) : null);
    }
    return {refresh: load};
  },
};

// last is a group's latest lag measured.
function last(g) {
  for (let i = g.lag.length - 1; i >= 0; i--) if (g.lag[i] !== null) return g.lag[i];
  return 0;
}
