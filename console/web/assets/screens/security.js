// Security: who you are and what you may do to the cluster, and the
// ACLs: the list, and adding or removing an entry for a principal
// allowed to (alter on the cluster). The form is shown disabled to a
// principal that may not, and a refusal of the node is shown as it
// comes.

import {badge, button, definitions, el, errorBox, field, note, section, select} from '../dom.js';
import {table} from '../table.js';

// The operations each kind of resource has (docs/security.md).
const OPERATIONS = {
  cluster: ['describe', 'alter', 'operate', 'create'],
  topic: ['read', 'write', 'create', 'delete', 'alter', 'describe'],
  group: ['read', 'describe', 'delete'],
  stream: ['read', 'write', 'create', 'delete', 'describe'],
};

export default {
  title: 'Security',
  mount(root, ctx) {
    const who = ctx.who;
    const may = who.cluster.alter;
    const out = el('div', {id: 'acl-result', role: 'status'});

    const you = section('You',
      definitions([
        ['Principal', who.principal || (who.security ? '—' : 'anyone: security is off')],
        ['Authentication', who.security ? badge('on', 'ok') : badge('off', 'bad')],
        ['On the cluster', el('span', null,
          right('describe', who.cluster.describe), ' ', right('alter', who.cluster.alter), ' ', right('operate', who.cluster.operate))],
        ['Node', 'broker ' + who.node + (who.version ? ', ' + who.version : '')],
      ]));

    const columns = [
      {key: 'principal', title: 'Principal'},
      {key: 'resource', title: 'Resource'},
      {key: 'name', title: 'Name', render: (a) => (a.resource === 'cluster' ? '—' : el('code', null, a.name))},
      {key: 'pattern', title: 'Pattern'},
      {key: 'operation', title: 'Operation'},
    ];
    if (may) {
      columns.push({key: 'remove', title: '', sortable: false, render: (a) =>
        button('Remove', () => change('DELETE', entryOf(a)), {class: 'danger', 'aria-label': `Remove ${a.operation} on ${a.resource} ${a.name || ''} for ${a.principal}`})});
    }
    const list = table({sort: ['principal', 'asc'], empty: 'No ACLs: only superusers may act.', columns});

    // The add form.
    const principal = el('input', {type: 'text', id: 'acl-principal', required: true, placeholder: 'alice or *'});
    const resource = select({id: 'acl-resource'}, Object.keys(OPERATIONS), 'topic');
    const name = el('input', {type: 'text', id: 'acl-name', placeholder: 'orders or *'});
    const pattern = select({id: 'acl-pattern'}, ['literal', 'prefix'], 'literal');
    const operation = select({id: 'acl-operation'}, OPERATIONS.topic, 'read');
    resource.addEventListener('change', () => {
      operation.replaceChildren(...OPERATIONS[resource.value].map((o) => el('option', {value: o}, o)));
      name.disabled = !may || resource.value === 'cluster';
      pattern.disabled = !may || resource.value === 'cluster';
    });
    const submit = el('button', {type: 'submit', class: 'primary', id: 'acl-add'}, 'Add ACL');
    const fields = el('fieldset', {disabled: !may, id: 'acl-fields'},
      el('div', {class: 'inline'},
        field('Principal', principal), field('Resource', resource), field('Name', name),
        field('Pattern', pattern), field('Operation', operation), el('div', {class: 'actions'}, submit)));
    const form = el('form', {id: 'acl-form'}, fields);
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const entry = {principal: principal.value.trim(), resource: resource.value, operation: operation.value, pattern: pattern.value, name: name.value.trim()};
      if (entry.resource === 'cluster') {
        entry.name = '';
        entry.pattern = 'literal';
      }
      change('POST', entry);
    });

    const refused = may ? null : el('p', {class: 'refused', id: 'acl-refused'},
      'Changing ACLs needs alter on the cluster, which ', el('strong', null, who.principal || 'this principal'), ' does not have: the form is disabled.');

    root.append(you, section('Add an ACL', refused, form, out), section('ACLs', list.el,
      note('An ACL allows one principal one operation on one resource; any operation implies describe. Principal * is every authenticated principal.')));

    async function change(method, entry) {
      out.replaceChildren();
      try {
        const r = method === 'POST' ? await ctx.api.post('acls', entry) : await ctx.api.del('acls', entry);
        const what = method === 'POST' ? (r.changed ? 'Added: ' : 'Already there: ') : (r.changed ? 'Removed: ' : 'Was not there: ');
        out.replaceChildren(el('p', {class: 'success'}, what + describe(r.entry)));
        await load();
      } catch (err) {
        out.replaceChildren(errorBox(err));
      }
    }

    async function load() {
      const r = await ctx.api.get('acls');
      if (!ctx.live()) return;
      list.setRows(r.acls);
    }

    return {refresh: load};
  },
};

function right(name, yes) {
  return badge((yes ? '' : 'no ') + name, yes ? 'ok' : 'plain');
}

function entryOf(a) {
  return {principal: a.principal, resource: a.resource, name: a.name || '', pattern: a.pattern || 'literal', operation: a.operation};
}

function describe(a) {
  const what = a.resource === 'cluster' ? 'the cluster' : `${a.resource} ${a.name}${a.pattern === 'prefix' ? '*' : ''}`;
  return `${a.principal} may ${a.operation} ${what}.`;
}
