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

// Service runs the mail rules that touch the store: receiving into inboxes, sending and
// replying, and delivering from the outbound queue.
type Service struct {
	Store     db.Store
	Domain    string // the server's default domain
	SendLimit int
	Log       *slog.Logger

	// Outbound configures delivery to recipients elsewhere (transport.go).
	Outbound OutboundConfig

	// Protect, when set, gives every received message its protection verdict (receive.go).
	Protect *protect.Scanner

	// NoTriage is --triage off: received mail carries no triage and is not analyzed.
	NoTriage bool
	// TriageNow, when set, analyzes received mail at now, before it is stored: for a
	// provider that answers at once without the network (the built-in model). The result
	// is stored with the message, which spares the queue's two write transactions and a
	// second indexing of the message. Nil leaves every analysis to the triage queue.
	TriageNow func(m *db.NewMessage, now time.Time) *db.Triage

	kick chan struct{}
}

// NewService returns a Service; RunOutbound must run for queued mail to move.
func NewService(store db.Store, domain string, sendLimit int, log *slog.Logger) *Service {
	if sendLimit <= 0 {
		sendLimit = DefaultSendLimit
	}
	if log == nil {
		log = slog.Default()
	}
	return &Service{Store: store, Domain: strings.ToLower(domain), SendLimit: sendLimit, Log: log, kick: make(chan struct{}, 1)}
}

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
	if domain == s.Domain {
		return true, nil
	}
	return s.Store.DomainServed(ctx, domain)
}
