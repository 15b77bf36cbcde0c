// A consumer group: its members and what each owns, the committed
// offset, log end and lag of every partition it reads (sortable by lag),
// reset-offsets with its dry run shown before the change, and delete.

import {button, el, errorBox, field, link, note, section, select} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';
import {stateBadge} from './groups.js';

export default {
  title: 'Consumer group',
  mount(root, ctx) {
    const name = ctx.params[0];
    ctx.setTitle(name);
    ctx.crumbs(link('#/groups', 'Consumer groups'), name);
    const summary = el('div', {class: 'stats'});
    const members = table({
      sort: ['id', 'asc'],
      empty: 'No members: the group is empty.',
      columns: [
        {key: 'id', title: 'Member', class: 'wrap', render: (m) => el('span', null, m.id,
          m.instanceId ? el('div', {class: 'muted'}, 'static: ' + m.instanceId) : null)},
        {key: 'clientId', title: 'Client', render: (m) => m.clientId || '—'},
        {key: 'host', title: 'Host', render: (m) => m.host || '—'},
        {key: 'owned', title: 'Owns', value: (m) => m.owned.reduce((n, t) => n + t.partitions.length, 0), render: owned},
        {key: 'lastHeartbeatMs', title: 'Last heard', numeric: true,
          render: (m) => (m.lastHeartbeatMs === null ? '—' : fmt.duration(m.lastHeartbeatMs) + ' ago')},
      ],
    });
    const offsets = table({
      sort: ['lag', 'desc'],
      empty: 'No committed offsets.',
      columns: [
        {key: 'topic', title: 'Topic', render: (o) => link('#/topics/' + encodeURIComponent(o.topic), o.topic)},
        {key: 'partition', title: 'Partition', numeric: true},
        {key: 'committed', title: 'Committed', numeric: true, render: (o) => (o.committed === null ? el('span', {class: 'muted'}, 'none') : fmt.count(o.committed))},
        {key: 'logEnd', title: 'Log end', numeric: true, render: (o) => fmt.count(o.logEnd)},
        {key: 'lag', title: 'Lag', numeric: true, render: (o) => (o.error ? el('span', {class: 'error', title: o.error}, 'unknown') : fmt.count(o.lag))},
      ],
    });
    const reset = resetForm(ctx, name);
    const remove = deleteGroup(ctx, name);
    root.append(summary, section('Members', members.el), section('Committed offsets', offsets.el), reset.el, remove);
    return {
      async refresh() {
        const g = await ctx.api.get('groups/' + encodeURIComponent(name));
        if (!ctx.live()) return;
        const os = g.partitions;
        summary.replaceChildren(
          stat('State', stateBadge(g.state)),
          stat('Protocol', el('span', null, g.protocol || '—', g.assignor ? el('span', {class: 'stat-sub'}, 'assignor ' + g.assignor) : null)),
          stat('Members', fmt.count(g.members.length)),
          stat('Total lag', fmt.count(g.lag)),
          stat('Coordinator', g.coordinator ? 'broker ' + g.coordinator : '—'),
        );
        members.setRows(g.members);
        offsets.setRows(os);
        reset.setTopics([...new Set(os.map((o) => o.topic))].sort());
      },
    };
  },
};

function stat(label, value) {
  return el('div', {class: 'stat'}, el('div', {class: 'label'}, label), el('div', {class: 'value'}, value));
}

function owned(m) {
  if (!m.owned.length) return el('span', {class: 'muted'}, 'nothing');
  return el('div', {class: 'lines'}, m.owned.map((t) => el('div', null, t.topic + ': ' + t.partitions.join(', '))));
}

// resetForm: pick a topic, its partitions and a target; "Dry run" shows
// every partition's current and new offset; "Reset offsets" then writes
// exactly that (only while the group has no members).
function resetForm(ctx, group) {
  const panel = section('Reset offsets');
  if (!ctx.who.cluster.operate) {
    panel.append(note('Resetting offsets needs operate on the cluster, which ', ctx.who.principal || 'this principal', ' does not have.'));
    return {el: panel, setTopics() {}};
  }
  const topic = el('select', {id: 'reset-topic', 'aria-label': 'Topic'});
  const partitions = el('input', {type: 'text', id: 'reset-partitions', placeholder: 'all', class: 'narrow'});
  const to = select({id: 'reset-to'}, [['earliest', 'Earliest'], ['latest', 'Latest'], ['offset', 'Offset'], ['shift', 'Shift by'], ['time', 'Time']], 'earliest');
  const value = el('input', {type: 'number', id: 'reset-value', class: 'narrow', hidden: true, 'aria-label': 'Offset or shift'});
  const when = el('input', {type: 'datetime-local', step: 1, id: 'reset-time', hidden: true, 'aria-label': 'Time'});
  to.addEventListener('change', () => {
    value.hidden = to.value !== 'offset' && to.value !== 'shift';
    when.hidden = to.value !== 'time';
    forget();
  });
  const out = el('div', {id: 'reset-result'});
  let planned = null; // the request whose dry run is shown
  const execute = button('Reset offsets', async () => {
    if (!planned) return;
    out.replaceChildren(el('p', {class: 'muted'}, 'Writing…'));
    try {
      const r = await ctx.api.post('groups/' + encodeURIComponent(group) + '/reset-offsets', Object.assign({}, planned, {execute: true}));
      out.replaceChildren(el('p', {class: 'success'}, 'Done: the group’s offsets are now these.'), plan(r));
      planned = null;
      execute.hidden = true;
      ctx.reload();
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  }, {class: 'danger primary', id: 'reset-execute', hidden: true});
  const dry = button('Dry run', async () => {
    forget();
    let req;
    try {
      req = request();
    } catch (err) {
      out.replaceChildren(errorBox(err));
      return;
    }
    try {
      const r = await ctx.api.post('groups/' + encodeURIComponent(group) + '/reset-offsets', req);
      planned = req;
      out.replaceChildren(el('p', null, 'Dry run: nothing written. Check the new offsets, then reset.'), plan(r));
      execute.hidden = false;
    } catch (err) {
      out.replaceChildren(errorBox(err));
    }
  }, {id: 'reset-dry-run'});
  for (const c of [topic, partitions, value, when]) c.addEventListener('input', forget);

  function forget() {
    planned = null;
    execute.hidden = true;
  }

  function request() {
    const req = {topic: topic.value, to: to.value};
    if (partitions.value.trim()) {
      req.partitions = partitions.value.split(',').map((s) => {
        const n = Number(s.trim());
        if (!Number.isInteger(n) || n < 0) throw new Error(`partitions: “${s.trim()}” is not a partition number (write 0,2,5)`);
        return n;
      });
    }
    if (to.value === 'offset' || to.value === 'shift') {
      if (value.value === '') throw new Error(to.value === 'offset' ? 'give the offset to reset to' : 'give the number of records to shift by (negative: back)');
      req.value = Number(value.value);
    }
    if (to.value === 'time') {
      if (!when.value) throw new Error('give the time to reset to');
      req.value = new Date(when.value).getTime();
    }
    return req;
  }

  panel.append(
    note('The group must have no members for the change; the dry run shows what it would write.'),
    el('div', {class: 'inline'}, field('Topic', topic), field('Partitions', partitions, 'comma-separated; empty: all'),
      field('To', el('span', null, to, ' ', value, when)), el('div', {class: 'actions'}, dry, execute)),
    out);
  return {
    el: panel,
    setTopics(names) {
      const cur = topic.value;
      if (names.join() === [...topic.options].map((o) => o.value).join()) return;
      topic.replaceChildren(...names.map((n) => el('option', {value: n, selected: n === cur}, n)));
    },
  };
}

function plan(r) {
  const t = table({
    sort: ['partition', 'asc'],
    caption: r.topic,
    columns: [
      {key: 'partition', title: 'Partition', numeric: true},
      {key: 'committed', title: 'Committed now', numeric: true, render: (o) => (o.committed === null ? 'none' : fmt.count(o.committed))},
      {key: 'new', title: 'New', numeric: true, render: (o) => (o.new === null ? 'left out' : fmt.count(o.new))},
      {key: 'note', title: 'Note', render: (o) => o.note || ''},
    ],
    rows: r.offsets || [],
  });
  return t.el;
}

// deleteGroup: a button, then a confirmation in place (no dialog).
function deleteGroup(ctx, group) {
  const out = el('div');
  const confirmRow = el('div', {class: 'actions', hidden: true},
    el('span', null, 'Delete ', el('strong', null, group), ' and all its committed offsets?'),
    button('Delete for good', async () => {
      try {
        await ctx.api.del('groups/' + encodeURIComponent(group));
        location.hash = '#/groups';
      } catch (err) {
        out.replaceChildren(errorBox(err));
        confirmRow.hidden = true;
      }
    }, {class: 'danger primary', id: 'delete-confirm'}),
    button('Cancel', () => { confirmRow.hidden = true; }));
  const start = button('Delete group…', () => {
    out.replaceChildren();
    confirmRow.hidden = false;
  }, {class: 'danger', id: 'delete-group'});
  return section('Delete', note('Needs delete on the group, and no members.'), el('div', {class: 'actions'}, start), confirmRow, out);
}
