// Durable Streams: every stream the principal may describe, with its
// content type, size, records, live readers (the cluster's, as of the
// survey's round), the stream it was forked from, and whether it is
// sealed.

import {badge, el, link, note} from '../dom.js';
import * as fmt from '../format.js';
import {table} from '../table.js';
import {surveyNote} from './topics.js';

export default {
  title: 'Durable Streams',
  mount(root, ctx) {
    const list = table({
      sort: ['path', 'asc'],
      empty: 'No streams (or none this principal may describe). PUT /v1/stream/PATH creates one.',
      columns: [
        {key: 'path', title: 'Path', render: (s) => el('code', null, s.path)},
        {key: 'contentType', title: 'Content type', render: (s) => s.contentType || '—'},
        {key: 'bytes', title: 'Size', numeric: true, render: (s) => fmt.bytes(s.bytes)},
        {key: 'records', title: 'Records', numeric: true, render: (s) => fmt.count(s.records)},
        {key: 'readers', title: 'Readers', numeric: true, render: (s) => fmt.count(s.readers)},
        {key: 'forkedFrom', title: 'Forked from', render: (s) => (s.forkedFrom ? el('code', null, s.forkedFrom) : '—')},
        {key: 'topic', title: 'Topic', render: (s) => link('#/topics/' + encodeURIComponent(s.topic), s.topic)},
        {key: 'sealed', title: 'State', value: (s) => (s.deleted ? 2 : s.sealed ? 1 : 0),
          render: (s) => (s.deleted ? badge('deleted (forks remain)', 'warn') : s.sealed ? badge('sealed', 'plain') : badge('open', 'ok'))},
      ],
    });
    const age = note();
    root.append(el('section', {class: 'panel'}, list.el, age,
      note('Every node serves every stream at /v1/stream/PATH on its HTTP address (docs/durable-streams.md). ' +
        'Readers are the long-polls and SSE connections open on all the nodes together; — when a node did not answer the survey.')));
    return {
      async refresh() {
        const r = await ctx.api.get('streams');
        if (!ctx.live()) return;
        list.setRows(r.streams);
        age.textContent = surveyNote(r);
      },
    };
  },
};
