// Overview: the brokers, the controller group, the partitions' health,
// the warnings with the command that fixes each, and the autopilot.

import {badge, el, note, section} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';
import {eventDetail} from './history.js';

export default {
  title: 'Overview',
  mount(root, ctx) {
    const stats = el('div', {class: 'stats'});
    const warnings = el('div');
    const gossipFrom = note();
    const brokers = table({
      sort: ['id', 'asc'],
      empty: 'No brokers.',
      columns: [
        {key: 'id', title: 'Broker', numeric: true},
        {key: 'rack', title: 'Rack', render: (b) => b.rack || '—'},
        {key: 'listeners', title: 'Listeners (as clients dial them)', sortable: false, render: listeners},
        {key: 'gossip', title: 'Gossip', render: (b) => el('span', null, badge(b.gossip || 'unknown', b.gossip === 'alive' ? 'ok' : 'warn'),
          b.gossipDisputed ? el('span', {class: 'muted'}, ' disputed') : null)},
        {key: 'registered', title: 'Registered', render: (b) => (b.registered ? badge('registered', 'ok') : badge('not registered', 'warn'))},
        {key: 'answers', title: 'Answers', render: (b) => (b.answers ? badge('yes', 'ok') : el('span', {title: b.error || ''}, badge('no', 'bad')))},
        {key: 'replicas', title: 'Replicas', numeric: true, render: (b) => fmt.count(b.replicas)},
        {key: 'leaders', title: 'Leads', numeric: true, render: (b) => fmt.count(b.leaders)},
        {key: 'dataBytes', title: 'Disk used', numeric: true, render: (b) => (b.dataBytes === null ? el('span', {class: 'muted', title: b.statusError || ''}, 'unknown') : fmt.bytes(b.dataBytes))},
      ],
    });
    const controller = el('div');
    const autopilot = el('div');
    root.append(
      stats,
      warnings,
      section('Brokers', brokers.el, gossipFrom),
      el('div', {class: 'grid'}, section('Controller group', controller), section('Autopilot', autopilot)),
    );

    return {
      async refresh() {
        const o = await ctx.api.get('overview');
        if (!ctx.live()) return;
        const p = o.partitions;
        stats.replaceChildren(
          stat('Brokers', fmt.count(o.brokers.length)),
          stat('Partitions', fmt.count(p.total)),
          stat('Under-replicated', fmt.count(p.underReplicated), p.underReplicated ? 'warn' : null),
          stat('Offline', fmt.count(p.offline), p.offline ? 'bad' : null),
          stat('Active controller', o.controller ? 'broker ' + o.controller : 'none', o.controller && o.controllerAnswers ? null : 'bad'),
        );
        warnings.replaceChildren(health(o));
        brokers.setRows(o.brokers);
        gossipFrom.textContent = o.gossipFrom ? 'Gossip states as seen by ' + o.gossipFrom + '.' : '';
        controller.replaceChildren(controllerGroup(o));
        autopilot.replaceChildren(autopilotState(o.autopilot));
      },
    };
  },
};

function stat(label, value, tone) {
  return el('div', {class: 'stat' + (tone ? ' ' + tone : '')}, el('div', {class: 'label'}, label), el('div', {class: 'value'}, value));
}

function listeners(b) {
  const line = (name, address) => el('div', null, el('span', {class: 'muted'}, name + ' '), el('code', null, address));
  const rows = [];
  if (b.rpc) rows.push(line('rpc', b.rpc));
  for (const l of b.listeners || []) rows.push(line('rpc ' + l.name, l.address));
  if (b.http) rows.push(line('http', b.http));
  for (const l of b.kafka || []) rows.push(line('kafka' + (l.name ? ' ' + l.name : ''), l.address));
  return el('div', {class: 'lines'}, rows.length ? rows : '—');
}

function health(o) {
  const ws = o.warnings || [];
  const refusal = o.controllerRefusal ? el('p', {class: 'error'}, 'The controller refuses every change: ' + o.controllerRefusal) : null;
  if (!ws.length) {
    return section('Health', refusal, el('p', {class: 'success'}, 'No warnings: every partition has its replicas and a leader.'));
  }
  return section('Health', refusal,
    el('ul', {class: 'warning-list'}, ws.map((w) =>
      el('li', null, el('div', null, w.message),
        w.command ? el('div', null, el('span', {class: 'muted'}, 'fix: '), el('code', {class: 'command'}, w.command)) : null,
        !w.command && w.pending ? el('div', null, el('span', {class: 'muted'}, 'then: '), el('code', {class: 'command'}, w.pending)) : null))));
}

function controllerGroup(o) {
  const g = o.controllerGroup;
  if (!g) {
    return el('div', null, el('p', null, 'A single controller: broker ', String(o.controller || '—'),
      o.controllerAnswers ? ', answering.' : ', not answering.'),
    note('Without a controller group, the controller is not replicated (docs/controller-raft.md).'));
  }
  const rows = table({
    sort: ['id', 'asc'],
    columns: [
      {key: 'id', title: 'Candidate', numeric: true},
      {key: 'address', title: 'Address', render: (c) => el('code', null, c.address || '—')},
      {key: 'state', title: 'State', value: (c) => (c.active ? 0 : c.answers ? 1 : 2),
        render: (c) => (c.active ? badge('active', 'ok') : c.answers ? badge((c.state || 'standby').toLowerCase(), 'plain') : badge('not answering', 'bad'))},
      {key: 'voter', title: 'Voter', render: (c) => (c.voter ? 'yes' : 'no')},
      {key: 'term', title: 'Term', numeric: true, render: (c) => (c.answers ? fmt.count(c.term) : '—')},
    ],
    rows: g.candidates || [],
  });
  return el('div', null,
    el('p', null, `${g.answering} of ${g.voters} voters answer; a quorum is ${g.quorum}.`),
    rows.el);
}

function autopilotState(a) {
  const actions = table({
    sort: ['time', 'desc'],
    empty: a.actionsError ? 'Its actions could not be read: ' + a.actionsError : 'No actions yet.',
    columns: [
      {key: 'time', title: 'When', render: (e) => fmt.time(e.time)},
      {key: 'action', title: 'Action', render: (e) => el('code', null, e.action)},
      {key: 'detail', title: 'Detail', class: 'wrap', sortable: false, render: eventDetail},
    ],
    rows: a.actions || [],
  });
  const lease = a.holder
    ? el('p', null, 'Lease held by ', el('strong', null, a.holder), a.ttlMs ? ` (granted for ${fmt.duration(a.ttlMs)})` : '', '.')
    : el('p', null, 'No autopilot holds the lease.',
      note('gostream-ctl autopilot fails over a silent broker and recovers it by itself (docs/autopilot.md).'));
  return el('div', null, lease, el('h3', null, 'Last actions'), actions.el);
}
