package server

import (
	"net/http"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
)

// filterOf reads the list filters shared by listMessages, searchMessages and listThreads.
func filterOf(c *call) db.MessageFilter {
	return db.MessageFilter{
		Labels:       c.queryStrings("labels"),
		Category:     c.queryString("category"),
		NeedsReply:   c.queryString("needsReply"),
		Urgency:      c.queryString("urgency"),
		IncludeTrash: c.queryBool("includeTrash"),
	}
}

func summaries(msgs []db.Message) []db.Message {
	out := make([]db.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m.SummaryView()
	}
	return out
}

// handleMessagesList serves GET /v1/inboxes/{inboxId}/messages.
func (s *Server) handleMessagesList(w http.ResponseWriter, r *http.Request, c *call) error {
	msgs, next, err := s.store.ListMessages(r.Context(), c.inbox.ID, filterOf(c), c.queryInt("limit"), c.queryString("pageToken"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageOf("messages", summaries(msgs), next))
	return nil
}

// handleMessageGet serves GET /v1/inboxes/{inboxId}/messages/{messageId}.
func (s *Server) handleMessageGet(w http.ResponseWriter, r *http.Request, c *call) error {
	m, err := s.store.GetMessage(r.Context(), c.inbox.ID, c.params["messageId"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m.FullView(c.queryBool("includeHtml"), c.who.Mailbox))
	return nil
}

// handleMessageSend serves POST /v1/inboxes/{inboxId}/messages/send.
func (s *Server) handleMessageSend(w http.ResponseWriter, r *http.Request, c *call) error {
	var d mail.Draft
	if err := c.decode(&d); err != nil {
		return err
	}
	res, err := s.mail.Send(r.Context(), c.inbox, d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// handleMessageReply serves POST /v1/inboxes/{inboxId}/messages/{messageId}/reply.
func (s *Server) handleMessageReply(w http.ResponseWriter, r *http.Request, c *call) error {
	var d mail.Draft
	if err := c.decode(&d); err != nil {
		return err
	}
	res, err := s.mail.Reply(r.Context(), c.inbox, c.params["messageId"], d)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

type labelChange struct {
	AddLabels    []string `json:"addLabels"`
	RemoveLabels []string `json:"removeLabels"`
}

// handleMessageLabels serves PATCH /v1/inboxes/{inboxId}/messages/{messageId}/labels.
func (s *Server) handleMessageLabels(w http.ResponseWriter, r *http.Request, c *call) error {
	var body labelChange
	if err := c.decode(&body); err != nil {
		return err
	}
	if err := db.UpdateMessageLabels(r.Context(), s.store, c.inbox.ID, c.params["messageId"], body.AddLabels, body.RemoveLabels); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, nil)
	return nil
}

// handleThreadsList serves GET /v1/inboxes/{inboxId}/threads.
func (s *Server) handleThreadsList(w http.ResponseWriter, r *http.Request, c *call) error {
	threads, next, err := s.store.ListThreads(r.Context(), c.inbox.ID, filterOf(c), c.queryInt("limit"), c.queryString("pageToken"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageOf("threads", threads, next))
	return nil
}

// handleThreadGet serves GET /v1/inboxes/{inboxId}/threads/{threadId}.
func (s *Server) handleThreadGet(w http.ResponseWriter, r *http.Request, c *call) error {
	bodies := c.queryBool("includeBodies")
	t, err := s.store.GetThread(r.Context(), c.inbox.ID, c.params["threadId"], bodies)
	if err != nil {
		return err
	}
	for i, m := range t.Messages {
		if bodies {
			t.Messages[i] = m.FullView(true, c.who.Mailbox)
		} else {
			t.Messages[i] = m.SummaryView()
		}
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// handleThreadLabels serves PATCH /v1/inboxes/{inboxId}/threads/{threadId}/labels.
func (s *Server) handleThreadLabels(w http.ResponseWriter, r *http.Request, c *call) error {
	var body labelChange
	if err := c.decode(&body); err != nil {
		return err
	}
	if err := db.UpdateThreadLabels(r.Context(), s.store, c.inbox.ID, c.params["threadId"], body.AddLabels, body.RemoveLabels); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, nil)
	return nil
}
