package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/metadata"
	"gostream/security"
)

// The commands of docs/security.md: a development CA, tokens, and ACLs.

func certCommand() *cli.Command {
	return parent("cert", "certificates for a development cluster",
		described(leaf("init", "write a development CA, one certificate per node (node1, node2, ...) and one for the operator (admin) into DIR",
			"DIR", args(1, 1), certInitAction,
			&cli.IntFlag{Name: "nodes", Usage: "how many node certificates, `N`", Value: 3},
			&cli.StringSliceFlag{Name: "host", Usage: "a `HOST` or IP the node certificates are valid for, besides localhost, 127.0.0.1 and ::1 (repeat it)"},
			&cli.StringSliceFlag{Name: "user", Usage: "another client certificate `NAME` to write besides admin (repeat it)"},
			&cli.DurationFlag{Name: "valid-for", Usage: "how long the certificates are valid, `DURATION`", Value: 365 * 24 * time.Hour},
		),
			`Writes into DIR (made if missing) ca.crt and ca.key, nodeN.crt and
nodeN.key for each node (Common Name nodeN, the principal to list in
--superusers), and admin.crt, admin.key and one pair per --user (client
certificates whose Common Name is the principal); keys mode 0600. It
talks to no cluster, and prints the node flags and the exports for
gostream-ctl. A DIR that holds a CA already is refused (Exists).`),
	)
}

func certInitAction(c *cli.Context) error {
	dir := c.Args().First()
	nodes := c.Int("nodes")
	if nodes < 1 || nodes > 1000 {
		return exitcode.Usagef("InvalidFlag", "--nodes %d: want 1 to 1000", nodes)
	}
	validFor := c.Duration("valid-for")
	if validFor <= 0 {
		return exitcode.Usagef("InvalidFlag", "--valid-for %s: want a positive duration", validFor)
	}
	users := append([]string{"admin"}, c.StringSlice("user")...)
	for _, u := range users {
		if err := security.CheckPrincipal(u); err != nil || strings.ContainsAny(u, `/\`) || strings.HasPrefix(u, "node") || u == "ca" {
			return exitcode.Usagef("InvalidFlag", "--user %q: want a name without white space, commas or slashes, that is not ca or node...", u)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return exitcode.Fail("CannotWrite", err)
	}
	// Never overwrite a CA: certificates signed by it would stop working.
	if _, err := os.Stat(filepath.Join(dir, "ca.crt")); err == nil {
		return exitcode.Fail("Exists", fmt.Errorf("%s already holds a CA (ca.crt); remove the directory or choose another to make a new one", dir))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return exitcode.Fail("CannotWrite", err)
	}
	ca, err := security.NewCA("gostream development CA", validFor)
	if err != nil {
		return exitcode.Fail("CannotWrite", err)
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return exitcode.Fail("CannotWrite", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.key"), caKey, 0o600); err != nil {
		return exitcode.Fail("CannotWrite", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.PEM, 0o644); err != nil {
		return exitcode.Fail("CannotWrite", err)
	}
	hosts := append([]string{"localhost", "127.0.0.1", "::1"}, c.StringSlice("host")...)
	notAfter := time.Now().Add(validFor)
	var written []string
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("node%d", i)
		is, err := ca.Issue(security.IssueOptions{Name: name, Hosts: hosts, NotAfter: notAfter})
		if err == nil {
			err = is.WriteFiles(dir, name)
		}
		if err != nil {
			return exitcode.Fail("CannotWrite", err)
		}
		written = append(written, name)
	}
	for _, u := range users {
		is, err := ca.Issue(security.IssueOptions{Name: u, NotAfter: notAfter})
		if err == nil {
			err = is.WriteFiles(dir, u)
		}
		if err != nil {
			return exitcode.Fail("CannotWrite", err)
		}
		written = append(written, u)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "Wrote a development CA and %d certificates to %s, valid until %s:\n", len(written), dir, notAfter.UTC().Format("2006-01-02"))
	fmt.Fprintf(w, "  ca.crt, ca.key (keep ca.key private: it signs certificates)\n")
	for _, n := range written {
		fmt.Fprintf(w, "  %s.crt, %s.key (principal %s)\n", n, n, n)
	}
	fmt.Fprintf(w, "\nNode N: gostream-node --tls-cert %[1]s/nodeN.crt --tls-key %[1]s/nodeN.key --tls-ca %[1]s/ca.crt --superusers %[2]s,admin ...\n", dir, strings.Join(written[:nodes], ","))
	fmt.Fprintf(w, "Operator: export GOSTREAM_TLS_CA=%[1]s/ca.crt GOSTREAM_TLS_CERT=%[1]s/admin.crt GOSTREAM_TLS_KEY=%[1]s/admin.key\n", dir)
	return nil
}

func tokenCommand() *cli.Command {
	return parent("token", "bearer tokens",
		described(leaf("create", "make a token for a principal: print it, and the line of the nodes' --auth-tokens-file that accepts it",
			"", args(0, 0), tokenCreateAction,
			&cli.StringFlag{Name: "principal", Usage: "the principal `NAME` the token authenticates (required)"},
			&cli.StringFlag{Name: "tokens-file", Usage: "append the line to the tokens `FILE` too (then SIGHUP the nodes)"},
			&cli.StringFlag{Name: "out", Usage: "write the token to `FILE` (mode 0600), for --token-file, instead of printing it"},
		),
			`Makes a token, 32 random bytes in URL-safe base64, and prints it with the
line of the nodes' tokens file that accepts it, NAME sha256:HEX (the
nodes never hold the token itself). Removing that line, and SIGHUP to
the nodes, revokes the token. It talks to no cluster.`),
	)
}

func tokenCreateAction(c *cli.Context) error {
	if !c.IsSet("principal") {
		return exitcode.Usagef("MissingFlag", "--principal is required: the principal the token authenticates")
	}
	token, line, err := security.NewToken(c.String("principal"))
	if err != nil {
		return exitcode.Usagef("InvalidFlag", "--principal: %v", err)
	}
	if f := c.String("tokens-file"); f != "" {
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return exitcode.Fail("CannotWrite", err)
		}
		_, err = fmt.Fprintln(fh, line)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return exitcode.Fail("CannotWrite", err)
		}
	}
	w := c.App.Writer
	if out := c.String("out"); out != "" {
		if err := os.WriteFile(out, []byte(token+"\n"), 0o600); err != nil {
			return exitcode.Fail("CannotWrite", err)
		}
		fmt.Fprintf(w, "token written to %s\n", out)
	} else {
		fmt.Fprintf(w, "token: %s\n", token)
	}
	fmt.Fprintf(w, "tokens file line: %s\n", line)
	return nil
}

func aclCommand() *cli.Command {
	selectors := func() []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "principal", Usage: "the principal `NAME` (* for every authenticated principal)"},
			&cli.StringSliceFlag{Name: "operation", Usage: "`OP`: read, write, create, delete, alter, describe or operate (repeat it for several)"},
			&cli.BoolFlag{Name: "cluster", Usage: "the resource is the cluster"},
			&cli.StringFlag{Name: "topic", Usage: "the resource is topic `NAME` (* for every topic)"},
			&cli.StringFlag{Name: "group", Usage: "the resource is consumer group `NAME` (* for every group)"},
			&cli.StringFlag{Name: "stream", Usage: "the resource is the Durable Streams stream at `PATH` (after /v1/stream/; * for every stream)"},
			&cli.BoolFlag{Name: "prefix", Usage: "the name is a prefix: every resource whose name begins with it"},
		}
	}
	return parent("acl", "access control entries (once authorization is on, what no entry allows is denied)",
		described(leaf("add", "allow a principal operations on a resource", "", args(0, 0), aclChangeAction(true), selectors()...),
			`Adds one entry per --operation: --principal may do that operation on the
resource (exactly one of --cluster, --topic, --group, --stream; with
--prefix, every resource of that type whose name begins with NAME).
Prints the entries that were not there already. Needs alter on the
cluster.`),
		described(leaf("remove", "take back entries added with acl add", "", args(0, 0), aclChangeAction(false), selectors()...),
			`Removes the entries the flags name, as acl add takes them, and prints
those that were there. Needs alter on the cluster.`),
		described(leaf("list", "the entries, of one principal with --principal", "", args(0, 0), aclListAction,
			&cli.StringFlag{Name: "principal", Usage: "only the entries of principal `NAME`"}),
			`The cluster's ACLs as the active controller holds them, sorted by
principal, resource, name, pattern and operation; with --principal,
only that principal's entries (an entry for * is not its). Needs
describe on the cluster.`),
	)
}

// aclEntries builds the entries the flags of acl add or remove name: one
// per operation.
func aclEntries(c *cli.Context) ([]client.ACL, error) {
	principal := strings.TrimSpace(c.String("principal"))
	if principal == "" {
		return nil, exitcode.Usagef("MissingFlag", "--principal is required")
	}
	var rt metadata.ResourceType
	var name string
	n := 0
	if c.Bool("cluster") {
		rt, n = metadata.ResourceCluster, n+1
	}
	for _, f := range []struct {
		flag string
		rt   metadata.ResourceType
	}{{"topic", metadata.ResourceTopic}, {"group", metadata.ResourceGroup}, {"stream", metadata.ResourceStream}} {
		if c.IsSet(f.flag) {
			rt, name, n = f.rt, c.String(f.flag), n+1
		}
	}
	if n != 1 {
		return nil, exitcode.Usagef("InvalidFlag", "name one resource: --cluster, --topic NAME, --group NAME or --stream PATH")
	}
	ops := c.StringSlice("operation")
	if len(ops) == 0 {
		return nil, exitcode.Usagef("MissingFlag", "--operation is required (one of %v for a %s)", metadata.OperationsOf(rt), rt)
	}
	pattern := metadata.PatternLiteral
	if c.Bool("prefix") {
		pattern = metadata.PatternPrefix
	}
	var out []client.ACL
	for _, op := range ops {
		a := metadata.ACL{Principal: principal, Resource: rt, Name: name, Pattern: pattern, Operation: metadata.Operation(strings.TrimSpace(op))}
		if err := a.Validate(); err != nil {
			return nil, exitcode.Usagef("InvalidFlag", "%v", err)
		}
		out = append(out, client.ACL{Principal: a.Principal, Resource: string(a.Resource), Name: a.Name, Pattern: string(a.Pattern), Operation: string(a.Operation)})
	}
	return out, nil
}

func aclChangeAction(add bool) cli.ActionFunc {
	return func(c *cli.Context) error {
		entries, err := aclEntries(c)
		if err != nil {
			return err
		}
		return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
			var changed []client.ACL
			var err error
			if add {
				changed, err = cl.AddACLs(ctx, entries, requester())
			} else {
				changed, err = cl.RemoveACLs(ctx, entries, requester())
			}
			if err != nil {
				return refused(err)
			}
			if g.output == outputJSON {
				return writeJSON(c.App.Writer, struct {
					Changed []client.ACL `json:"changed"`
				}{Changed: orEmptyACLs(changed)})
			}
			verb, none := "Added", "Every entry was there already; nothing changed."
			if !add {
				verb, none = "Removed", "No such entry; nothing changed."
			}
			if len(changed) == 0 {
				_, err := fmt.Fprintln(c.App.Writer, none)
				return err
			}
			fmt.Fprintf(c.App.Writer, "%s %d:\n", verb, len(changed))
			return printACLs(c, changed)
		})
	}
}

func aclListAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		acls, err := cl.ListACLs(ctx, c.String("principal"))
		if err != nil {
			return refused(err)
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, struct {
				ACLs []client.ACL `json:"acls"`
			}{ACLs: orEmptyACLs(acls)})
		}
		if len(acls) == 0 {
			_, err := fmt.Fprintln(c.App.Writer, "No ACLs.")
			return err
		}
		return printACLs(c, acls)
	})
}

func printACLs(c *cli.Context, acls []client.ACL) error {
	tw := newTable(c.App.Writer)
	fmt.Fprintln(tw, "PRINCIPAL\tRESOURCE\tNAME\tPATTERN\tOPERATION")
	for _, a := range acls {
		name := a.Name
		if name == "" {
			name = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Principal, a.Resource, name, a.Pattern, a.Operation)
	}
	return tw.Flush()
}

func orEmptyACLs(a []client.ACL) []client.ACL {
	if a == nil {
		return []client.ACL{}
	}
	return a
}
