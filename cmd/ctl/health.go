package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"gostream/cmd/internal/exitcode"
	"gostream/httpapi"
)

// healthResult is what gostream-ctl health prints, one per node asked.
type healthResult struct {
	Address  string   `json:"address"`
	Status   string   `json:"status"`
	Node     int32    `json:"node"`
	Problems []string `json:"problems,omitempty"`
}

func healthCommand() *cli.Command {
	return described(leaf("health", "ask one node's HTTP surface whether it is alive and serving everyone (GET /api/health); a degraded node's problems are printed and the exit status is 2",
		"", args(0, 0), healthAction,
		&cli.StringFlag{Name: "http", Usage: "the node's HTTP address `HOST:PORT`", Value: "127.0.0.1:9402"},
	),
		`GET /api/health on one node's HTTP address (--http; --bootstrap plays no
part). It says whether the process serves everyone, not whether its
partitions are healthy (that is cluster status). Exit 0 when ok; 2 when
degraded (Degraded: it refused connections or requests over its limits
in the last 30 s), when it does not answer (Unreachable, Timeout), or
answers something else (Unhealthy, BadResponse).`)
}

func healthAction(c *cli.Context) error {
	g := globalsOf(c)
	addr := strings.TrimSpace(c.String("http"))
	if err := checkHostPort(addr); err != nil {
		return exitcode.Usagef("InvalidFlag", "--http %q: want HOST:PORT", addr)
	}
	ctx, cancel := context.WithTimeout(c.Context, g.timeout)
	defer cancel()
	h, err := getHealth(ctx, g, addr)
	if err != nil {
		return err
	}
	res := healthResult{Address: addr, Status: h.Status, Node: h.Node, Problems: h.Problems}
	if g.output == outputJSON {
		err = json.NewEncoder(c.App.Writer).Encode(res)
	} else {
		tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ADDRESS\tNODE\tSTATUS")
		fmt.Fprintf(tw, "%s\t%d\t%s\n", res.Address, res.Node, res.Status)
		err = tw.Flush()
		for _, p := range res.Problems {
			fmt.Fprintf(c.App.Writer, "  - %s\n", p)
		}
	}
	if err != nil {
		return err
	}
	if h.Status == httpapi.HealthDegraded {
		return exitcode.Fail("Degraded", fmt.Errorf("node %d at %s: %s", h.Node, addr, strings.Join(h.Problems, "; ")))
	}
	return nil
}

// getHealth asks the node at addr for GET /api/health. A degraded node's
// answer (503 with a health object) is returned as it is. Its errors are
// named: Timeout, Unreachable, Unhealthy (any other answer than 200 or a
// degraded 503) and BadResponse (a 200 that is not a health object).
func getHealth(ctx context.Context, g globals, addr string) (httpapi.Health, error) {
	scheme, hc := "http://", http.DefaultClient
	if g.tls != nil {
		scheme, hc = "https://", &http.Client{Transport: &http.Transport{TLSClientConfig: g.tls}}
	}
	url := scheme + addr + httpapi.HealthPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return httpapi.Health{}, exitcode.Usagef("InvalidFlag", "--http %q: %v", addr, err)
	}
	resp, err := hc.Do(req)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return httpapi.Health{}, exitcode.Fail("Timeout", fmt.Errorf("GET %s: no answer within --timeout", url))
	case err != nil:
		return httpapi.Health{}, exitcode.Fail("Unreachable", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return httpapi.Health{}, exitcode.Fail("Unreachable", fmt.Errorf("GET %s: read body: %w", url, err))
	}
	var h httpapi.Health
	if resp.StatusCode == http.StatusServiceUnavailable && json.Unmarshal(body, &h) == nil && h.Status == httpapi.HealthDegraded {
		return h, nil
	}
	if resp.StatusCode != http.StatusOK {
		return httpapi.Health{}, exitcode.Fail("Unhealthy",
			fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body))))
	}
	h = httpapi.Health{}
	if err := json.Unmarshal(body, &h); err != nil || h.Status == "" {
		return httpapi.Health{}, exitcode.Fail("BadResponse", fmt.Errorf("GET %s: not a health object: %.200q", url, body))
	}
	return h, nil
}
