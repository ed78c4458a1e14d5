package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/inboxd/inboxd/db"
)

// The review dashboard's sessions and login counts (db.DashboardLogins, migration 0018).

// CreateDashboardSession stores a session of operator, dropping the operator's expired
// sessions and its oldest past the newest keep.
//
// Errors: not_found (no such operator).
func (s *Store) CreateDashboardSession(ctx context.Context, hash [32]byte, operator string, expires time.Time, keep int) error {
	now := s.Now()
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM dashboard_sessions WHERE operator = ? AND expires_at <= ?", operator, millis(now)); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO dashboard_sessions(token_hash, operator, expires_at)
			SELECT ?, name, ? FROM operators WHERE name = ?`, hash[:], millis(expires), operator)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return db.Errorf(db.ECodeNotFound, "no operator %q", operator)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE operator = ?1 AND token_hash <> ?2 AND token_hash NOT IN (
			SELECT token_hash FROM dashboard_sessions WHERE operator = ?1 AND token_hash <> ?2
			ORDER BY expires_at DESC, token_hash LIMIT +?3)`, operator, hash[:], max(keep, 1)-1)
		return err
	})
}

// DashboardSession returns the live session stored under hash, or nil. It reads the
// operator too: a session of an operator removed by hand, even without the foreign key's
// cascade, does not log anyone in.
func (s *Store) DashboardSession(ctx context.Context, hash [32]byte) (*db.DashboardSession, error) {
	var sess db.DashboardSession
	var expires int64
	err := s.r.QueryRowContext(ctx, `SELECT s.operator, s.expires_at FROM dashboard_sessions s JOIN operators o ON o.name = s.operator
		WHERE s.token_hash = ? AND s.expires_at > ?`,
		hash[:], millis(s.Now())).Scan(&sess.Operator, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, storageError(err)
	}
	sess.Expires = fromMillis(expires).Time
	return &sess, nil
}

// EndDashboardSession deletes the session stored under hash.
func (s *Store) EndDashboardSession(ctx context.Context, hash [32]byte) error {
	return s.exec(ctx, "DELETE FROM dashboard_sessions WHERE token_hash = ?", hash[:])
}

// CountLoginAttempt counts an attempt of client in one upsert.
func (s *Store) CountLoginAttempt(ctx context.Context, client string, lost time.Duration) (db.LoginTries, error) {
	now := s.Now()
	var t db.LoginTries
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var lastFail int64
		err := tx.QueryRowContext(ctx, `INSERT INTO login_tries(client, pending, touched_at) VALUES (?1, 1, ?2)
			ON CONFLICT(client) DO UPDATE SET pending = CASE WHEN touched_at < ?3 THEN 1 ELSE pending + 1 END, touched_at = ?2
			RETURNING pending, failed, last_fail, reported`, client, millis(now), millis(now.Add(-lost))).
			Scan(&t.Pending, &t.Failed, &lastFail, &t.Reported)
		t.LastFail = db.FromMillisOrZero(lastFail)
		return err
	})
	return t, err
}

// FinishLoginAttempt ends a counted attempt with its outcome. What is left of a client
// with nothing pending and no failure is deleted: it would count nothing.
func (s *Store) FinishLoginAttempt(ctx context.Context, client string, o db.LoginOutcome) error {
	now := millis(s.Now())
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		q := "UPDATE login_tries SET pending = MAX(pending - 1, 0), touched_at = ?2"
		switch o {
		case db.LoginWrongPassword:
			q += ", failed = failed + 1, last_fail = ?2"
		case db.LoginRightPassword:
			q += ", failed = 0, last_fail = 0, reported = 0"
		}
		if _, err := tx.ExecContext(ctx, q+" WHERE client = ?1", client, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "DELETE FROM login_tries WHERE client = ? AND pending = 0 AND failed = 0", client)
		return err
	})
}

// RefuseLoginAttempt ends a refused attempt and notes mark as reported.
func (s *Store) RefuseLoginAttempt(ctx context.Context, client string, mark int) (bool, error) {
	var report bool
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "UPDATE login_tries SET pending = MAX(pending - 1, 0), reported = ?2 WHERE client = ?1 AND reported <> ?2",
			client, mark)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if report = n == 1; report {
			return nil
		}
		_, err = tx.ExecContext(ctx, "UPDATE login_tries SET pending = MAX(pending - 1, 0) WHERE client = ?", client)
		return err
	})
	return report, err
}

// ForgetLoginTries clears the failures of client when they are still those seen.
func (s *Store) ForgetLoginTries(ctx context.Context, client string, seen db.LoginTries) error {
	return s.exec(ctx, "UPDATE login_tries SET failed = 0, last_fail = 0, reported = 0 WHERE client = ? AND failed = ? AND last_fail = ?",
		client, seen.Failed, db.MillisOrZero(seen.LastFail))
}

// PruneLoginTries drops the counts of clients idle for idle.
func (s *Store) PruneLoginTries(ctx context.Context, idle time.Duration) error {
	return s.exec(ctx, "DELETE FROM login_tries WHERE touched_at < ?", millis(s.Now().Add(-idle)))
}

// exec runs one statement as a write of its own.
func (s *Store) exec(ctx context.Context, query string, args ...any) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	})
}
