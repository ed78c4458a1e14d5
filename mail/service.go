package mail

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail/protect"
)

// DefaultSendLimit is the per-inbox rolling 24 h send limit (API-NOTES section 10).
const DefaultSendLimit = 250

// Config is everything a Service needs: its store and what the deployment chose.
type Config struct {
	Store  db.Store
	Domain string // the server's default domain
	// SendLimit is the per-inbox rolling 24 h send limit (0: DefaultSendLimit).
	SendLimit int
	Log       *slog.Logger // nil: slog.Default()

	// Outbound configures delivery to recipients elsewhere (transport.go).
	Outbound OutboundConfig

	// Protect, when set, gives every received message its protection verdict (receive.go).
	Protect *protect.Scanner

	// NoTriage is --triage off: received mail carries no triage and is not analyzed.
	NoTriage bool
	// TriageNow, when set, analyzes received mail at now, before it is stored: for a
	// provider that answers at once without the network (triage.Provider.Inline). The
	// result is stored with the message, which spares the queue's two write transactions
	// and a second indexing of the message. Nil leaves every analysis to the triage queue.
	TriageNow func(m *db.NewMessage, now time.Time) *db.Triage

	// Faults are the test controls' fault rules for outbound delivery and triage (nil:
	// none).
	Faults *Faults
}

// Service runs the mail rules that touch the store: receiving into inboxes, sending and
// replying, and delivering from the outbound queue.
type Service struct {
	store     db.Store
	domain    string
	sendLimit int
	log       *slog.Logger
	outbound  OutboundConfig
	protect   *protect.Scanner
	faults    *Faults
	noTriage  bool
	triageNow func(m *db.NewMessage, now time.Time) *db.Triage

	kick chan struct{}
}

// NewService returns a Service configured by cfg; RunOutbound must run for queued mail to
// move.
func NewService(cfg Config) *Service {
	if cfg.SendLimit <= 0 {
		cfg.SendLimit = DefaultSendLimit
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Service{store: cfg.Store, domain: strings.ToLower(cfg.Domain), sendLimit: cfg.SendLimit, log: cfg.Log,
		outbound: cfg.Outbound, protect: cfg.Protect, faults: cfg.Faults, noTriage: cfg.NoTriage, triageNow: cfg.TriageNow,
		kick: make(chan struct{}, 1)}
}

// Domain is the server's default domain, in lower case.
func (s *Service) Domain() string { return s.domain }

// wake tells the outbound worker that new work is queued.
func (s *Service) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// localDomain reports whether this server receives mail for domain.
func (s *Service) localDomain(ctx context.Context, domain string) (bool, error) {
	domain = strings.ToLower(domain)
	if domain == s.domain {
		return true, nil
	}
	return s.store.DomainServed(ctx, domain)
}
