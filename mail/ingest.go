package mail

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Recipient errors of ResolveRecipient; the SMTP listener turns each into its reply.
var (
	// ErrNotLocal: the domain is not one this server receives mail for. Accepting it would
	// make the server an open relay.
	ErrNotLocal = errors.New("mail: not a domain this server receives mail for")
	// ErrUnknownRecipient: a served domain, but no inbox has the address.
	ErrUnknownRecipient = errors.New("mail: unknown recipient")
	// ErrRecipientRetired: the inbox was deleted; its address is never reused.
	ErrRecipientRetired = errors.New("mail: recipient inbox was deleted")
	// ErrRecipientPending: the inbox exists but its setup is not finished yet.
	ErrRecipientPending = errors.New("mail: recipient inbox setup is not finished")
	// ErrEmptyMessage: the message holds nothing that can be stored.
	ErrEmptyMessage = errors.New("mail: message is empty")
)

// ResolveRecipient finds the inbox an envelope recipient of inbound mail is for: a ready
// inbox on a domain this server serves. It returns the inbox's row id.
//
// Errors: ErrNotLocal, ErrUnknownRecipient, ErrRecipientRetired, ErrRecipientPending, and
// storage errors (transient).
func (s *Service) ResolveRecipient(ctx context.Context, address string) (int64, error) {
	addr, ok := bareAddress(address)
	if !ok {
		return 0, ErrUnknownRecipient
	}
	local, err := s.localDomain(ctx, addr[strings.LastIndexByte(addr, '@')+1:])
	if err != nil {
		return 0, err
	}
	if !local {
		return 0, ErrNotLocal
	}
	inbox, err := s.Store.LocalInbox(ctx, addr)
	switch {
	case db.IsCode(err, db.ECodeNotFound):
		return 0, ErrUnknownRecipient
	case err != nil:
		return 0, err
	case inbox.Retired:
		return 0, ErrRecipientRetired
	case inbox.DeliveryStatus != db.DeliveryReady:
		return 0, ErrRecipientPending
	}
	return inbox.ID, nil
}

// Incoming is a message accepted over SMTP for one or more local inboxes.
type Incoming struct {
	// Data is the message as the client sent it. It is what is parsed, so a message
	// without a Message-ID gets the same synthetic id when the client sends it again.
	Data []byte
	// Trace holds header fields (Received:) prepended to the stored raw copy.
	Trace string
	// Inboxes are the row ids of the recipient inboxes (ResolveRecipient); duplicates are
	// stored once.
	Inboxes []int64
	// The SMTP session the message came in: what SPF and the protection verdict look at.
	RemoteIP net.IP // nil when unknown
	Helo     string // the name given in HELO/EHLO
	MailFrom string // the envelope sender; "" for the null sender <>
}

// Receive stores an incoming message in each of its recipient inboxes: parsed once, one
// copy per inbox, labelled received+unread, threaded by its headers, triage pending, all
// in one transaction. It returns only after that transaction committed, so a caller that
// acknowledges on a nil error never acknowledges mail that could still be lost. Many
// concurrent calls share one commit (see groupCommit).
//
// Errors: ErrEmptyMessage, ErrScanUnavailable (transient), and storage errors (transient:
// the sender should retry).
func (s *Service) Receive(ctx context.Context, in Incoming) ([]db.Stored, error) {
	s.ingest.arrive()
	p, err := Parse(in.Data)
	if err != nil {
		s.ingest.leave()
		return nil, ErrEmptyMessage
	}
	verdict, err := s.scan(ctx, p, in.Data, Origin{RemoteIP: in.RemoteIP, Helo: in.Helo, MailFrom: in.MailFrom})
	if err != nil {
		s.ingest.leave()
		return nil, err
	}
	raw := in.Data
	if in.Trace != "" {
		raw = make([]byte, 0, len(in.Trace)+len(in.Data))
		raw = append(append(raw, in.Trace...), in.Data...)
	}
	now := s.Store.Now()
	seen := map[int64]bool{}
	msgs := make([]db.NewMessage, 0, len(in.Inboxes))
	for _, id := range in.Inboxes {
		if seen[id] {
			continue
		}
		seen[id] = true
		m := s.received(p, raw, id, now)
		applyVerdict(&m, verdict)
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		s.ingest.leave()
		return nil, nil
	}
	return s.ingest.deliver(ctx, s.Store, msgs)
}

// Group commit limits: one transaction takes at most this many deliveries, or this many
// bytes of raw mail (but always at least one delivery).
const (
	groupMaxDeliveries = 256
	groupMaxBytes      = 32 << 20
	// groupLinger is the longest a commit waits for deliveries that are being parsed
	// right now and will join within a fraction of it.
	groupLinger = time.Millisecond
)

// groupCommit batches concurrent deliveries into shared transactions. The first delivery
// to arrive when no commit runs starts a committer goroutine; while it commits, later
// deliveries queue up and go together in its next transaction; when nothing is left it
// exits. Before a commit it waits (at most groupLinger) for the deliveries being parsed
// at that moment, which would otherwise each pay a commit of their own. Under load that
// is many messages per commit; a lone message commits at once. Each delivery keeps its
// own all-or-nothing savepoint.
type groupCommit struct {
	mu       sync.Mutex
	pending  []*delivery
	running  bool
	arriving int           // deliveries being parsed, not yet queued
	arrived  chan struct{} // poked when one is queued while the committer lingers
}

// arrive announces a delivery that is being parsed; deliver or leave ends it.
func (g *groupCommit) arrive() {
	g.mu.Lock()
	g.arriving++
	g.mu.Unlock()
}

func (g *groupCommit) leave() {
	g.mu.Lock()
	g.arriving--
	g.poke()
	g.mu.Unlock()
}

// poke wakes a lingering committer; requires mu.
func (g *groupCommit) poke() {
	if g.arrived == nil {
		g.arrived = make(chan struct{}, 1)
	}
	select {
	case g.arrived <- struct{}{}:
	default:
	}
}

type delivery struct {
	msgs   []db.NewMessage
	size   int
	stored []db.Stored
	err    error
	done   chan struct{}
}

func (g *groupCommit) deliver(ctx context.Context, store *db.Store, msgs []db.NewMessage) ([]db.Stored, error) {
	d := &delivery{msgs: msgs, done: make(chan struct{})}
	for i := range msgs {
		d.size += len(msgs[i].Raw)
	}
	g.mu.Lock()
	g.arriving--
	g.pending = append(g.pending, d)
	if !g.running {
		g.running = true
		go g.run(store)
	} else {
		g.poke()
	}
	g.mu.Unlock()
	select {
	case <-d.done:
		return d.stored, d.err
	case <-ctx.Done():
		// The commit may still happen; the caller must not acknowledge. A sender that
		// retries is absorbed by Message-ID de-duplication.
		return nil, ctx.Err()
	}
}

func (g *groupCommit) run(store *db.Store) {
	for {
		g.mu.Lock()
		if len(g.pending) > 0 && g.arriving > 0 {
			g.linger()
		}
		n, size := 0, 0
		for n < len(g.pending) && n < groupMaxDeliveries && (n == 0 || size+g.pending[n].size <= groupMaxBytes) {
			size += g.pending[n].size
			n++
		}
		if n == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		batch := make([]*delivery, n)
		copy(batch, g.pending)
		rest := copy(g.pending, g.pending[n:])
		clear(g.pending[rest:])
		g.pending = g.pending[:rest]
		g.mu.Unlock()

		groups := make([][]db.NewMessage, n)
		for i, d := range batch {
			groups[i] = d.msgs
		}
		// No deadline: the SQLite driver runs every statement of a cancellable context on
		// a goroutine of its own, which costs more than the statement. busy_timeout bounds
		// waiting for the lock; nothing else in a commit waits.
		stored, errs, err := store.DeliverBatch(context.Background(), groups)
		for i, d := range batch {
			if err != nil {
				d.err = err
			} else {
				d.stored, d.err = stored[i], errs[i]
			}
			close(d.done)
		}
	}
}

// linger waits, with mu held on entry and return, until the deliveries being parsed are
// queued, the batch is full, or groupLinger passed.
func (g *groupCommit) linger() {
	if g.arrived == nil {
		g.arrived = make(chan struct{}, 1)
	}
	t := time.NewTimer(groupLinger)
	defer t.Stop()
	for g.arriving > 0 && len(g.pending) < groupMaxDeliveries {
		g.mu.Unlock()
		select {
		case <-g.arrived:
			g.mu.Lock()
		case <-t.C:
			g.mu.Lock()
			return
		}
	}
}
