package postgres

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/inboxd/inboxd/db"
)

// storageError maps what pgx and PostgreSQL report to the model's errors. A database that
// cannot serve now (connection lost or refused, a failover, a shutdown, a full disk, too
// many connections, a read-only replica promoted late) is unavailable and transient: the
// client retries, as with SQLite's full disk. So is a conflict (serialization failure,
// deadlock) that outlived the unit of work's retries (unit.go). *db.Error values pass as
// they are, and anything else stays as it is: a bug, answered as internal.
func storageError(err error) error {
	if err == nil {
		return nil
	}
	var de *db.Error
	if errors.As(err, &de) {
		return err
	}
	if unavailable(err) {
		return &db.Error{Code: db.ECodeUnavailable, Message: "storage is temporarily unavailable; retry later", Transient: true, Cause: err}
	}
	return err
}

// unavailable reports whether err says the database cannot serve now.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case len(pe.Code) == 5 && pe.Code[:2] == "08": // connection exception
			return true
		case len(pe.Code) == 5 && pe.Code[:2] == "53": // insufficient resources: disk full, out of memory, too many connections
			return true
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pe.Code == "25006": // read-only transaction: the primary moved (failover)
			return true
		case pe.Code == "55P03": // lock not available (lock_timeout)
			return true
		}
		return pe.Code == "40001" || pe.Code == "40P01" // a conflict that outlived the retries
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

// conflict reports whether err is a conflict between concurrent transactions that running
// the unit of work again resolves: a serialization failure, a deadlock, or a unique
// violation (two processes inserting the same key: the second run finds the first's row).
func conflict(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "23505":
		return true
	}
	return false
}

// lockTimedOut reports whether err is a wait for a lock cut short by lock_timeout.
func lockTimedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// uniqueViolation reports whether err is a unique violation.
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
