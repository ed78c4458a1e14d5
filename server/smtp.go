package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-smtp"

	"github.com/inboxd/inboxd/db"
	"github.com/inboxd/inboxd/mail"
)

// SMTP limits (API-NOTES section 16 for the size; smtp_slots.go for the slots).
const (
	SMTPMaxMessageBytes = 25 << 20
	SMTPMaxSession      = 10 * time.Minute
	SMTPMaxPerAddress   = 10  // connections one client may hold: one sender cannot take every slot
	smtpMaxRecipients   = 100 // RFC 5321 section 4.5.3.1.8: at least 100 must be accepted
	// smtpMaxLineLength is far above RFC 5321's 1,000 octets: real senders write longer
	// lines (unwrapped HTML), and refusing their mail helps nobody. It bounds memory per
	// command line.
	smtpMaxLineLength  = 16 << 10
	smtpMaxConnections = 200
	smtpIdleTimeout    = 5 * time.Minute // RFC 5321 section 4.5.3.2.7
	smtpWriteTimeout   = time.Minute
	smtpMaxBadRcpts    = 20 // unknown recipients per connection before it is dropped
	// smtpBudgetWait bounds how long a whole message waits for its share of the memory
	// Budget before it gets 451 4.3.1. Senders wait ten minutes for the reply to the end
	// of data (RFC 5321 section 4.5.3.2.6); two leave them most of it while a burst of
	// large messages is worked through.
	smtpBudgetWait = 2 * time.Minute
)

// SMTPConfig configures the SMTP listener.
type SMTPConfig struct {
	// Hostname is the name in the greeting and in Received: trace fields.
	Hostname string
	// TLS enables STARTTLS.
	TLS *tls.Config
	// Zero values take the defaults above.
	MaxConnections  int
	MaxRecipients   int
	MaxMessageBytes int64
	// MaxPerAddress bounds the connections from one client: an IPv4 address, or an IPv6
	// /64 (smtp_slots.go says why).
	MaxPerAddress int
	// IdleTimeout is how long a session may go without progress: a sender, a recipient
	// or message data accepted. NOOP, RSET, VRFY, HELP and EHLO do not count, so a client
	// cannot hold its slot by repeating them.
	IdleTimeout time.Duration
	// MaxSession is how long a connection may last, however busy; a message in transfer
	// at that moment may finish (smtp_slots.go).
	MaxSession time.Duration
	// Metrics counts connections, recipients and messages (nil: not counted).
	Metrics *Metrics
	// SpoolDir is where messages over 64 KiB are held while they arrive (spool.go); ""
	// is the system's temporary directory.
	SpoolDir string
	// Budget bounds the bytes of mail processed at once, shared with the HTTP API (nil:
	// unbounded); a whole message waits at most BudgetWait for its share (default
	// smtpBudgetWait), then gets 451 4.3.1.
	Budget     *Budget
	BudgetWait time.Duration
	// Arrivals counts the messages being received, for the API server sharing it
	// (Config.Arrivals); nil: not counted.
	Arrivals *Arrivals
	// Faults are the test controls' fault rules, whose smtp rules answer a stage of a
	// session (nil: none).
	Faults *mail.Faults
}

// SMTP is the inbound SMTP listener: mail for inboxes on this server's domains only (it
// never relays), stored before it is acknowledged.
type SMTP struct {
	svc *mail.Service
	cfg SMTPConfig
	log *slog.Logger
	srv *smtp.Server

	mu      sync.Mutex
	conns   map[*slotConn]struct{}
	perAddr map[netip.Prefix]int // open connections by client (connClient)
	closing bool
}

// NewSMTP returns the listener; Serve starts it.
func NewSMTP(svc *mail.Service, cfg SMTPConfig, log *slog.Logger) *SMTP {
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = smtpMaxConnections
	}
	if cfg.MaxRecipients <= 0 {
		cfg.MaxRecipients = smtpMaxRecipients
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = SMTPMaxMessageBytes
	}
	if cfg.MaxPerAddress <= 0 {
		cfg.MaxPerAddress = SMTPMaxPerAddress
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = smtpIdleTimeout
	}
	if cfg.MaxSession <= 0 {
		cfg.MaxSession = SMTPMaxSession
	}
	if cfg.Hostname == "" {
		cfg.Hostname = svc.Domain()
	}
	if cfg.BudgetWait <= 0 {
		cfg.BudgetWait = smtpBudgetWait
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = os.TempDir()
	} else {
		cleanSpool(cfg.SpoolDir)
	}
	s := &SMTP{svc: svc, cfg: cfg, log: log, conns: map[*slotConn]struct{}{}, perAddr: map[netip.Prefix]int{}}
	srv := smtp.NewServer(s)
	srv.Domain = cfg.Hostname
	srv.MaxRecipients = cfg.MaxRecipients
	srv.MaxMessageBytes = cfg.MaxMessageBytes
	srv.MaxLineLength = smtpMaxLineLength
	srv.ReadTimeout = cfg.IdleTimeout
	srv.WriteTimeout = smtpWriteTimeout
	srv.EnableSMTPUTF8 = true
	srv.TLSConfig = cfg.TLS
	srv.ErrorLog = slogPrinter{log}
	s.srv = srv
	return s
}

// Serve accepts connections on ln until Shutdown.
func (s *SMTP) Serve(ln net.Listener) error {
	err := s.srv.Serve(&limitListener{Listener: ln, smtp: s, slots: make(chan struct{}, s.cfg.MaxConnections)})
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections and drains the open ones: a session in the middle
// of a message finishes it (and its answer), an idle one is closed with 421. When ctx ends
// first, the remaining connections are cut; their unanswered messages were not
// acknowledged, so their senders retry.
func (s *SMTP) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- s.srv.Shutdown(ctx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.nudgeIdle()
		select {
		case err := <-done:
			if err != nil {
				s.srv.Close()
			}
			if errors.Is(err, smtp.ErrServerClosed) {
				err = nil
			}
			return err
		case <-tick.C:
		}
	}
}

// nudgeIdle makes every connection that is waiting for a command time out at once;
// go-smtp then answers 421 and closes it. A session inside DATA is left to finish.
func (s *SMTP) nudgeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.nudge()
	}
}

// NewSession implements smtp.Backend.
func (s *SMTP) NewSession(c *smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Service shutting down; try again later"}
	}
	slot := slotOf(c.Conn())
	slot.attach(c)
	return &smtpSession{srv: s, conn: c, slot: slot}, nil
}

// fault is the answer an smtp fault rule of the test controls gives at stage, nil when
// none fires. The connect stage's is the greeting (limitListener): go-smtp has greeted
// with 220 by the time it opens a session.
func (s *SMTP) fault(stage, sender, recipient string) *smtp.SMTPError {
	e := s.cfg.Faults.Fire(mail.FaultSMTP, mail.FaultCase{Stage: stage, Sender: sender, Recipient: recipient})
	if e == nil {
		return nil
	}
	msg := e.Message
	if msg == "" {
		msg = "Refused by a fault rule of the test controls"
	}
	// X.0.0, as go-smtp writes a reply without an enhanced code; the greeting is written
	// without go-smtp.
	return &smtp.SMTPError{Code: e.SMTPCode, EnhancedCode: smtp.EnhancedCode{e.SMTPCode / 100, 0, 0}, Message: msg}
}

// smtpSession is one SMTP connection's state.
type smtpSession struct {
	srv  *SMTP
	conn *smtp.Conn
	slot *slotConn // nil when not accepted by limitListener

	from    string
	rcpts   []string
	inboxes []int64
	badRcpt int
}

func (x *smtpSession) Reset() {
	x.from, x.rcpts, x.inboxes = "", nil, nil
}

func (x *smtpSession) Logout() error { return nil }

func (x *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if x.cutOff() {
		return errTooManyBad
	}
	if !utf8.ValidString(from) || strings.ContainsFunc(from, unicode.IsControl) {
		// The reverse path goes into SPF checks and the Received field.
		return errBadSender
	}
	if err := x.srv.fault("mail", from, ""); err != nil {
		return err
	}
	x.Reset()
	x.from = from
	x.slot.progress()
	return nil
}

// SMTP replies to recipients (API-NOTES section 16: "Unknown recipient").
var (
	errRelayDenied = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1},
		Message: "Relaying denied: this server accepts mail only for its own domains"}
	errUnknownRcpt  = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "Unknown recipient"}
	errRetiredRcpt  = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 6}, Message: "Recipient mailbox was deleted"}
	errPendingRcpt  = &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 1}, Message: "Recipient mailbox setup is not finished; try again later"}
	errTempFailure  = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary failure; try again later"}
	errStoreFailure = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Message not stored because of a temporary failure; try again later"}
	errTooLarge     = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Message too large"}
	errEmpty        = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "Message is empty"}
	errBadSender    = &smtp.SMTPError{Code: 501, EnhancedCode: smtp.EnhancedCode{5, 1, 7}, Message: "Bad sender address syntax"}
	errTooManyBad   = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many unknown recipients; closing connection"}
	// RFC 3463 X.3.1, mail system full: the sender keeps the message and tries later.
	errSpoolFailure = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 1}, Message: "Insufficient system storage; try again later"}
	errBusy         = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 1}, Message: "Too much mail in progress; try again later"}
)

func (x *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) (err error) {
	defer func() { x.srv.cfg.Metrics.countSMTP("recipient", smtpOutcome(err, smtpDeferred)) }()
	if x.cutOff() {
		return errTooManyBad
	}
	if err := x.srv.fault("rcpt", x.from, to); err != nil {
		return err
	}
	id, err := x.srv.svc.ResolveRecipient(context.Background(), to)
	switch {
	case err == nil:
		x.rcpts = append(x.rcpts, strings.ToLower(to))
		x.inboxes = append(x.inboxes, id)
		x.slot.progress()
		return nil
	case errors.Is(err, mail.ErrNotLocal):
		return x.bad(errRelayDenied)
	case errors.Is(err, mail.ErrUnknownRecipient):
		return x.bad(errUnknownRcpt)
	case errors.Is(err, mail.ErrRecipientRetired):
		return x.bad(errRetiredRcpt)
	case errors.Is(err, mail.ErrRecipientPending):
		return errPendingRcpt
	}
	x.srv.log.Error("smtp: recipient lookup", "rcpt", to, "err", err)
	return errTempFailure
}

// bad counts refused recipients: a client guessing addresses is cut off.
func (x *smtpSession) bad(e *smtp.SMTPError) error {
	x.badRcpt++
	if x.badRcpt > smtpMaxBadRcpts {
		// Close once this reply is written; the client is not reading more answers.
		time.AfterFunc(200*time.Millisecond, func() { x.conn.Close() })
		return errTooManyBad
	}
	return e
}

// cutOff reports whether the session refused too many recipients: it is being closed,
// and until then every command gets errTooManyBad (a pipelining client's next RCPT or
// DATA is read before the close).
func (x *smtpSession) cutOff() bool { return x.badRcpt > smtpMaxBadRcpts }

func (x *smtpSession) Data(r io.Reader) (err error) {
	defer func() { x.srv.cfg.Metrics.countSMTP("message", smtpOutcome(err, smtpFailed)) }()
	if x.cutOff() {
		return errTooManyBad
	}
	for _, rc := range x.rcpts { // the answer to the message, for one of its recipients
		if err := x.srv.fault("data", x.from, rc); err != nil {
			io.Copy(io.Discard, r)
			return err
		}
	}
	ctx := context.Background()
	conn := x.conn.Conn()
	sc := slotOf(conn)
	if sc != nil {
		sc.setBusy(true, x.srv.cfg.IdleTimeout)
		defer sc.setBusy(false, 0)
	}
	sp := newSpool(x.srv.cfg.SpoolDir)
	defer sp.Close()
	_, err = sp.ReadFrom(&deadlineReader{r: r, conn: conn, idle: x.srv.cfg.IdleTimeout})
	if err == nil && sc != nil && sc.hungUp.Load() {
		// The client closed the connection before the message was whole. go-smtp ends a
		// BDAT chunk at the end of its input without counting it, so a chunk cut short
		// reads as the whole message: stored, it would be truncated, and the client's
		// retry then a duplicate of it. (A whole chunk never makes the connection read
		// past itself while the message is read: its end comes first.)
		err = smtp.ErrDataReset
	}
	if err != nil {
		return x.dataError(err)
	}
	// Only now, with the message whole on disk, does it take its share of the memory
	// budget: a sender that waits here costs the server nothing but a file.
	release, err := x.srv.cfg.Budget.Acquire(ctx, sp.Size(), x.srv.cfg.BudgetWait)
	if err != nil {
		return errBusy
	}
	defer release()
	data, err := sp.Bytes()
	if err != nil {
		x.srv.log.Error("smtp: read the spooled message", "err", err)
		return errSpoolFailure
	}
	// The sender is owed its answer even when the server starts stopping now, so the
	// commit does not follow any shutdown signal; it is bounded by the group commit.
	in := mail.Incoming{Data: data, Trace: x.trace(), Inboxes: x.inboxes, Helo: x.conn.Hostname(), MailFrom: x.from}
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		in.RemoteIP = a.IP
	}
	done := x.srv.cfg.Arrivals.begin()
	stored, err := x.srv.svc.Receive(ctx, in)
	done()
	switch {
	case err == nil:
		x.logReceived(stored, len(data))
		return nil
	case errors.Is(err, mail.ErrEmptyMessage):
		return errEmpty
	case errors.Is(err, mail.ErrRecipientRetired):
		return errRetiredRcpt // deleted while the message was on its way
	}
	x.srv.log.Error("smtp: store message", "from", x.from, "rcpts", len(x.rcpts), "err", err)
	return errStoreFailure
}

// logReceived writes the message's one line at info: ids and sizes, never its content.
func (x *smtpSession) logReceived(stored []db.Stored, size int) {
	if len(stored) == 0 {
		return
	}
	again := true // every copy was there already: the sender retried after a lost answer
	for _, st := range stored {
		again = again && st.Existed
	}
	x.srv.log.Info("smtp: received", "message", stored[0].MessageID, "bytes", size,
		"inboxes", len(stored), "remote", x.conn.Conn().RemoteAddr().String(), "duplicate", again)
}

// dataError is the reply to a message whose transfer failed.
func (x *smtpSession) dataError(err error) error {
	var se *smtp.SMTPError
	var spoolErr errSpoolWrite
	switch {
	case errors.As(err, &se) && se.Code == smtp.ErrDataTooLarge.Code:
		return errTooLarge
	case errors.Is(err, smtp.ErrTooLongLine):
		return &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 2},
			Message: fmt.Sprintf("Line longer than %d bytes", smtpMaxLineLength)}
	case errors.As(err, &spoolErr):
		x.srv.log.Error("smtp: spool the message", "err", err)
		return errSpoolFailure
	}
	return err
}

// deadlineReader reads the message, pushing the read deadline forward while bytes arrive:
// a large message on a slow link is fine, a stalled one is not.
type deadlineReader struct {
	r    io.Reader
	conn net.Conn
	idle time.Duration
	last time.Time
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if now := time.Now(); now.Sub(d.last) > time.Second {
		d.conn.SetReadDeadline(now.Add(d.idle))
		d.last = now
	}
	return n, err
}

// trace is the Received: field of RFC 5321 section 4.4.
func (x *smtpSession) trace() string {
	var id [8]byte
	rand.Read(id[:])
	proto := "ESMTP"
	if _, ok := x.conn.TLSConnectionState(); ok {
		proto = "ESMTPS"
	}
	ip := ""
	if a, ok := x.conn.Conn().RemoteAddr().(*net.TCPAddr); ok {
		ip = a.IP.String()
	}
	helo := sanitizeTrace(x.conn.Hostname())
	var b strings.Builder
	fmt.Fprintf(&b, "Received: from %s ([%s])\r\n\tby %s (inboxd) with %s id %s", helo, ip, x.srv.cfg.Hostname, proto, hex.EncodeToString(id[:]))
	if len(x.rcpts) == 1 {
		fmt.Fprintf(&b, "\r\n\tfor <%s>", sanitizeTrace(x.rcpts[0]))
	}
	fmt.Fprintf(&b, ";\r\n\t%s\r\n", time.Now().UTC().Format(time.RFC1123Z))
	return b.String()
}

func sanitizeTrace(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x21 || r == 0x7f || r == '(' || r == ')' || r == ';' {
			return -1
		}
		return r
	}, s)
}

// limitListener bounds concurrent connections, in all and per client address; one over
// a limit is told 421 and closed.
type limitListener struct {
	net.Listener
	smtp  *SMTP
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if sc := l.admit(c); sc != nil {
			return sc, nil
		}
	}
}

// admit gives c a slot, or refuses it: first when its client holds its share of the slots
// (so a client at its limit is told so, even when the server is full too), then when
// every slot is taken.
func (l *limitListener) admit(c net.Conn) *slotConn {
	s := l.smtp
	// Memory only, unless a connect rule counts its times (a write): test controls only.
	if e := s.fault("connect", "", ""); e != nil {
		refuse(c, e)
		return nil
	}
	client := connClient(c.RemoteAddr())
	if !s.takeAddr(client) {
		s.cfg.Metrics.countSMTP("connection", smtpRejectedPerIP)
		refuse(c, errTooManyFromAddr)
		return nil
	}
	select {
	case l.slots <- struct{}{}:
	default:
		s.mu.Lock()
		s.freeAddrLocked(client)
		s.mu.Unlock()
		s.cfg.Metrics.countSMTP("connection", smtpRejected)
		refuse(c, errTooManyConns)
		return nil
	}
	s.cfg.Metrics.countSMTP("connection", smtpAccepted)
	sc := newSlotConn(c, s.cfg)
	s.mu.Lock()
	s.conns[sc] = struct{}{}
	s.mu.Unlock()
	sc.release = func() {
		s.mu.Lock()
		delete(s.conns, sc)
		s.freeAddrLocked(client)
		s.mu.Unlock()
		<-l.slots
	}
	return sc
}

// slotConn is one accepted connection: it frees its slot when closed, and knows whether
// its session is inside DATA (then shutdown lets it finish).
//
// Its replies wait until the session next reads from the connection (or closes it), as
// RFC 2920 section 3.2 asks of a server offering PIPELINING: the responses to a group of
// commands go out as a unit, and every pending one as soon as the input read so far is
// used up, which is exactly when the session asks the connection for more. go-smtp
// flushes each reply on its own, so a pipelining client's MAIL, RCPT and DATA cost three
// writes and three wake-ups of the client instead of one.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()

	mu   sync.Mutex
	busy bool
	// The session's limits (smtp_slots.go): when it began and last made progress, how
	// long it may be idle and last, and who writes its replies (its session's connection,
	// set by NewSession).
	start, lastProgress time.Time
	idle, maxSession    time.Duration
	owner               *smtp.Conn

	ended  atomic.Bool // a limit ended the session: reads meet the end of the input
	hungUp atomic.Bool // the client closed its side: a read met the end of the input

	wmu sync.Mutex // guards out; writes also come from timers (closing a bad session)
	out []byte     // replies not yet written
}

func (c *slotConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	c.out = append(c.out, p...)
	c.wmu.Unlock()
	return len(p), nil
}

// flush writes the pending replies.
func (c *slotConn) flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.out) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.out)
	c.out = c.out[:0]
	return err
}

func (c *slotConn) Read(p []byte) (int, error) {
	if err := c.flush(); err != nil {
		return 0, err
	}
	if c.ended.Load() {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(p)
	if err == io.EOF {
		c.hungUp.Store(true)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = c.timedOut(err)
	}
	return n, err
}

func (c *slotConn) Close() error {
	// Send what is pending, within a second, unless a write is under way: a client that
	// does not read must not hold the closing (from a timer, or at shutdown) for the
	// minute of the write timeout. Closing ends that write.
	if c.wmu.TryLock() {
		if len(c.out) > 0 {
			c.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			c.Conn.Write(c.out)
			c.out = c.out[:0]
		}
		c.wmu.Unlock()
	}
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// setBusy marks the session inside DATA (and gives it a fresh read deadline, undoing a
// shutdown nudge that raced with the DATA command) or back to waiting for commands. Both
// are progress: a transfer starts, or ends with its answer.
func (c *slotConn) setBusy(busy bool, idle time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = busy
	c.lastProgress = time.Now()
	if busy {
		c.setReadDeadlineLocked(time.Now().Add(idle))
	}
}

func slotOf(c net.Conn) *slotConn {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, _ := c.(*slotConn)
	return sc
}

// slogPrinter adapts go-smtp's logger to slog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(format string, v ...any) {
	p.log.Debug("smtp: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func (p slogPrinter) Println(v ...any) { p.log.Debug("smtp: " + strings.TrimSpace(fmt.Sprintln(v...))) }
