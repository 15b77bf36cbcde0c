// A topic: its partitions (leader, replicas, active set, high
// watermark, log start, every replica's lag), its configuration and the
// groups that read it, asked of the cluster at each refresh.

import {badge, definitions, el, fill, link, note, section} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';

export default {
  title: 'Topic',
  mount(root, ctx) {
    const name = ctx.params[0];
    ctx.setTitle(name);
    ctx.crumbs(link('#/topics', 'Topics'), name);
    const stats = el('div', {class: 'stats'});
    const about = el('div');
    const unavailable = note();
    const partitions = table({
      sort: ['partition', 'asc'],
      columns: [
        {key: 'partition', title: 'Partition', numeric: true},
        {key: 'leader', title: 'Leader', numeric: true, render: (p) => (p.leader > 0 ? String(p.leader) : badge('none', 'bad'))},
        {key: 'replicas', title: 'Replicas', value: (p) => p.replicas.join(','), render: (p) => p.replicas.join(', ')},
        {key: 'active', title: 'Active set', value: (p) => p.active.length, render: activeCell},
        {key: 'logStart', title: 'Log start', numeric: true, render: (p) => fmt.count(p.logStart)},
        {key: 'highWatermark', title: 'High watermark', numeric: true, render: (p) => fmt.count(p.highWatermark)},
        {key: 'records', title: 'Records', numeric: true, value: records, render: (p) => fmt.count(records(p))},
        {key: 'bytes', title: 'Size', numeric: true, render: (p) => fmt.bytes(p.bytes)},
        {key: 'lag', title: 'Replicas: lag behind the leader', value: maxLag, render: lagCell},
      ],
    });
    const config = el('div');
    const groupsNote = note();
    const groups = table({
      sort: ['lag', 'desc'],
      empty: 'No group reads this topic.',
      onRow: (g) => { location.hash = '#/groups/' + encodeURIComponent(g.group); },
      columns: [
        {key: 'group', title: 'Group', render: (g) => link('#/groups/' + encodeURIComponent(g.group), g.group)},
        {key: 'lag', title: 'Lag', numeric: true, render: (g) => fmt.count(g.lag)},
      ],
    });
    root.append(
      stats,
      el('div', {class: 'toolbar'}, link('#/messages?topic=' + encodeURIComponent(name), 'Browse its messages →')),
      about,
      section('Partitions', partitions.el, unavailable),
      el('div', {class: 'grid'}, section('Configuration', config), section('Consumer groups', groups.el, groupsNote)),
    );
    return {
      async refresh() {
        const t = await ctx.api.get('topics/' + encodeURIComponent(name));
        if (!ctx.live()) return;
        const ps = t.partitions;
        stats.replaceChildren(
          stat('Partitions', fmt.count(ps.length)),
          stat('Replication', fmt.count(t.replicationFactor)),
          stat('Records', fmt.count(ps.reduce((n, p) => n + (records(p) || 0), 0))),
          stat('Size', fmt.bytes(ps.reduce((n, p) => n + (p.bytes || 0), 0))),
        );
        fill(about,
          t.stream ? el('p', null, 'Holds the Durable Streams stream ', el('code', null, t.stream.path), ' (', t.stream.contentType, ').') : null,
          t.sealed ? el('p', null, badge('sealed', 'plain'), ' No more records can be written.') : null,
          t.internal && !t.stream ? el('p', {class: 'muted'}, 'One of the cluster\'s own topics.') : null,
        );
        partitions.setRows(ps);
        unavailable.textContent = t.unavailable && t.unavailable.length ? 'Did not answer: ' + t.unavailable.join('; ') + '.' : '';
        config.replaceChildren(configList(t.config));
        groups.setRows(t.groups);
        groupsNote.textContent = t.groupsError ? 'Groups: ' + t.groupsError : t.groupsAt ? 'Lag from the survey of ' + fmt.ago(t.groupsAt) + '.' : '';
      },
    };
  },
};

function stat(label, value) {
  return el('div', {class: 'stat'}, el('div', {class: 'label'}, label), el('div', {class: 'value'}, value));
}

function records(p) {
  return p.highWatermark === null || p.logStart === null ? null : p.highWatermark - p.logStart;
}

function maxLag(p) {
  return Math.max(0, ...p.replicaStates.map((r) => r.lag || 0));
}

function activeCell(p) {
  const out = p.replicas.filter((r) => !p.active.includes(r));
  return el('span', null, p.active.join(', ') || '—', out.length ? [' ', badge('out: ' + out.join(', '), 'warn')] : null);
}

function lagCell(p) {
  return el('div', {class: 'lines'}, p.replicaStates.map((r) =>
    el('div', null, 'broker ' + r.broker + ' ',
      r.leader ? badge('leader', 'ok') : r.lag === null ? el('span', {class: 'muted'}, 'unknown') : fmt.count(r.lag),
      r.state && !r.leader ? el('span', {class: 'muted'}, ' ' + r.state) : null,
      r.problem ? el('span', {class: 'error'}, ' ' + r.problem) : null)));
}

function configList(cfg) {
  return definitions(cfg.map((c) => [el('code', null, c.key),
    el('span', null, configValue(c), c.default ? el('span', {class: 'muted'}, ' (default)') : null)]));
}

// configValue shows a configuration value in its unit: the keys of
// bytes and of milliseconds (docs/cli.md, topic create), -1 as none.
function configValue(c) {
  if (c.value === -1) return /\.ms$/.test(c.key) ? 'forever' : 'any amount';
  if (/bytes$/.test(c.key)) return fmt.bytes(c.value);
  if (/\.ms$/.test(c.key)) return fmt.duration(c.value);
  return fmt.count(c.value);
}
