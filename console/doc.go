// Package console is the web console every node serves under /ui/ on its
// HTTP address (docs/console.md): its page and files, embedded from web/
// (plain HTML, CSS and JavaScript modules, no build step), and the JSON
// API the page reads (/ui/api/).
//
// It is a front end, like rpcapi, kafkaapi and durable: it decodes a
// browser's request, decides whether the principal may (Config.Authorize,
// the node's authorizer: the same ACLs and the same decision every other
// front end's requests get), and then reads or changes the cluster as a
// client would, through package client over the cluster's RPC, as the
// node itself. Lists leave out what the principal may not describe.
//
// Every answer carries the headers of docs/console.md (no sniffing, no
// framing, a content security policy with no inline script); a request
// that changes anything needs the X-Gostream-Console header, a JSON body
// and, when the browser sends them, the node's own origin, so that a page
// elsewhere cannot make a browser act (cross-site request forgery).
//
// Files: console.go (the handler, routes, headers, the checks every
// request passes, errors), query.go (strict query parameters), web.go
// (the embedded files), one file per screen's API (overview.go,
// topics.go, messages.go, produce.go, tail.go, groups.go, streams.go,
// acls.go, history.go, series.go), and survey.go: the rounds in which the
// console asks the whole cluster, every SurveyInterval while the page is
// open, for what the topics and groups lists and the lag history show
// (Server.Close stops them).
//
// It imports client, metadata, record and transport, never the server's
// packages: the node (package node) builds it and gives it its client and
// its authorizer.
package console
