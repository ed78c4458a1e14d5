package server

import (
	"net/http"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// handleInboxesList serves GET /v1/inboxes.
func (s *Server) handleInboxesList(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.who.Mailbox {
		if c.has("group") {
			return db.Errorf(db.ECodeInvalidArgument, "group: a mailbox key cannot filter by group")
		}
		if c.has("pageToken") {
			return db.Errorf(db.ECodeInvalidArgument, "pageToken: a mailbox key lists one inbox and cannot page")
		}
		in, err := s.store.InboxByRowID(r.Context(), c.who.InboxID)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"inboxes": []db.MailboxView{in.MailboxView()}})
		return nil
	}
	var group *string
	if c.has("group") {
		g := c.queryString("group")
		group = &g
	}
	list, next, err := s.store.ListInboxes(r.Context(), c.who.AccountID, group, c.queryInt("limit"), c.queryString("pageToken"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageOf("inboxes", list, next))
	return nil
}

// pageOf is a list response: the items under name, and nextPageToken only when more exist.
func pageOf(name string, items any, next string) map[string]any {
	out := map[string]any{name: items}
	if next != "" {
		out["nextPageToken"] = next
	}
	return out
}

// handleInboxCreate serves POST /v1/inboxes.
func (s *Server) handleInboxCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	var body struct {
		Username    string  `json:"username"`
		Domain      string  `json:"domain"`
		DisplayName string  `json:"displayName"`
		Group       *string `json:"group"`
	}
	if err := c.decode(&body); err != nil {
		return err
	}
	domain := strings.ToLower(body.Domain)
	if domain == "" {
		domain = s.cfg.Domain
	}
	addr := strings.ToLower(body.Username) + "@" + domain
	if len(addr) > 254 {
		return db.Errorf(db.ECodeInvalidArgument, "username: the address %s is longer than 254 characters", addr)
	}
	in, err := db.CreateInbox(r.Context(), s.store, db.NewInbox{
		AccountID: c.who.AccountID, Address: addr, DisplayName: body.DisplayName, Group: body.Group, DefaultDomain: s.cfg.Domain,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

// handleInboxGet serves GET /v1/inboxes/{inboxId}.
//
// The inbox the call resolved may come from the store's cache, which a change made through
// another process on a shared database reaches only with its notification
// (docs/postgres.md); the answer is read afresh, so that a client reads back at once an
// update or a deletion it made through any process.
func (s *Server) handleInboxGet(w http.ResponseWriter, r *http.Request, c *call) error {
	in, err := s.store.InboxByRowID(r.Context(), c.inbox.ID)
	if err != nil {
		return err
	}
	if in.Retired {
		return retired(in)
	}
	if c.who.Mailbox {
		writeJSON(w, http.StatusOK, in.MailboxView())
		return nil
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

// handleInboxUpdate serves PATCH /v1/inboxes/{inboxId}.
func (s *Server) handleInboxUpdate(w http.ResponseWriter, r *http.Request, c *call) error {
	var body struct {
		Group *string `json:"group"`
	}
	if err := c.decode(&body); err != nil {
		return err
	}
	in, err := s.store.UpdateInboxGroup(r.Context(), c.inbox, body.Group)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

// handleInboxDelete serves DELETE /v1/inboxes/{inboxId}.
func (s *Server) handleInboxDelete(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.store.DeleteInbox(r.Context(), c.inbox); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
	return nil
}

// handleInboxSetup serves POST /v1/inboxes/{inboxId}/setup.
func (s *Server) handleInboxSetup(w http.ResponseWriter, r *http.Request, c *call) error {
	in, err := s.store.FinishSetup(r.Context(), c.inbox)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}

// handleUsageGet serves GET /v1/usage.
func (s *Server) handleUsageGet(w http.ResponseWriter, r *http.Request, c *call) error {
	u, err := s.store.GetUsage(r.Context(), c.who.AccountID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}
