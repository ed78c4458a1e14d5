package db

import "context"

// Label changes (API-NOTES section 4): a message op changes one message, a thread op every
// message of the thread; both refuse the quarantined label and any change to quarantined
// mail, and removal wins over an add.

// CheckLabelChange refuses label changes an API key may not make.
func CheckLabelChange(add, remove []string) error {
	for _, l := range append(append([]string(nil), add...), remove...) {
		if l == LabelQuarantined {
			return Errorf(ECodeQuarantineReview, "the quarantined label can only be changed by a person in the review dashboard")
		}
	}
	return nil
}

// LabelTarget is what a label change applies to: one message, or every message of a
// thread, by row id.
type LabelTarget struct {
	Thread bool
	Row    int64
	// Held: a message it reaches is quarantined.
	Held bool
}

// UpdateMessageLabels adds and removes labels on one message.
//
// Errors: quarantine_review_required, not_found.
func UpdateMessageLabels(ctx context.Context, st Units, inboxID int64, messageID string, add, remove []string) error {
	return relabel(ctx, st, inboxID, false, messageID, add, remove)
}

// UpdateThreadLabels adds and removes labels on every message of a thread.
//
// Errors: quarantine_review_required, not_found.
func UpdateThreadLabels(ctx context.Context, st Units, inboxID int64, threadID string, add, remove []string) error {
	return relabel(ctx, st, inboxID, true, threadID, add, remove)
}

func relabel(ctx context.Context, st Units, inboxID int64, thread bool, id string, add, remove []string) error {
	if err := CheckLabelChange(add, remove); err != nil {
		return err
	}
	what := map[bool]string{false: "message ", true: "thread "}[thread] + id
	return st.Update(ctx, func(tx Tx) error {
		t, found, err := tx.LabelTarget(inboxID, thread, id)
		switch {
		case err != nil:
			return err
		case !found:
			return Errorf(ECodeNotFound, "%s not found", what)
		case len(add)+len(remove) == 0:
			return nil
		case t.Held:
			// The labels of held mail stay as the scanner set them until a person has
			// reviewed it: an added trash, received or sent would move it between the
			// views that depend on them. Held mail is alone in its thread (chooseThread),
			// so a thread change that reaches it reaches nothing else.
			return Errorf(ECodeQuarantineReview, "%s is held in quarantine: its labels can change only after a person releases it in the review dashboard", what)
		}
		before, err := tx.LabelsOf(t)
		if err != nil {
			return err
		}
		if err := tx.Relabel(t, without(add, remove), remove); err != nil {
			return err
		}
		after, err := tx.LabelsOf(t)
		if err != nil {
			return err
		}
		return recordLabelChanges(tx, before, after)
	})
}

// without is add less the labels in remove: removal wins over an add of the same label.
func without(add, remove []string) []string {
	out := make([]string, 0, len(add))
	for _, l := range add {
		drop := false
		for _, r := range remove {
			drop = drop || r == l
		}
		if !drop {
			out = append(out, l)
		}
	}
	return out
}
