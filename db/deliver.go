package db

import "context"

// Deliver stores one delivery (a message for one or more inboxes) all or nothing, as one
// unit of work (StoreMessage for each).
func Deliver(ctx context.Context, st Units, msgs []NewMessage) ([]Stored, error) {
	ps := prepareAll(st, msgs)
	var stored []Stored
	err := st.Update(ctx, func(tx Tx) error {
		var err error
		stored, err = storeAll(tx, ps)
		return err
	})
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// DeliverBatch stores several independent deliveries in one unit of work, for callers that
// have many at hand (seeding, the benchmarks). Each delivery is all or nothing on its own:
// one that fails is undone without undoing the others, and its error is in errs. err
// reports a failure of the unit itself; then nothing at all was stored.
func DeliverBatch(ctx context.Context, st Units, groups [][]NewMessage) (stored [][]Stored, errs []error, err error) {
	ps := make([][]Prepared, len(groups))
	for g := range groups {
		ps[g] = prepareAll(st, groups[g])
	}
	err = st.Update(ctx, func(tx Tx) error {
		stored, errs = make([][]Stored, len(groups)), make([]error, len(groups))
		for g := range groups {
			errs[g] = tx.Isolated(func() error {
				var err error
				stored[g], err = storeAll(tx, ps[g])
				return err
			})
			if errs[g] != nil {
				stored[g] = nil
			}
		}
		return nil
	})
	if err != nil {
		stored, errs = nil, nil
	}
	return stored, errs, err
}

func prepareAll(st Units, msgs []NewMessage) []Prepared {
	out := make([]Prepared, len(msgs))
	for i := range msgs {
		out[i] = st.Prepare(&msgs[i])
	}
	return out
}

func storeAll(tx Tx, ps []Prepared) ([]Stored, error) {
	out := make([]Stored, 0, len(ps))
	for _, p := range ps {
		st, err := StoreMessage(tx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// StoreMessage stores a new message unless its inbox holds one with its Message-ID
// already (Stored.Existed: nothing is written). It joins the thread the message's headers
// point to (chooseThread), and a message whose triage was analyzed before it was stored
// (ChargeTriage) spends a triage unit of its account; when the allowance is spent it is
// stored with no triage at all, as a queued analysis would be (API-NOTES section 8).
func StoreMessage(tx Tx, p Prepared) (Stored, error) {
	m := p.Message()
	if st, err := tx.StoredMessage(m.InboxID, m.MessageID); err != nil || st != nil {
		return existed(st), err
	}
	thread, err := chooseThread(tx, m)
	if err != nil {
		return Stored{}, err
	}
	withTriage, err := chargeTriage(tx, m)
	if err != nil {
		return Stored{}, err
	}
	st, err := tx.WriteMessage(p, thread, withTriage)
	if err != nil {
		return Stored{}, err
	}
	return st, recordArrival(tx, m, st.RowID, thread, withTriage)
}

func existed(st *Stored) Stored {
	if st == nil {
		return Stored{}
	}
	out := *st
	out.Existed = true
	return out
}

// chargeTriage spends the triage unit of a message analyzed before it is stored; it
// reports whether the message keeps its triage.
func chargeTriage(tx Tx, m *NewMessage) (bool, error) {
	if !m.ChargeTriage {
		return true, nil
	}
	account, err := tx.InboxAccount(m.InboxID)
	if err != nil {
		return false, err
	}
	err = Charge(tx, account, FeatureTriage, m.Timestamp)
	if IsCode(err, ECodeBillingLimit) {
		return false, nil
	}
	return err == nil, err
}

// ThreadRef names a thread: its row id and its UUID.
type ThreadRef struct {
	Row  int64
	UUID string
}

// chooseThread finds the thread of a new message (API-NOTES section 5): the one named by
// ThreadID (a reply joins its original's; made when it is not there), else the thread of
// the stored, non-quarantined message of the inbox that its headers name last
// (ThreadCandidates, in header order), else a new thread. A quarantined message never
// joins a thread.
func chooseThread(tx Tx, m *NewMessage) (ThreadRef, error) {
	if m.ThreadID != "" {
		row, ok, err := tx.ThreadByUUID(m.InboxID, m.ThreadID)
		if err != nil || ok {
			return ThreadRef{Row: row, UUID: m.ThreadID}, err
		}
		return tx.NewThread(m.InboxID, m.ThreadID)
	}
	if !m.Quarantined() && len(m.ThreadCandidates) > 0 {
		found, err := tx.ThreadsOf(m.InboxID, m.ThreadCandidates)
		if err != nil {
			return ThreadRef{}, err
		}
		for i := len(m.ThreadCandidates) - 1; i >= 0; i-- {
			if t, ok := found[m.ThreadCandidates[i]]; ok {
				return t, nil
			}
		}
	}
	return tx.NewThread(m.InboxID, "")
}
