package server

import (
	"net/http"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
	"github.com/inboxd/inboxd/schema"
)

// The test controls (extensions section 6): what a CI suite needs from a test double,
// under /_inboxd/, answered without a key and only with serve --test-controls
// (Config.TestControls); without it every path is not_found. Each is an operation of
// schema's table (Control), validated like the API's. What they change is the database's,
// so it holds on every process of it: the fault rules and the clock too, through
// mail.Controls.

// controlHandlers are the handlers of the test controls, by operationId.
func (s *Server) controlHandlers() map[string]handler {
	return map[string]handler{
		"resetServer":    s.handleReset,
		"getFaults":      s.handleFaultsGet,
		"setFaults":      s.handleFaultsSet,
		"clearFaults":    s.handleFaultsClear,
		"injectMessage":  s.handleMessageInject,
		"purgeMessages":  s.handleInboxPurge,
		"listOutbox":     s.handleOutboxList,
		"clearOutbox":    s.handleOutboxClear,
		"createTestKey":  s.handleTestKeyCreate,
		"revokeTestKey":  s.handleTestKeyRevoke,
		"disableAccount": s.handleAccountDisable,
		"enableAccount":  s.handleAccountEnable,
		"getClock":       s.handleClockGet,
		"advanceClock":   s.handleClockAdvance,
	}
}

type testKeyRequest struct {
	AccountID string   `json:"accountId"`
	Scopes    []string `json:"scopes"`
	InboxID   string   `json:"inboxId"`
	Days      *int     `json:"days"`
}

// handleTestKeyCreate serves POST /_inboxd/keys: an account key with scopes, or a mailbox
// key of an inbox of the account. Unlike `inboxd keys create`, a new mailbox key leaves
// the inbox's other mailbox keys working, so a fixture's key survives a test's own.
func (s *Server) handleTestKeyCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	var req testKeyRequest
	if err := c.decode(&req); err != nil {
		return err
	}
	k, err := s.testKey(r, req)
	if err != nil {
		return err
	}
	if err := db.CreateKey(r.Context(), s.store, k); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"keyId": db.KeyIDOfToken(k.Token), "key": k.Token})
	return nil
}

// testKey is the key a createTestKey request asks for. Scopes are checked when it is
// stored (db.CreateKey).
func (s *Server) testKey(r *http.Request, req testKeyRequest) (db.NewKey, error) {
	switch {
	case (len(req.Scopes) == 0) == (req.InboxID == ""):
		return db.NewKey{}, db.Errorf(db.ECodeInvalidArgument, "scopes: give exactly one of scopes (an account key) and inboxId (a mailbox key)")
	case req.InboxID != "" && req.Days != nil:
		return db.NewKey{}, db.Errorf(db.ECodeInvalidArgument, "days: a mailbox key does not expire")
	case req.InboxID != "":
		in, err := s.store.InboxByAddress(r.Context(), req.AccountID, req.InboxID)
		if err != nil {
			return db.NewKey{}, err
		}
		return db.NewMailboxKey(in, false), nil
	}
	days := db.DefaultKeyDays
	if req.Days != nil {
		days = *req.Days
	}
	return db.NewAccountKey(req.AccountID, req.Scopes, days, s.now()), nil
}

// handleTestKeyRevoke serves DELETE /_inboxd/keys/{keyId}.
func (s *Server) handleTestKeyRevoke(w http.ResponseWriter, r *http.Request, c *call) error {
	k, err := s.store.RevokeKey(r.Context(), c.params["keyId"])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"keyId": k.KeyID, "revoked": true})
	return nil
}

// handleAccountDisable serves POST /_inboxd/accounts/{accountId}/disable.
func (s *Server) handleAccountDisable(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.setAccountDisabled(w, r, c, true)
}

// handleAccountEnable serves POST /_inboxd/accounts/{accountId}/enable.
func (s *Server) handleAccountEnable(w http.ResponseWriter, r *http.Request, c *call) error {
	return s.setAccountDisabled(w, r, c, false)
}

func (s *Server) setAccountDisabled(w http.ResponseWriter, r *http.Request, c *call, disabled bool) error {
	id := c.params["accountId"]
	if err := s.store.SetAccountDisabled(r.Context(), id, disabled); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"accountId": id, "disabled": disabled})
	return nil
}

// handleClockGet serves GET /_inboxd/clock, with the offset read afresh from the
// database, so that it agrees with a move another process has just made.
func (s *Server) handleClockGet(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.controls.Refresh(r.Context()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]db.Time{"now": {Time: s.now()}})
	return nil
}

// handleClockAdvance serves POST /_inboxd/clock: every rule that reads time reads the
// store's clock, which is Config.Clock, which Controls moves on every process.
func (s *Server) handleClockAdvance(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		AdvanceSeconds float64 `json:"advanceSeconds"`
	}
	if err := c.decode(&req); err != nil {
		return err
	}
	if err := s.controls.AdvanceClock(r.Context(), time.Duration(req.AdvanceSeconds*float64(time.Second))); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]db.Time{"now": {Time: s.now()}})
	return nil
}

// handleInboxPurge serves DELETE /_inboxd/inboxes/{inboxId}/messages.
func (s *Server) handleInboxPurge(w http.ResponseWriter, r *http.Request, c *call) error {
	n, err := s.store.PurgeInbox(r.Context(), c.inbox.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}

// handleOutboxList serves GET /_inboxd/outbox.
func (s *Server) handleOutboxList(w http.ResponseWriter, r *http.Request, c *call) error {
	f := db.OutboxFilter{To: c.queryString("to"), Limit: c.queryInt("limit")}
	if addr := c.queryString("inboxId"); addr != "" {
		in, err := s.store.LocalInbox(r.Context(), addr)
		if err != nil {
			return err
		}
		f.InboxRow = in.ID
	}
	items, err := s.store.Outbox(r.Context(), f)
	if err != nil {
		return err
	}
	if items == nil {
		items = []db.OutboxItem{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": items})
	return nil
}

// handleOutboxClear serves DELETE /_inboxd/outbox.
func (s *Server) handleOutboxClear(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.store.ClearOutbox(r.Context()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"cleared": true})
	return nil
}

// handleMessageInject serves POST /_inboxd/inboxes/{inboxId}/messages: raw MIME
// (message/rfc822) or JSON fields, stored as received mail of the inbox.
func (s *Server) handleMessageInject(w http.ResponseWriter, r *http.Request, c *call) error {
	in := mail.Injected{Raw: c.raw}
	if c.raw == nil {
		var f mail.InjectFields
		if err := c.decode(&f); err != nil {
			return err
		}
		var err error
		if in, err = mail.ComposeInjected(c.inbox, f); err != nil {
			return err
		}
	}
	st, err := s.mail.Inject(r.Context(), c.inbox, in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"messageId": st.MessageID, "threadId": st.ThreadID})
	return nil
}

// resetCatchUp bounds how long a reset waits for the search index to take the reset in,
// so that a search right after it agrees with the store.
const resetCatchUp = 10 * time.Second

// handleReset serves POST /_inboxd/reset: the store back to its start-up snapshot, the
// clock back to the system's and no fault rules (on every process), and the search index
// caught up before the answer.
func (s *Server) handleReset(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.store.ResetToSnapshot(r.Context()); err != nil {
		return err
	}
	if err := s.controls.Reset(r.Context()); err != nil {
		return err
	}
	s.events.hub.Forget() // events of the mail the reset took away
	if ix := s.cfg.Search; ix != nil {
		deadline := time.Now().Add(resetCatchUp)
		for caught := false; !caught && time.Now().Before(deadline); {
			var err error
			if caught, err = ix.CatchUp(r.Context()); err != nil {
				return err
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
	return nil
}

// handleFaultsGet serves GET /_inboxd/faults, read afresh from the database, so that it
// agrees with a change (or a firing) another process has just made.
func (s *Server) handleFaultsGet(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.controls.Refresh(r.Context()); err != nil {
		return err
	}
	s.writeFaults(w)
	return nil
}

// writeFaults answers the rules in force.
func (s *Server) writeFaults(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{"rules": s.cfg.Faults.Rules()})
}

// handleFaultsSet serves PUT /_inboxd/faults: the rules replace the ones in force on
// every process.
func (s *Server) handleFaultsSet(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		Rules []mail.FaultRule `json:"rules"`
	}
	if err := c.decode(&req); err != nil {
		return err
	}
	known := map[string]bool{}
	for _, op := range schema.Operations() {
		known[op.ID] = true
	}
	if err := mail.CheckFaultRules(req.Rules, func(id string) bool { return known[id] }); err != nil {
		return err
	}
	if err := s.controls.SetFaults(r.Context(), req.Rules); err != nil {
		return err
	}
	s.writeFaults(w)
	return nil
}

// handleFaultsClear serves DELETE /_inboxd/faults.
func (s *Server) handleFaultsClear(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.controls.SetFaults(r.Context(), nil); err != nil {
		return err
	}
	s.writeFaults(w)
	return nil
}

// faultControls are the controls no api fault rule reaches: a test can always take its
// rules back.
var faultControls = map[string]bool{"getFaults": true, "setFaults": true, "clearFaults": true}

// apiFault applies an api fault rule to a call of op: a delay, or an error in the API's
// shape with the rule's status.
func (s *Server) apiFault(r *http.Request, op string) error {
	if faultControls[op] {
		return nil
	}
	e := s.cfg.Faults.Fire(mail.FaultAPI, mail.FaultCase{Operation: op})
	switch {
	case e == nil:
		return nil
	case e.DelayMs > 0:
		t := time.NewTimer(time.Duration(e.DelayMs) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
		return nil
	}
	return &faultError{status: e.Status, e: db.Error{Code: e.Code, Transient: *e.Transient,
		Message: "a fault rule of the test controls answered this call"}}
}

// faultError is an API error with the status an api fault rule chose.
type faultError struct {
	status int
	e      db.Error
}

func (f *faultError) Error() string { return f.e.Code + ": " + f.e.Message }
