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
//
// Errors: inbox_retired: the inbox was deleted after its recipient was resolved (a
// delivery or send that raced the deletion, on this process or another). Mail is stored
// before an inbox's deletion, and deleted with it, or refused: never stored after it.
func StoreMessage(tx Tx, p Prepared) (Stored, error) {
	m := p.Message()
	if st, err := tx.StoredMessage(m.InboxID, m.MessageID); err != nil || st != nil {
		return existed(st), err
	}
	if retired, err := tx.InboxRetired(m.InboxID); err != nil || retired {
		return Stored{}, orRetired(err)
	}
	thread, err := chooseThread(tx, m)
	if err != nil {
		return Stored{}, err
	}
	st, view, err := writeCharged(tx, p, thread)
	if err != nil {
		return Stored{}, err
	}
	return st, recordArrival(tx, m, st.RowID, view(st.RowID))
}

// LateCharger is a Tx that spends a message's triage unit itself as it writes the
// message, as late in the unit as it can: the row the unit is counted on is then held for
// less of the unit, where concurrent units of one account queue on it (a store whose
// units run one at a time gains nothing, and need not be one).
type LateCharger interface {
	// WriteMessageCharged is WriteMessage for a message whose triage costs a unit of a:
	// the message keeps its triage when the unit is spent, and is written with none
	// (withTriage false) when a's limit is reached, all in the unit. A refusal is not an
	// error.
	WriteMessageCharged(p Prepared, thread ThreadRef, a Allowance) (Stored, error)
}

// writeCharged writes a new message into thread, spending its triage unit first
// (chargeTriage), or as it writes when the store is a LateCharger. view gives the
// message as stored, for its event's payload (storedView); it gives nil when a
// LateCharger spent the unit, since only the database then knows whether the message
// kept its triage, and the event reads the message back.
func writeCharged(tx Tx, p Prepared, thread ThreadRef) (st Stored, view func(row int64) *Message, err error) {
	m := p.Message()
	if lc, ok := tx.(LateCharger); ok && m.ChargeTriage {
		a, err := triageAllowance(tx, m)
		if err != nil {
			return Stored{}, nil, err
		}
		st, err := lc.WriteMessageCharged(p, thread, a)
		return st, func(int64) *Message { return nil }, err
	}
	withTriage, err := chargeTriage(tx, m)
	if err != nil {
		return Stored{}, nil, err
	}
	st, err = tx.WriteMessage(p, thread, withTriage)
	return st, func(row int64) *Message { return m.storedView(row, thread, withTriage) }, err
}

// orRetired is err, or the refusal of mail for a deleted inbox when err is nil.
func orRetired(err error) error {
	if err != nil {
		return err
	}
	return Errorf(ECodeInboxRetired, "the inbox was deleted")
}

// StoreLocal stores the copy of a local delivery, o.Local prepared as p, in the unit that
// records the outcome o, and returns the outcome to record: o, or o.LocalGone when the
// recipient inbox was deleted after the delivery was routed (StoreMessage refuses the
// copy then).
func StoreLocal(tx Tx, p Prepared, o OutboundOutcome) (OutboundOutcome, error) {
	_, err := StoreMessage(tx, p)
	if IsCode(err, ECodeInboxRetired) && o.LocalGone != nil {
		return *o.LocalGone, nil
	}
	return o, err
}

func existed(st *Stored) Stored {
	if st == nil {
		return Stored{}
	}
	out := *st
	out.Existed = true
	return out
}

// triageAllowance is the allowance a message's triage unit is spent from: its account's,
// in the period of its arrival.
func triageAllowance(tx Tx, m *NewMessage) (Allowance, error) {
	account, err := tx.InboxAccount(m.InboxID)
	if err != nil {
		return Allowance{}, err
	}
	return AllowanceOf(tx, account, FeatureTriage, m.Timestamp)
}

// chargeTriage spends the triage unit of a message analyzed before it is stored; it
// reports whether the message keeps its triage.
func chargeTriage(tx Tx, m *NewMessage) (bool, error) {
	if !m.ChargeTriage {
		return true, nil
	}
	a, err := triageAllowance(tx, m)
	if err != nil {
		return false, err
	}
	err = a.spend(tx)
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

// ScanThreadRefs reads rows of Message-ID, thread row and thread uuid into the threads
// by Message-ID. found may already hold some; it is returned.
func ScanThreadRefs(rows Rows, found map[string]ThreadRef) (map[string]ThreadRef, error) {
	err := EachRow(rows, func(r RowScanner) error {
		var mid string
		var t ThreadRef
		if err := r.Scan(&mid, &t.Row, &t.UUID); err != nil {
			return err
		}
		found[mid] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return found, nil
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
