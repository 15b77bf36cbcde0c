// A topic: its partitions (leader, replicas, active set, high
// watermark, log start, every replica's lag), its configuration and the
// groups that read it, asked of the cluster at each refresh.

import {badge, definitions, el, link, section} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';

export default {
  title: 'Topic',
  mount(root, ctx) {
    const name = ctx.params[0];
    ctx.setTitle(name);
    ctx.crumbs(link('#/topics', 'Topics'), name);
    const stats = el('div', {class: 'stats'});
    const partitions = table({
      sort: ['partition', 'asc'],
      columns: [
        {key: 'partition', title: 'Partition', numeric: true},
        {key: 'leader', title: 'Leader', numeric: true, render: (p) => (p.leader > 0 ? String(p.leader) : badge('none', 'bad'))},
        {key: 'replicas', title: 'Replicas', value: (p) => (p.replicas || []).join(','), render: (p) => (p.replicas || []).join(', ')},
        {key: 'active', title: 'Active set', value: (p) => (p.active || []).length, render: activeCell},
        {key: 'log_start', title: 'Log start', numeric: true, render: (p) => fmt.count(p.log_start)},
        {key: 'high_watermark', title: 'High watermark', numeric: true, render: (p) => fmt.count(p.high_watermark)},
        {key: 'records', title: 'Records', numeric: true, value: (p) => p.high_watermark - p.log_start,
          render: (p) => fmt.count(p.high_watermark - p.log_start)},
        {key: 'lag', title: 'Replica lag', value: (p) => Math.max(0, ...(p.replica_lag || []).map((r) => r.lag || 0)), render: lagCell},
      ],
    });
    const config = el('div');
    const groups = table({
      sort: ['lag', 'desc'],
      empty: 'No group has committed offsets on this topic.',
      onRow: (g) => { location.hash = '#/groups/' + encodeURIComponent(g.group); },
      columns: [
        {key: 'group', title: 'Group', render: (g) => link('#/groups/' + encodeURIComponent(g.group), g.group)},
        {key: 'lag', title: 'Lag', numeric: true, render: (g) => fmt.count(g.lag)},
      ],
    });
    root.append(
      stats,
      el('div', {class: 'toolbar'}, link('#/messages?topic=' + encodeURIComponent(name), 'Browse messages →')),
      section('Partitions', partitions.el),
      el('div', {class: 'grid'}, section('Configuration', config), section('Consumer groups', groups.el)),
    );
    return {
      async refresh() {
        const t = await ctx.api.get('topics/' + encodeURIComponent(name));
        if (!ctx.live()) return;
        const ps = t.partitions || [];
        stats.replaceChildren(
          stat('Partitions', fmt.count(ps.length)),
          stat('Replication', fmt.count(t.replication_factor)),
          stat('Records', fmt.count(ps.reduce((n, p) => n + (p.high_watermark - p.log_start), 0))),
          stat('Size', fmt.bytes(t.bytes)),
        );
        partitions.setRows(ps);
        config.replaceChildren(configList(t.config || {}));
        groups.setRows(t.groups || []);
      },
    };
  },
};

function stat(label, value) {
  return el('div', {class: 'stat'}, el('div', {class: 'label'}, label), el('div', {class: 'value'}, value));
}

function activeCell(p) {
  const active = p.active || [];
  const out = (p.replicas || []).filter((r) => !active.includes(r));
  return el('span', null, active.join(', ') || '—', out.length ? [' ', badge('out: ' + out.join(', '), 'warn')] : null);
}

function lagCell(p) {
  const rs = p.replica_lag || [];
  if (!rs.length) return '—';
  return el('div', {class: 'lines'}, rs.map((r) =>
    el('div', null, 'broker ' + r.broker + ': ', r.lag === null || r.lag === undefined ? el('span', {class: 'muted'}, 'unknown') : fmt.count(r.lag))));
}

function configList(cfg) {
  const keys = Object.keys(cfg).sort();
  if (!keys.length) return el('p', {class: 'muted'}, 'Defaults only.');
  return definitions(keys.map((k) => [el('code', null, k), String(cfg[k])]));
}
