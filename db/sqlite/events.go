package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The event log (migration 0014, db.EventLog). Events are appended in the transaction of
// their change (appendEvent); the writer assigns seq in commit order, so a reader that
// has every event through seq has every event committed before it.

// eventSignal wakes the readers of the event log when a transaction that appended events
// commits. appendEvent marks it from inside the writer; the committer fires it after the
// commit (write.go), so a woken reader finds the events there. It also keeps the
// messages of the events appended (db.Arrivals), for their payloads, and the accounts'
// enabled webhooks that the events are fanned out to (hookCache).
type eventSignal struct {
	appended atomic.Bool
	db.Signal
	arrivals db.Arrivals
	hooks    hookCache
	offers   hookOffers // where units of work hand over webhook deliveries (offers.go)
}

// fireIfAppended wakes the readers when events were appended since the last firing. A
// transaction that appended and then rolled back wakes them for nothing, which is harmless.
func (e *eventSignal) fireIfAppended() {
	if e.appended.Swap(false) {
		e.Fire()
	}
}

// appendEvent appends e in tx and marks sig to fire after the commit; id is the event's.
func appendEvent(ctx context.Context, tx *sql.Tx, sig *eventSignal, e db.NewEvent) (a db.AppendedEvent, id string, err error) {
	detail, err := db.EventDetail(e)
	if err != nil {
		return a, "", err
	}
	id = newRowUUID()
	err = tx.QueryRowContext(ctx, `INSERT INTO events(event_id, account_id, inbox_id, type, occurred_at, message_row, message_id, thread_id, detail)
		SELECT ?, i.account_id, m.inbox_id, ?, ?, m.id, m.message_id, (SELECT t.uuid FROM threads t WHERE t.id = m.thread_id), ?
		FROM messages m JOIN inboxes i ON i.id = m.inbox_id WHERE m.id = +? RETURNING seq, account_id, inbox_id`,
		id, e.Type, millis(e.OccurredAt), detail, e.MessageRow).Scan(&a.Seq, &a.AccountID, &a.InboxRow)
	if err != nil {
		return a, "", err
	}
	sig.appended.Store(true)
	sig.arrivals.Put(id, e.Message)
	return a, id, nil
}

// EventsCommitted returns a channel closed when events are next committed.
func (s *Store) EventsCommitted() <-chan struct{} { return s.events.Wait() }

// Arrivals returns the messages of the events this process appended a moment ago.
func (s *Store) Arrivals() *db.Arrivals { return &s.events.arrivals }

// eventRows are the columns db.ScanEvent reads, of events e joined with inboxes i.
const eventRows = `SELECT e.seq, e.event_id, e.account_id, e.inbox_id, i.address, e.type, e.occurred_at, e.message_row,
		e.message_id, e.thread_id, e.detail FROM events e JOIN inboxes i ON i.id = e.inbox_id`

// Events returns up to limit events after seq that pass f, in commit order.
func (s *Store) Events(ctx context.Context, after int64, f db.EventFilter, limit int) ([]db.Event, error) {
	var q strings.Builder
	args := []any{after}
	q.WriteString(eventRows + " WHERE e.seq > ?")
	if f.AccountID != "" {
		q.WriteString(" AND e.account_id = +?")
		args = append(args, f.AccountID)
	}
	if len(f.Inboxes) > 0 {
		q.WriteString(" AND e.inbox_id IN (" + placeholders(len(f.Inboxes)) + ")")
		for _, in := range f.Inboxes {
			args = append(args, in)
		}
	}
	if len(f.Types) > 0 {
		q.WriteString(" AND e.type IN (" + placeholders(len(f.Types)) + ")")
		for _, t := range f.Types {
			args = append(args, t)
		}
	}
	q.WriteString(" ORDER BY e.seq LIMIT +?")
	args = append(args, limit)
	var out []db.Event
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = db.ScanRows(rows, db.ScanEvent)
		return err
	})
	return out, err
}

// EventBounds returns the newest seq ever committed and the newest retention dropped.
func (s *Store) EventBounds(ctx context.Context) (last, expired int64, err error) {
	err = s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var v []byte
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").Scan(&last); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, "SELECT value FROM settings WHERE name = 'events_expired_through'").Scan(&v); err != nil {
			return err
		}
		expired, err = strconv.ParseInt(string(v), 10, 64)
		return err
	})
	return last, expired, err
}

// TrimEvents drops the events that occurred before before (db.EventRetention) and
// records the newest seq it dropped. Seq follows commit order and occurred_at follows it
// closely, so the events to drop are the ones before the first that is recent enough.
func (s *Store) TrimEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var through sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT MAX(seq) FROM events WHERE seq < COALESCE(
			(SELECT seq FROM events WHERE occurred_at >= ? ORDER BY seq LIMIT 1), (SELECT MAX(seq) + 1 FROM events))`,
			millis(before)).Scan(&through)
		if err != nil || !through.Valid {
			return err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM events WHERE seq <= ?", through.Int64)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE settings SET value = CAST(? AS BLOB) WHERE name = 'events_expired_through'
			AND CAST(CAST(value AS TEXT) AS INTEGER) < ?`, strconv.FormatInt(through.Int64, 10), through.Int64)
		return err
	})
	return n, err
}

// EventMessages returns the messages of rows with their bodies, by row id; a deleted
// message is absent.
func (s *Store) EventMessages(ctx context.Context, rows []int64) (map[int64]*db.Message, error) {
	out := make(map[int64]*db.Message, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	args := make([]any, len(rows))
	for i, r := range rows {
		args[i] = r
	}
	err := s.read(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rs, err := tx.QueryContext(ctx, "SELECT "+summaryColumns+", "+bodyColumns+messageFrom+
			" WHERE m.id IN ("+placeholders(len(rows))+")", args...)
		if err != nil {
			return err
		}
		var msgs []db.Message
		for rs.Next() {
			var b bodyFields
			var body db.Message
			m, err := scanSummary(rs, b.dest(&body)...)
			if err != nil {
				rs.Close()
				return err
			}
			m.InReplyTo = body.InReplyTo
			if err := b.apply(m); err != nil {
				rs.Close()
				return err
			}
			msgs = append(msgs, *m)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		if err := fillAttachments(ctx, tx, msgs); err != nil {
			return err
		}
		for i := range msgs {
			out[msgs[i].ID] = &msgs[i]
		}
		return nil
	})
	return out, err
}
