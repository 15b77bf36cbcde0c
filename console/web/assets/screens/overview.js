// Overview: the brokers, the controller group, the partitions' health,
// the warnings with the command that fixes each, and the autopilot.

import {badge, el, note, section} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';

export default {
  title: 'Overview',
  mount(root, ctx) {
    const stats = el('div', {class: 'stats'});
    const warnings = el('div');
    const brokers = table({
      sort: ['id', 'asc'],
      empty: 'No brokers registered.',
      columns: [
        {key: 'id', title: 'Broker', numeric: true},
        {key: 'rack', title: 'Rack', render: (b) => b.rack || '—'},
        {key: 'listeners', title: 'Listeners (advertised)', sortable: false, render: listeners},
        {key: 'gossip', title: 'Gossip', render: (b) => badge(b.gossip || 'unknown', tone(b.gossip, 'alive'))},
        {key: 'registered', title: 'Registered', render: (b) => badge(b.registered || 'unknown', tone(b.registered, 'registered'))},
        {key: 'disk_bytes', title: 'Disk used', numeric: true, render: (b) => fmt.bytes(b.disk_bytes)},
      ],
    });
    const controller = el('div');
    const autopilot = el('div');
    root.append(
      stats,
      warnings,
      section('Brokers', brokers.el),
      el('div', {class: 'grid'}, section('Controller group', controller), section('Autopilot', autopilot)),
    );

    return {
      async refresh() {
        const o = await ctx.api.get('overview');
        if (!ctx.live()) return;
        const p = o.partitions || {};
        stats.replaceChildren(
          stat('Brokers', fmt.count((o.brokers || []).length)),
          stat('Partitions', fmt.count(p.total)),
          stat('Under-replicated', fmt.count(p.under_replicated), p.under_replicated ? 'warn' : null),
          stat('Offline', fmt.count(p.offline), p.offline ? 'bad' : null),
          stat('Active controller', o.controller ? 'broker ' + o.controller : 'none', o.controller ? null : 'bad'),
        );
        warnings.replaceChildren(warningList(o.warnings || []));
        brokers.setRows(o.brokers || []);
        controller.replaceChildren(controllerGroup(o));
        autopilot.replaceChildren(autopilotState(o.autopilot));
      },
    };
  },
};

function stat(label, value, tone) {
  return el('div', {class: 'stat' + (tone ? ' ' + tone : '')}, el('div', {class: 'label'}, label), el('div', {class: 'value'}, value));
}

function tone(state, good) {
  if (!state) return 'plain';
  return state === good ? 'ok' : 'warn';
}

function listeners(b) {
  const rows = (b.listeners || []).map((l) =>
    el('div', null, el('span', {class: 'muted'}, l.name + ' '), el('code', null, l.address),
      l.advertised && l.advertised !== l.address ? [' → ', el('code', null, l.advertised)] : null));
  return el('div', {class: 'lines'}, rows.length ? rows : '—');
}

function warningList(ws) {
  if (!ws.length) return section('Health', el('p', {class: 'success'}, 'No warnings: every partition has its replicas and a leader.'));
  return section('Health',
    el('ul', {class: 'warning-list'}, ws.map((w) =>
      el('li', null, el('div', null, w.message),
        w.command ? el('div', null, el('span', {class: 'muted'}, 'fix: '), el('code', {class: 'command'}, w.command)) : null))));
}

function controllerGroup(o) {
  const g = o.controller_group;
  if (!g) {
    return el('div', null, el('p', null, 'A single controller: broker ', String(o.controller || '—'), '.'),
      note('Without a controller group, the controller is not replicated.'));
  }
  const rows = table({
    sort: ['id', 'asc'],
    columns: [
      {key: 'id', title: 'Candidate', numeric: true},
      {key: 'address', title: 'Address', render: (c) => el('code', null, c.address || '—')},
      {key: 'state', title: 'State', value: (c) => (c.id === g.active ? 'active' : c.answers ? 'standby' : 'down'),
        render: (c) => (c.id === g.active ? badge('active', 'ok') : c.answers ? badge('standby', 'plain') : badge('not answering', 'bad'))},
    ],
    rows: g.candidates || [],
  });
  return el('div', null,
    el('p', null, `${g.answering} of ${g.voters} candidates answer; a quorum is ${g.quorum}.`),
    rows.el);
}

function autopilotState(a) {
  if (!a || !a.holder) {
    return el('div', null, el('p', null, 'No autopilot holds the lease.'),
      note('gostream-ctl autopilot fails over a silent broker and recovers it by itself (docs/autopilot.md).'));
  }
  const actions = table({
    sort: ['time', 'desc'],
    empty: 'No actions yet.',
    columns: [
      {key: 'time', title: 'When', render: (e) => fmt.time(e.time)},
      {key: 'action', title: 'Action'},
      {key: 'detail', title: 'Detail', class: 'wrap'},
    ],
    rows: a.actions || [],
  });
  return el('div', null,
    el('p', null, 'Lease held by ', el('strong', null, a.holder),
      a.expires ? ', until ' + fmt.clock(a.expires) : '', '.'),
    el('h3', null, 'Last actions'), actions.el);
}
