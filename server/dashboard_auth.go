package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
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
	maxSessions     = 1000

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

// session is a logged-in operator. Only the SHA-256 of its cookie is kept.
type session struct {
	operator string
	csrf     string
	expires  time.Time
}

type sessions struct {
	mu sync.Mutex
	m  map[[32]byte]*session
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (ss *sessions) create(operator string, now time.Time) (string, *session) {
	token := randomToken()
	s := &session{operator: operator, csrf: randomToken(), expires: now.Add(sessionLifetime)}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k, v := range ss.m {
		if now.After(v.expires) {
			delete(ss.m, k)
		}
	}
	if len(ss.m) >= maxSessions {
		// Drop the oldest: the cap keeps a flood of logins from growing memory.
		var oldest [32]byte
		var at time.Time
		for k, v := range ss.m {
			if at.IsZero() || v.expires.Before(at) {
				oldest, at = k, v.expires
			}
		}
		delete(ss.m, oldest)
	}
	ss.m[sha256.Sum256([]byte(token))] = s
	return token, s
}

func (ss *sessions) get(token string, now time.Time) *session {
	if token == "" {
		return nil
	}
	key := sha256.Sum256([]byte(token))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[key]
	if s != nil && now.After(s.expires) {
		delete(ss.m, key)
		return nil
	}
	return s
}

func (ss *sessions) drop(token string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, sha256.Sum256([]byte(token)))
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
