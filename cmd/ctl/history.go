package main

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"gostream/client"
)

// historyEventJSON is one event of cluster history -o json: when, who,
// and the change as failover and recover report it.
type historyEventJSON struct {
	Time      string `json:"time"`
	Requester string `json:"requester"`
	client.ChangeResult
}

func clusterHistoryAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		evs, err := cl.History(ctx)
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			out := struct {
				Events []historyEventJSON `json:"events"`
			}{Events: make([]historyEventJSON, 0, len(evs))}
			for _, ev := range evs {
				r := ev.ChangeResult
				r.OldActive, r.NewActive = orEmpty(r.OldActive), orEmpty(r.NewActive)
				out.Events = append(out.Events, historyEventJSON{Time: formatTime(ev), Requester: ev.Requester, ChangeResult: r})
			}
			return writeJSON(c.App.Writer, out)
		}
		return printHistory(c.App.Writer, evs)
	})
}

// formatTime is an event's time in UTC with milliseconds, as consume
// prints timestamps.
func formatTime(ev client.HistoryEvent) string {
	return ev.Time.UTC().Format(timestampLayout)
}

func printHistory(w io.Writer, evs []client.HistoryEvent) error {
	if len(evs) == 0 {
		_, err := fmt.Fprintln(w, "No failovers or recoveries yet.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "TIME\tREQUESTER\tACTION\tPARTITION\tLEADER\tEPOCH\tACTIVE\tNOTE")
	for _, ev := range evs {
		who := ev.Requester
		if who == "" {
			who = "-"
		}
		note := ev.Note
		if note == "" {
			note = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", formatTime(ev), who, ev.Action,
			partitionName(ev.Topic, ev.Partition), change(ev.OldLeader, ev.NewLeader),
			change(ev.OldEpoch, ev.NewEpoch), changeIDs(ev.OldActive, ev.NewActive), note)
	}
	return tw.Flush()
}
