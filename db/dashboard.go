package db

import (
	"context"
	"time"
)

// The review dashboard's logins live in the store, not in a process's memory, so that they
// hold across processes on one database and survive a restart: an operator who logs in
// through one process is logged in on every other, logging out ends the session on all of
// them, and a guesser cannot get more tries by spreading its guesses over processes. The
// rules (how long a session lasts, how many tries a client gets and how long it waits) are
// the server's; the store keeps what they count and makes each change atomic.

// DashboardSession is a logged-in operator, stored under the SHA-256 of its cookie's token
// (never the token itself).
type DashboardSession struct {
	Operator string
	Expires  time.Time
}

// LoginTries is what the store holds of one client's dashboard logins.
type LoginTries struct {
	Pending  int       // attempts counted whose password is being checked (CountLoginAttempt's own included)
	Failed   int       // wrong passwords since the last right one, or since forgotten
	LastFail time.Time // when the latest wrong password was counted; zero when none
	Reported int       // the mark of the latest refusal reported (RefuseLoginAttempt)
}

// LoginOutcome is how a counted login attempt ended.
type LoginOutcome int

// The outcomes of a login attempt.
const (
	LoginUnchecked     LoginOutcome = iota // the password was not checked (no check free, or an error)
	LoginWrongPassword                     // counts against the client
	LoginRightPassword                     // clears the client's count
)

// DashboardLogins are the review dashboard's sessions and the counts of its login
// throttle.
type DashboardLogins interface {
	// CreateDashboardSession stores a session of operator under hash (the SHA-256 of its
	// token) lasting until expires. It drops the operator's sessions that have expired, and
	// its oldest past the newest keep (this one included), so that a flood of logins cannot
	// grow them without bound. Errors: not_found (no such operator).
	CreateDashboardSession(ctx context.Context, hash [32]byte, operator string, expires time.Time, keep int) error
	// DashboardSession returns the session stored under hash, in one indexed lookup; nil
	// when there is none: never made, expired, ended (EndDashboardSession), dropped for
	// newer ones, or ended with its operator (a new password: SetOperatorPasswordHash; the
	// operator removed).
	DashboardSession(ctx context.Context, hash [32]byte) (*DashboardSession, error)
	// EndDashboardSession deletes the session stored under hash, if there is one.
	EndDashboardSession(ctx context.Context, hash [32]byte) error

	// CountLoginAttempt counts an attempt of client as pending, in one atomic step, and
	// returns the client's tries with it counted: of attempts made at once, each sees a
	// different Pending. Pending attempts are presumed lost (their process died during the
	// check) once the client has made no attempt for lost, and no longer count.
	CountLoginAttempt(ctx context.Context, client string, lost time.Duration) (LoginTries, error)
	// FinishLoginAttempt ends an attempt CountLoginAttempt counted: it is no longer pending;
	// a wrong password adds to Failed (LastFail: now), a right one clears Failed and
	// Reported.
	FinishLoginAttempt(ctx context.Context, client string, o LoginOutcome) error
	// RefuseLoginAttempt ends an attempt CountLoginAttempt counted that was refused
	// unchecked, and notes mark (what the refusal is about) as reported. It returns true
	// when mark was not the one noted before: of the attempts refused with one mark, one
	// reports it.
	RefuseLoginAttempt(ctx context.Context, client string, mark int) (bool, error)
	// ForgetLoginTries clears the failures of client (Failed, LastFail, Reported) when they
	// are still those seen: a wrong password counted since is kept.
	ForgetLoginTries(ctx context.Context, client string, seen LoginTries) error
	// PruneLoginTries drops what is held of clients that have made no attempt for idle.
	PruneLoginTries(ctx context.Context, idle time.Duration) error
}
