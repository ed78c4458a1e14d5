package db

import (
	"strconv"
	"time"
)

// ReaderRetention is how long the change log waits for a reader that stopped advancing
// before it drops that reader's changes: a search index kept across a restart, an upgrade
// or a short outage catches up from the log, one gone longer is rebuilt.
const ReaderRetention = 7 * 24 * time.Hour

// IndexChange is one change of the change log. Message is 0 when the whole inbox was
// deleted; TS is the message's timestamp, part of its key in the index.
type IndexChange struct {
	Seq, Message, Inbox, TS int64
}

// IndexDoc is what the index holds of a message.
type IndexDoc struct {
	ID, Inbox, TS                 int64
	Subject, From                 string
	To                            []string // to and cc
	Body                          string
	Attachments                   []string
	Category, NeedsReply, Urgency string
	TriagePending                 bool // waiting in the triage queue
}

// SearchCursor is where the next page of a search starts: after the hit with this score,
// timestamp and row id.
type SearchCursor struct {
	Score  float64
	TS, ID int64
}

// SearchScope is what a search page token is bound to: the inbox, the query and the
// filters. A token is refused for any other search.
func SearchScope(inboxID int64, query string, f MessageFilter) string {
	return ListScope("search", strconv.FormatInt(inboxID, 10), query, f.Category, f.NeedsReply, f.Urgency)
}

// InOrderOf returns msgs in the order of ids (MessagesByRowID: the order of the search's
// hits); an id with no message is left out.
func InOrderOf(ids []int64, msgs []Message) []Message {
	byID := make(map[int64]Message, len(msgs))
	for _, m := range msgs {
		byID[m.ID] = m
	}
	out := make([]Message, 0, len(msgs))
	for _, id := range ids {
		if m, ok := byID[id]; ok {
			out = append(out, m)
		}
	}
	return out
}
