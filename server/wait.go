package server

import (
	"net/http"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/events"
)

// waitAnswer is waitForMessages' response.
type waitAnswer struct {
	Messages []db.Message `json:"messages"`
	TimedOut bool         `json:"timedOut"`
}

// handleMessagesWait serves GET /v1/inboxes/{inboxId}/messages/wait (waitForMessages).
func (s *Server) handleMessagesWait(w http.ResponseWriter, r *http.Request, c *call) error {
	since, err := time.Parse(time.RFC3339Nano, c.queryString("since"))
	if err != nil {
		return db.Errorf(db.ECodeInvalidArgument, "since: must be an ISO 8601 timestamp such as 2026-01-31T09:00:00Z")
	}
	timeout := time.Duration(c.queryInt("timeout")) * time.Second
	longRequest(w, timeout)
	s.events.waits.Add(1)
	defer s.events.waits.Add(-1)
	res, err := s.events.hub.Wait(r.Context(), events.WaitRequest{
		Inbox:   c.inbox,
		Filter:  db.MessageFilter{Labels: c.queryStrings("labels")},
		Query:   c.queryString("query"),
		Since:   since,
		Count:   c.queryInt("count"),
		Timeout: timeout,
		Stop:    s.events.ending,
	})
	if err != nil && r.Context().Err() != nil {
		return nil // the client left: nobody to answer, and no server error
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, waitAnswer{Messages: summaries(res.Messages), TimedOut: res.TimedOut})
	return nil
}

// maxWait is the longest a wait may take (waitForMessages' timeout at most).
const maxWait = 60 * time.Second

// longRequest lets a request that legitimately takes up to d (a wait, or an MCP call
// that may be one) outlive the server's WriteTimeout, which would cut its answer. (Its
// ReadTimeout does not matter once the request is read: net/http clears the read
// deadline then.) Behind an in-process writer (MCP tool calls) there is no connection,
// and nothing to do.
func longRequest(w http.ResponseWriter, d time.Duration) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d + streamWriteWait))
}
