package server

import (
	"net/http"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// The webhook operations (extensions section 2). Account keys only: a mailbox key is
// refused before these run (mailboxOps).

// webhookBody is the body of createWebhook and updateWebhook; nil fields were absent.
type webhookBody struct {
	URL         *string   `json:"url"`
	EventTypes  *[]string `json:"eventTypes"`
	InboxIDs    *[]string `json:"inboxIds"`
	Description *string   `json:"description"`
	Enabled     *bool     `json:"enabled"`
}

// webhookID is the path's webhookId; UUIDs are read case-insensitively and kept lower case.
func (c *call) webhookID() string { return strings.ToLower(c.params["webhookId"]) }

// handleWebhookCreate serves POST /v1/webhooks.
func (s *Server) handleWebhookCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	var body webhookBody
	if err := c.decode(&body); err != nil {
		return err
	}
	n := db.NewWebhook{AccountID: c.who.AccountID, URL: deref(body.URL), AllowHTTP: s.cfg.WebhookAllowHTTP,
		Description: deref(body.Description)}
	if body.EventTypes != nil {
		n.EventTypes = *body.EventTypes
	}
	if body.InboxIDs != nil {
		n.InboxIDs = *body.InboxIDs
	}
	hook, err := db.CreateWebhook(r.Context(), s.store, n)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, hook)
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// handleWebhooksList serves GET /v1/webhooks.
func (s *Server) handleWebhooksList(w http.ResponseWriter, r *http.Request, c *call) error {
	list, next, err := s.store.ListWebhooks(r.Context(), c.who.AccountID, c.queryInt("limit"), c.queryString("pageToken"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageOf("webhooks", list, next))
	return nil
}

// handleWebhookGet serves GET /v1/webhooks/{webhookId}.
func (s *Server) handleWebhookGet(w http.ResponseWriter, r *http.Request, c *call) error {
	hook, err := s.store.GetWebhook(r.Context(), c.who.AccountID, c.webhookID())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, hook)
	return nil
}

// handleWebhookUpdate serves PATCH /v1/webhooks/{webhookId}.
func (s *Server) handleWebhookUpdate(w http.ResponseWriter, r *http.Request, c *call) error {
	var body webhookBody
	if err := c.decode(&body); err != nil {
		return err
	}
	hook, err := db.UpdateWebhook(r.Context(), s.store, c.who.AccountID, c.webhookID(), db.WebhookUpdate{URL: body.URL,
		EventTypes: body.EventTypes, InboxIDs: body.InboxIDs, Description: body.Description, Enabled: body.Enabled,
		AllowHTTP: s.cfg.WebhookAllowHTTP})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, hook)
	return nil
}

// handleWebhookDelete serves DELETE /v1/webhooks/{webhookId}.
func (s *Server) handleWebhookDelete(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := db.DeleteWebhook(r.Context(), s.store, c.who.AccountID, c.webhookID()); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"deleted": true})
	return nil
}

// handleWebhookDeliveries serves GET /v1/webhooks/{webhookId}/deliveries.
func (s *Server) handleWebhookDeliveries(w http.ResponseWriter, r *http.Request, c *call) error {
	list, next, err := s.store.ListHookDeliveries(r.Context(), c.who.AccountID, c.webhookID(), c.queryInt("limit"), c.queryString("pageToken"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, pageOf("deliveries", list, next))
	return nil
}

// webhookHandlers are the handlers of the webhook operations, by operationId.
func (s *Server) webhookHandlers() map[string]handler {
	return map[string]handler{
		"createWebhook":         s.handleWebhookCreate,
		"listWebhooks":          s.handleWebhooksList,
		"getWebhook":            s.handleWebhookGet,
		"updateWebhook":         s.handleWebhookUpdate,
		"deleteWebhook":         s.handleWebhookDelete,
		"listWebhookDeliveries": s.handleWebhookDeliveries,
	}
}
