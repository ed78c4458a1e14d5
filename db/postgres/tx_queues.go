package postgres

import (
	"time"

	"github.com/inboxd/inboxd/db"
)

// The triage queue in a unit of work (db.ClaimTriage). Several processes take from it at
// once: DueTriage takes the rows it returns with FOR UPDATE SKIP LOCKED (a row another
// process is claiming right now is passed over, not waited for) and leases them for
// triageLease (leased_until), so no other process takes them while they are analyzed. A
// process that dies mid-analysis leaves its rows to be claimed again once the lease has
// run out; FinishTriage takes the row off the queue, or clears the lease with a retry,
// only while the row is still leased to the claim the outcome belongs to.

// triageLease is how long a claimed message is left to the process that claimed it: far
// longer than an analysis takes (a provider call is bounded well below it). A claim waits
// for a free analyzer too, which may take longer with a slow endpoint: the worker analyzes
// no message whose lease is (nearly) over (TriageJob.LeaseEnds), and claims it again.
const triageLease = 5 * time.Minute

func (u *unit) DueTriage(now time.Time, limit int, skip []int64) ([]db.QueuedTriage, error) {
	if skip == nil {
		skip = []int64{}
	}
	rows, err := u.query(`WITH due AS (
			SELECT q.message_id FROM triage_queue q JOIN messages m ON m.id = q.message_id
			WHERE q.next_at <= $1 AND q.leased_until <= $1 AND NOT m.quarantined AND q.message_id <> ALL($2)
			ORDER BY q.next_at, q.message_id LIMIT $3 FOR UPDATE OF q SKIP LOCKED),
		leased AS (UPDATE triage_queue q SET leased_until = $4 FROM due WHERE q.message_id = due.message_id
			RETURNING q.message_id, q.attempts, q.charged_period IS NOT NULL AS charged, q.next_at, q.signals)
		SELECT l.message_id, l.attempts, l.charged, i.account_id, m.message_id, m.from_addr, m.to_addrs, m.cc_addrs, m.subject, m.ts, l.signals
		FROM leased l JOIN messages m ON m.id = l.message_id JOIN inboxes i ON i.id = m.inbox_id
		ORDER BY l.next_at, l.message_id`, millis(now), skip, limit, millis(now.Add(triageLease)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	due, err := db.ScanRows(rows, db.ScanQueuedTriage)
	ends := fromMillis(millis(now.Add(triageLease))).Time // as leased_until holds it
	for i := range due {
		due[i].Job.LeaseEnds = ends
	}
	return due, err
}

func (u *unit) MarkTriageCharged(messageRow int64, period string) error {
	_, err := u.exec("UPDATE triage_queue SET charged_period = $1 WHERE message_id = $2", period, messageRow)
	return err
}

func (u *unit) SkipTriage(messageRow int64) error { return u.skipTriage(messageRow) }

// skipTriage drops a message from the queue with no triage at all.
func (w *wtx) skipTriage(messageRow int64) error {
	if _, err := w.exec("DELETE FROM triage_queue WHERE message_id = $1", messageRow); err != nil {
		return err
	}
	return w.setTriage(messageRow, nil)
}

// setTriage stores a message's triage and the copies list filters match on (only a
// complete result has them), and tells the search indexes the message changed.
func (w *wtx) setTriage(messageRow int64, t *db.Triage) error {
	var js, cat, reply, urg *string
	if t != nil {
		js = jsonText(t)
		if t.Status == db.TriageComplete {
			cat, reply, urg = triageFilterColumns(t)
		}
	}
	if _, err := w.exec("UPDATE messages SET triage = $1, tri_category = $2, tri_reply = $3, tri_urgency = $4 WHERE id = $5",
		js, cat, reply, urg, messageRow); err != nil {
		return err
	}
	// The search indexes hold the triage values their filters match on.
	return w.enqueueIndex("m.id = $1", messageRow)
}
