package db

import (
	"context"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// A listMessages page reads the inbox's time index newest first, with or without
// triage filters, labels and a page token: never a sort, never another index (a
// filter checked on another index's entries would read a run of it in the wrong order).
func TestListMessagesReadsTheTimeIndex(t *testing.T) {
	c := qt.New(t)
	ctx := context.Background()
	s := tempStore(t)
	filters := []MessageFilter{
		{},
		{Category: "billing"},
		{NeedsReply: "yes"},
		{Urgency: "high"},
		{Category: "support", NeedsReply: "uncertain", Urgency: "critical"},
		{Labels: []string{"unread"}, Category: "sales"},
		{Labels: []string{LabelQuarantined}},
	}
	for _, f := range filters {
		for _, cur := range []*cursor{nil, {TS: 1700000000000, ID: 42}} {
			query, args := listMessagesQuery(7, f, cur, 20)
			rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
			c.Assert(err, qt.IsNil)
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				c.Assert(rows.Scan(&id, &parent, &notused, &detail), qt.IsNil)
				plan = append(plan, detail)
			}
			c.Assert(rows.Err(), qt.IsNil)
			rows.Close()
			all := strings.Join(plan, "\n")
			c.Check(all, qt.Contains, "SEARCH m USING INDEX messages_by_time (inbox_id=?", qt.Commentf("%+v", f))
			c.Check(all, qt.Not(qt.Contains), "TEMP B-TREE FOR ORDER BY", qt.Commentf("%+v", f))
		}
	}
}
