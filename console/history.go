package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"gostream/client"
	"gostream/metadata"
)

// History is the answer of GET /ui/api/history: the controller's audit
// trail, newest first.
type History struct {
	// Events are the newest Limit events, newest first; Total counts the
	// trail's events.
	Events []HistoryEvent `json:"events"`
	Total  int            `json:"total"`
	Limit  int            `json:"limit"`
}

// HistoryEvent is one change the controller made, when and at whose
// request (transport.HistoryEvent, as `cluster history` prints it).
type HistoryEvent struct {
	// Time is when, in Unix milliseconds; Requester who asked ("" when
	// the controller did not record one).
	Time      int64  `json:"time"`
	Requester string `json:"requester"`
	// Action is what was done: failover, drop-follower, recover,
	// elect-leader, catch-up, replace-broker, restore-metadata,
	// controller-transfer, controller-add, controller-remove, acl-add,
	// acl-remove, reassign, reassign-join, reassign-finish,
	// reassign-cancel, create-partition.
	Action string `json:"action"`
	// Topic and Partition name the partition; "" and -1 for a change of
	// the cluster (an ACL, the controller group, a broker).
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	OldLeader int32   `json:"oldLeader"`
	NewLeader int32   `json:"newLeader"`
	OldEpoch  int32   `json:"oldEpoch"`
	NewEpoch  int32   `json:"newEpoch"`
	OldActive []int32 `json:"oldActive"`
	NewActive []int32 `json:"newActive"`
	// OldReplicas and NewReplicas, for the steps of a move, are the
	// replica lists before and after; empty otherwise.
	OldReplicas []int32 `json:"oldReplicas"`
	NewReplicas []int32 `json:"newReplicas"`
	// LostFromOffset, for a failover, is the offset from which records
	// held only by the old leader were lost; null for none.
	LostFromOffset *int64 `json:"lostFromOffset"`
	// Note says why, or what an ACL entry allows; Error why this
	// partition's change failed.
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
}

// History's limit: the default and the most one request may ask.
const (
	defaultHistoryLimit = 200
	maxHistoryLimit     = 10000
)

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	if err := s.allowed(r, metadata.OpDescribe, metadata.ResourceCluster, ""); err != nil {
		writeErr(w, err)
		return
	}
	limit := defaultHistoryLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryLimit {
			badRequest(w, fmt.Sprintf("limit %q: want a number of events, 1 to %d", v, maxHistoryLimit))
			return
		}
		limit = n
	}
	c, ctx, cancel, ok := s.dial(w, r)
	if !ok {
		return
	}
	defer cancel()
	events, err := c.History(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := History{Events: make([]HistoryEvent, 0, min(limit, len(events))), Total: len(events), Limit: limit}
	for _, ev := range slices.Backward(events) {
		if len(out.Events) == limit {
			break
		}
		out.Events = append(out.Events, historyEventOf(ev))
	}
	writeJSON(w, http.StatusOK, out)
}

// historyEventOf is an event of the audit trail as the console answers it.
func historyEventOf(ev client.HistoryEvent) HistoryEvent {
	return HistoryEvent{
		Time: ev.Time.UnixMilli(), Requester: ev.Requester, Action: string(ev.Action), Topic: ev.Topic, Partition: ev.Partition,
		OldLeader: ev.OldLeader, NewLeader: ev.NewLeader, OldEpoch: ev.OldEpoch, NewEpoch: ev.NewEpoch,
		OldActive: orEmpty(ev.OldActive), NewActive: orEmpty(ev.NewActive),
		OldReplicas: orEmpty(ev.OldReplicas), NewReplicas: orEmpty(ev.NewReplicas),
		LostFromOffset: ev.LostFrom, Note: ev.Note, Error: ev.Error,
	}
}

// orEmpty is ids, or an empty list for none: JSON [] rather than null.
func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}
