package sqlite

import (
	"context"
	"strings"

	"github.com/inboxd/inboxd/db"
)

// MessagesSince returns up to q.Limit summaries of an inbox's messages that pass f as
// listMessages filters them and that q chooses, oldest first. It walks the inbox's time
// index upwards from q.Since (or past q.After), so a read costs what it returns plus the
// messages f leaves out on the way.
func (s *Store) MessagesSince(ctx context.Context, inboxID int64, f db.MessageFilter, q db.SinceQuery) ([]db.Message, error) {
	if q.Rows != nil && len(q.Rows) == 0 || q.Limit <= 0 {
		return []db.Message{}, nil
	}
	var b strings.Builder
	args := listWhere(inboxID, f, &b)
	b.WriteString(" AND m.ts >= ?")
	args = append(args, millis(q.Since))
	if q.After != nil {
		b.WriteString(" AND (m.ts, m.id) > (?, ?)")
		args = append(args, millis(q.After.Timestamp), q.After.ID)
	}
	if q.Rows != nil {
		b.WriteString(" AND m.id IN (" + placeholders(len(q.Rows)) + ")")
		for _, id := range q.Rows {
			args = append(args, id)
		}
	}
	b.WriteString(" ORDER BY m.ts, m.id LIMIT +?")
	args = append(args, q.Limit)
	out, err := querySummariesOn(ctx, s.r, b.String(), args...)
	if err != nil {
		return nil, storageError(err)
	}
	return out, nil
}
