package main

import (
	"context"

	"github.com/inboxd/inboxd/mail"
)

// prepareTestControls readies what serve --test-controls resets to (extensions section 6),
// once the start-up fixtures are loaded: the outbox starts empty, no fault rule is set and
// the clock is the system's, for every process of the database (a process that joins a
// running test starts them over, as it does the outbox), and the store records its state
// for resetServer. The server (server.New) then keeps this process's fault rules and
// clock in step with the database's.
func (m *Main) prepareTestControls(ctx context.Context, p *parts) error {
	if !m.TestControls {
		return nil
	}
	p.faults = &mail.Faults{}
	m.Log.Warn("test controls are on: /_inboxd/ resets, injects and changes keys, accounts and the clock without a key; never expose this server")
	if err := m.store.ClearOutbox(ctx); err != nil {
		return err
	}
	if _, err := mail.ClearControls(ctx, m.store); err != nil {
		return err
	}
	return m.store.SnapshotForReset(ctx)
}
