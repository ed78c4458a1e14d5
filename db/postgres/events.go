package postgres

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/db"
)

// Reading the event log (db.EventLog); appends and the signal that wakes readers on
// every process are in log.go, which says how seq follows commit order.

// eventColumns are what db.ScanEvent reads, of events e and its inbox i.
const eventColumns = `e.seq, e.event_id, e.account_id, e.inbox_id, i.address, e.type, e.occurred_at, e.message_row,
	e.message_id, e.thread_id, e.detail`

const eventFrom = " FROM events e JOIN inboxes i ON i.id = e.inbox_id"

// Events returns up to limit events after seq that pass f, in commit order.
func (s *Store) Events(ctx context.Context, after int64, f db.EventFilter, limit int) ([]db.Event, error) {
	var q strings.Builder
	var args sqlArgs
	q.WriteString("SELECT " + eventColumns + eventFrom + " WHERE e.seq > " + args.add(after))
	if f.AccountID != "" {
		q.WriteString(" AND e.account_id = " + args.add(f.AccountID))
	}
	if len(f.Inboxes) > 0 {
		q.WriteString(" AND e.inbox_id = ANY(" + args.add(f.Inboxes) + ")")
	}
	if len(f.Types) > 0 {
		q.WriteString(" AND e.type = ANY(" + args.add(f.Types) + ")")
	}
	q.WriteString(" ORDER BY e.seq LIMIT " + strconv.Itoa(limit))
	rows, err := s.pool.Query(ctx, q.String(), args...)
	if err != nil {
		return nil, storageError(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.Event, error) { return db.ScanEvent(r) })
	return out, storageError(err)
}

// eventsBySeq returns the events of seqs, by seq.
func eventsBySeq(ctx context.Context, q querier, seqs []int64) (map[int64]db.Event, error) {
	rows, err := q.Query(ctx, "SELECT "+eventColumns+eventFrom+" WHERE e.seq = ANY($1)", seqs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return db.ScanEventsBySeq(rows)
}

// EventBounds returns the newest seq ever committed and the newest seq retention dropped.
func (s *Store) EventBounds(ctx context.Context) (last, expired int64, err error) {
	err = s.pool.QueryRow(ctx, "SELECT last, expired FROM log_heads WHERE name = 'events'").Scan(&last, &expired)
	return last, expired, storageError(err)
}

// TrimEvents drops the events that occurred before before (db.EventRetention) and records
// the newest seq it dropped. Seq follows commit order and occurred_at follows it closely,
// so the events to drop are the ones before the first that is recent enough. Two
// processes trimming at once agree: the head only moves forward.
func (s *Store) TrimEvents(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		n = 0
		var through *int64
		err := w.queryRow(`SELECT MAX(seq) FROM events WHERE seq < COALESCE(
			(SELECT seq FROM events WHERE occurred_at >= $1 ORDER BY seq LIMIT 1), (SELECT MAX(seq) + 1 FROM events))`,
			millis(before)).Scan(&through)
		if err != nil || through == nil {
			return err
		}
		tag, err := w.exec("DELETE FROM events WHERE seq <= $1", *through)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = w.exec("UPDATE log_heads SET expired = GREATEST(expired, $1) WHERE name = 'events'", *through)
		return err
	})
	return n, err
}

// Arrivals returns the messages of the events this process appended a moment ago.
func (s *Store) Arrivals() *db.Arrivals { return &s.arrivals }

// EventMessages returns the messages of rows with their bodies, by row id; a deleted
// message is absent.
func (s *Store) EventMessages(ctx context.Context, rows []int64) (map[int64]*db.Message, error) {
	out := make(map[int64]*db.Message, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	rs, err := s.pool.Query(ctx, "SELECT "+summaryColumns+", "+bodyColumns+messageFrom+" WHERE m.id = ANY($1)", rows)
	msgs, err := collectMessages(rs, err, scanFull)
	if err != nil {
		return nil, storageError(err)
	}
	if err := fillAttachments(ctx, s.pool, msgs); err != nil {
		return nil, storageError(err)
	}
	for i := range msgs {
		out[msgs[i].ID] = &msgs[i]
	}
	return out, nil
}
