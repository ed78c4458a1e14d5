package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/inboxd/inboxd/db"
)

// Operator is the name of the dashboard's one operator: the person who reviews quarantine.
// It is what releasedBy says.
const Operator = "admin"

// Dashboard sessions (the login throttle is in dashboard_throttle.go).
const (
	sessionCookie   = "inboxd_session"
	loginCookie     = "inboxd_login" // CSRF token of the login form (double submit)
	sessionLifetime = 12 * time.Hour
	maxSessions     = 1000 // per operator: the oldest is dropped

	bcryptCost = bcrypt.DefaultCost
)

// MinOperatorPassword is the fewest characters a chosen dashboard password may have: the
// dashboard releases quarantined mail and sits on the API's port, so a short password is
// guessed. A generated one has 24.
const MinOperatorPassword = 12

// CheckOperatorPassword refuses a chosen password shorter than MinOperatorPassword. The
// error names the length, never the password.
func CheckOperatorPassword(password string) error {
	if n := utf8.RuneCountInString(password); n < MinOperatorPassword {
		return fmt.Errorf("%d characters; use at least %d, or none to have one generated", n, MinOperatorPassword)
	}
	return nil
}

// passwordKey is what bcrypt hashes: the SHA-256 of the password, so that passwords
// longer than bcrypt's 72 bytes are not cut short.
func passwordKey(password string) []byte {
	sum := sha256.Sum256([]byte(password))
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}

// EnsureOperatorPassword prepares the dashboard login. A given password (--admin-password
// or INBOXD_ADMIN_PASSWORD) is stored hashed, replacing an older one. With none given, a
// stored password is kept; on first start a password is generated, stored hashed and
// returned so that the caller prints it once. It returns "" when nothing was generated.
func EnsureOperatorPassword(ctx context.Context, store db.Store, password string) (string, error) {
	stored, err := store.OperatorPasswordHash(ctx, Operator)
	if err != nil {
		return "", err
	}
	how := "password_set"
	generated := ""
	switch {
	case password != "":
		if err := CheckOperatorPassword(password); err != nil {
			return "", fmt.Errorf("operator password: %w", err)
		}
		if stored != nil && bcrypt.CompareHashAndPassword(stored, passwordKey(password)) == nil {
			return "", nil // unchanged
		}
	case stored != nil:
		return "", nil
	default:
		b := make([]byte, 15)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		password = strings.ToLower(base32.StdEncoding.EncodeToString(b))
		generated, how = password, "password_generated"
	}
	hash, err := bcrypt.GenerateFromPassword(passwordKey(password), bcryptCost)
	if err != nil {
		return "", err
	}
	if err := store.SetOperatorPasswordHash(ctx, Operator, hash, how); err != nil {
		return "", err
	}
	return generated, nil
}

// session is a logged-in operator, as a dashboard request sees it. The store keeps it
// (db.DashboardLogins), so that it holds on every process on one database and survives a
// restart, by the SHA-256 of its cookie's token only: what the table holds (in a backup, a
// replica) logs no one in.
type session struct {
	operator string
	csrf     string
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenHash is what the store keeps of a session's token.
func tokenHash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// csrfOf is the CSRF token of the forms of the session whose cookie holds token: derived
// from it, so that it is stored nowhere and is the same on every process, and one-way, so
// that the token on a page tells nothing of the cookie's (nor does the stored hash tell
// the form's).
func csrfOf(token string) string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("inboxd dashboard csrf"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// startSession logs operator in and returns the token of its cookie.
func (d *dashboard) startSession(ctx context.Context, operator string) (string, error) {
	token := randomToken()
	err := d.s.store.CreateDashboardSession(ctx, tokenHash(token), operator, d.s.now().Add(sessionLifetime), maxSessions)
	return token, err
}

// session returns the live session whose cookie holds token, or nil: one lookup by key in
// the store, on every request, so a logout or an expiry holds on every process at once.
func (d *dashboard) session(ctx context.Context, token string) (*session, error) {
	if !tokenPattern.MatchString(token) {
		return nil, nil // not a token this server makes: nothing to look up
	}
	s, err := d.s.store.DashboardSession(ctx, tokenHash(token))
	if s == nil || err != nil {
		return nil, err
	}
	return &session{operator: s.Operator, csrf: csrfOf(token)}, nil
}

// checkPassword compares against the stored hash; it costs a bcrypt comparison even when no
// password is stored, so timing tells nothing.
func (d *dashboard) checkPassword(ctx context.Context, password string) (bool, error) {
	hash, err := d.s.store.OperatorPasswordHash(ctx, Operator)
	if err != nil {
		return false, err
	}
	if hash == nil {
		d.dummyOnce.Do(func() { d.dummyHash, _ = bcrypt.GenerateFromPassword([]byte(randomToken()), bcryptCost) })
		bcrypt.CompareHashAndPassword(d.dummyHash, passwordKey(password))
		return false, nil
	}
	return bcrypt.CompareHashAndPassword(hash, passwordKey(password)) == nil, nil
}

func equalTokens(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
