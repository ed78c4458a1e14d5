package main

import (
	"context"

	"github.com/inboxd/inboxd/mail"
)

// prepareTestControls readies what serve --test-controls resets to (extensions section 6),
// once the start-up fixtures are loaded: the outbox starts empty, and the store records
// its state for resetServer.
func (m *Main) prepareTestControls(ctx context.Context, p *parts) error {
	if !m.TestControls {
		return nil
	}
	p.faults = &mail.Faults{}
	m.Log.Warn("test controls are on: /_inboxd/ resets, injects and changes keys, accounts and the clock without a key; never expose this server")
	if err := m.store.ClearOutbox(ctx); err != nil {
		return err
	}
	return m.store.SnapshotForReset(ctx)
}
