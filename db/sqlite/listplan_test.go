package sqlite

import (
	"context"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/db"

	qt "github.com/frankban/quicktest"
)

// A listMessages page reads the inbox's time index newest first, with or without
// triage filters, labels and a page token: never a sort, never another index (a
// filter checked on another index's entries would read a run of it in the wrong order).
func TestListMessagesReadsTheTimeIndex(t *testing.T) {
	c := qt.New(t)
	s := tempStore(t)
	filters := []db.MessageFilter{
		{},
		{Category: "billing"},
		{NeedsReply: "yes"},
		{Urgency: "high"},
		{Category: "support", NeedsReply: "uncertain", Urgency: "critical"},
		{Labels: []string{"unread"}, Category: "sales"},
		{Labels: []string{db.LabelQuarantined}},
	}
	for _, f := range filters {
		for _, cur := range []*cursor{nil, {TS: 1700000000000, ID: 42}} {
			query, args := listMessagesQuery(7, f, cur, 20)
			all := queryPlan(c, s, query, args...)
			c.Check(all, qt.Contains, "SEARCH m USING INDEX messages_by_time (inbox_id=?", qt.Commentf("%+v", f))
			c.Check(all, qt.Not(qt.Contains), "TEMP B-TREE FOR ORDER BY", qt.Commentf("%+v", f))
		}
	}
}

// Label reads and removals go through message_labels' primary key (message_id, label):
// there is no index by label (migration 0010), and none of them may scan the table.
func TestLabelQueriesUseThePrimaryKey(t *testing.T) {
	c := qt.New(t)
	s := tempStore(t)
	queries := []string{
		"SELECT 1 FROM messages m WHERE m.inbox_id = 1 AND EXISTS (SELECT 1 FROM message_labels l WHERE l.message_id = m.id AND l.label = 'unread')",
		"DELETE FROM message_labels WHERE label = 'unread' AND message_id IN (SELECT m.id FROM messages m WHERE m.thread_id = 5)",
		"SELECT DISTINCT l.label FROM message_labels l JOIN messages m ON m.id = l.message_id WHERE m.thread_id = 5 ORDER BY l.label",
		"SELECT message_id, label FROM message_labels WHERE message_id IN (1, 2, 3) ORDER BY message_id, label",
	}
	for _, q := range queries {
		plan := queryPlan(c, s, q)
		c.Check(plan, qt.Contains, "USING PRIMARY KEY (message_id=?", qt.Commentf("%s\n%s", q, plan))
		c.Check(plan, qt.Not(qt.Contains), "SCAN", qt.Commentf("%s\n%s", q, plan))
	}
}

// A search's read of its inbox's unindexed changes goes through the queue's inbox index
// (migration 0011), in sequence order: never every pending row of every inbox, never a sort.
func TestInboxChangesReadTheInboxIndex(t *testing.T) {
	c := qt.New(t)
	plan := queryPlan(c, tempStore(t), inboxChangesQuery, 10, 3, 257)
	c.Check(plan, qt.Contains, "USING INDEX index_queue_by_inbox (inbox=? AND rowid>?)", qt.Commentf("%s", plan))
	c.Check(plan, qt.Not(qt.Contains), "TEMP B-TREE", qt.Commentf("%s", plan))
}

// queryPlan is SQLite's plan for query, one step a line.
func queryPlan(c *qt.C, s *Store, query string, args ...any) string {
	rows, err := s.w.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	c.Assert(err, qt.IsNil)
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		c.Assert(rows.Scan(&id, &parent, &notused, &detail), qt.IsNil)
		plan = append(plan, detail)
	}
	c.Assert(rows.Err(), qt.IsNil)
	return strings.Join(plan, "\n")
}
