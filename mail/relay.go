package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Relay delivers mail through the operator's SMTP relay (a smarthost such as Postfix, or
// a provider's submission server), configured by a URL:
//
//	smtp://[user:pass@]host[:port][?tls=...]   STARTTLS (port 587 with credentials, else 25)
//	smtps://[user:pass@]host[:port][?tls=...]  TLS from the first byte (port 465)
//
// tls=insecure skips certificate verification (a relay with a self-signed certificate);
// tls=none never starts TLS (smtp:// only, and refused with credentials unless the relay is
// on a loopback address). Without tls=none, smtp:// requires STARTTLS except towards a
// loopback relay, where it is used when offered. Credentials (URL-encoded) are sent with
// AUTH PLAIN, or LOGIN when the relay offers only that, and only over TLS or loopback.
type Relay struct {
	Addr      string // host:port
	Implicit  bool   // smtps://
	StartTLS  string // "require", "optional" or "none"
	TLSConfig *tls.Config
	Username  string
	Password  string
	// HelloName is the name given in EHLO (the server's domain).
	HelloName string
	// Timeouts: connecting, each command's answer, writing the message, and the answer
	// after the end of the data (RFC 5321 suggests 10 minutes; relays answer in seconds).
	DialTimeout, CommandTimeout, DataTimeout, FinalTimeout time.Duration

	mu   sync.Mutex
	idle []*relayConn
}

type relayConn struct {
	c    *smtp.Client
	conn net.Conn
	used time.Time
}

// relayIdle is how long an idle connection to the relay is kept for the next message.
const relayIdle = 20 * time.Second

// ParseRelay reads a relay URL (see Relay).
func ParseRelay(raw, helloName string) (*Relay, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, relayURLError(raw, err)
	}
	r := &Relay{HelloName: helloName, DialTimeout: 30 * time.Second, CommandTimeout: time.Minute,
		DataTimeout: 5 * time.Minute, FinalTimeout: 5 * time.Minute}
	host, port := u.Hostname(), u.Port()
	if host == "" || u.Path != "" && u.Path != "/" || u.Opaque != "" {
		return nil, fmt.Errorf("relay: want smtp://[user:pass@]host[:port] or smtps://..., not %q", redactURL(u))
	}
	if u.User != nil {
		r.Username = u.User.Username()
		r.Password, _ = u.User.Password()
	}
	switch u.Scheme {
	case "smtp":
		if port == "" {
			port = "25"
			if r.Username != "" {
				port = "587"
			}
		}
	case "smtps":
		r.Implicit = true
		if port == "" {
			port = "465"
		}
	default:
		return nil, fmt.Errorf("relay: scheme must be smtp or smtps, not %q", u.Scheme)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("relay: bad port %q", port)
	}
	r.Addr = net.JoinHostPort(host, port)
	r.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	loopback := isLoopback(host)
	r.StartTLS = "require"
	if loopback {
		r.StartTLS = "optional"
	}
	for k, v := range u.Query() {
		switch {
		case k == "tls" && len(v) == 1 && v[0] == "insecure":
			r.TLSConfig.InsecureSkipVerify = true
		case k == "tls" && len(v) == 1 && v[0] == "none" && !r.Implicit:
			r.StartTLS = "none"
		default:
			return nil, fmt.Errorf("relay: unknown option %s=%s (known: tls=insecure, tls=none)", k, strings.Join(v, ","))
		}
	}
	if r.StartTLS == "none" && r.Username != "" && !loopback {
		return nil, errors.New("relay: tls=none with credentials would send the password in clear text; use STARTTLS or smtps://")
	}
	return r, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// relayURLError describes a relay URL that does not parse without its password: the
// parser's error repeats the whole URL, and a bad escape the bytes around it.
func relayURLError(raw string, err error) error {
	detail := ""
	var ue *url.Error
	var esc url.EscapeError
	if errors.As(err, &ue) && !errors.As(ue.Err, &esc) {
		detail = ": " + ue.Err.Error()
	}
	shown := raw
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		authority := rest
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			authority = rest[:j]
		}
		if at := strings.LastIndex(authority, "@"); at >= 0 {
			user, _, hasPass := strings.Cut(authority[:at], ":")
			if hasPass {
				user += ":xxxxx"
			}
			shown = raw[:i+3] + user + rest[at:]
		}
	}
	return fmt.Errorf("relay: %q is not a valid URL%s", shown, detail)
}

func redactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		c.User = url.User(c.User.Username())
	}
	return c.String()
}

// String describes the relay without its password.
func (r *Relay) String() string {
	scheme := "smtp"
	if r.Implicit {
		scheme = "smtps"
	}
	s := scheme + "://"
	if r.Username != "" {
		s += url.User(r.Username).String() + ":***@"
	}
	return s + r.Addr
}

// Provider implements Transport.
func (r *Relay) Provider() string { return ProviderRelay }

// Deliver implements Transport.
func (r *Relay) Deliver(ctx context.Context, env Envelope, raw []byte, handoff func() error) Result {
	for try := 0; ; try++ {
		rc, reused, err := r.take(ctx)
		if err != nil {
			return transportError(err, "cannot reach the relay")
		}
		res, handed, keep := r.send(ctx, rc, env, raw, handoff)
		if keep {
			r.put(rc)
		} else {
			rc.c.Close()
		}
		// A kept-alive connection the relay has closed meanwhile fails at the first
		// command: try once more on a fresh one, which is safe before the handoff. The
		// other idle connections are older, so the relay has most likely closed them too
		// (its idle timeout, or a restart): they go, and the retry dials.
		if reused && !handed && res.Outcome == Deferred && res.Code == "" && try == 0 && ctx.Err() == nil {
			r.dropIdle()
			continue
		}
		return res
	}
}

// Close says goodbye on the idle connections.
func (r *Relay) Close() error {
	for _, rc := range r.takeIdle() {
		rc.conn.SetDeadline(time.Now().Add(5 * time.Second))
		rc.c.Quit()
		rc.c.Close()
	}
	return nil
}

func (r *Relay) take(ctx context.Context) (*relayConn, bool, error) {
	r.mu.Lock()
	for len(r.idle) > 0 {
		rc := r.idle[len(r.idle)-1]
		r.idle = r.idle[:len(r.idle)-1]
		if time.Since(rc.used) < relayIdle {
			r.mu.Unlock()
			return rc, true, nil
		}
		go rc.c.Close()
	}
	r.mu.Unlock()
	rc, err := r.dial(ctx)
	return rc, false, err
}

// dropIdle closes every idle connection.
func (r *Relay) dropIdle() {
	for _, rc := range r.takeIdle() {
		rc.c.Close()
	}
}

// takeIdle empties the pool of idle connections and returns what it held.
func (r *Relay) takeIdle() []*relayConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	idle := r.idle
	r.idle = nil
	return idle
}

func (r *Relay) put(rc *relayConn) {
	rc.used = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.idle) >= 16 {
		go rc.c.Close()
		return
	}
	r.idle = append(r.idle, rc)
}

func (r *Relay) dial(ctx context.Context) (*relayConn, error) {
	rc, err := r.connect(ctx, r.StartTLS != "none" && !r.Implicit)
	if err != nil && r.StartTLS == "optional" && strings.Contains(err.Error(), "support STARTTLS") {
		rc, err = r.connect(ctx, false) // a loopback relay without TLS
	}
	return rc, err
}

func (r *Relay) connect(ctx context.Context, startTLS bool) (*relayConn, error) {
	dctx, cancel := context.WithTimeout(ctx, r.DialTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if r.Implicit {
		d := tls.Dialer{Config: r.TLSConfig}
		conn, err = d.DialContext(dctx, "tcp", r.Addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(dctx, "tcp", r.Addr)
	}
	if err != nil {
		return nil, err
	}
	stop := onDone(dctx, func() { conn.Close() })
	defer stop()
	var c *smtp.Client
	if startTLS {
		c, err = smtp.NewClientStartTLS(conn, r.TLSConfig)
		if err != nil {
			conn.Close()
			if r.StartTLS == "require" && strings.Contains(err.Error(), "support STARTTLS") {
				err = errors.New("the relay does not offer STARTTLS (add ?tls=none to the relay URL to send without TLS)")
			}
			return nil, err
		}
	} else {
		c = smtp.NewClient(conn)
	}
	c.CommandTimeout = r.CommandTimeout
	c.SubmissionTimeout = r.FinalTimeout
	if err := r.hello(c, startTLS || r.Implicit); err != nil {
		c.Close()
		return nil, err
	}
	return &relayConn{c: c, conn: conn}, nil
}

// hello greets and authenticates.
func (r *Relay) hello(c *smtp.Client, secure bool) error {
	name := r.HelloName
	if name == "" {
		name = "localhost"
	}
	if err := c.Hello(name); err != nil {
		return err
	}
	if r.Username == "" {
		return nil
	}
	host, _, _ := net.SplitHostPort(r.Addr)
	if !secure && !isLoopback(host) {
		return errors.New("refusing to send credentials to the relay without TLS")
	}
	ok, mechs := c.Extension("AUTH")
	if !ok {
		return errors.New("the relay does not offer AUTH but credentials are configured")
	}
	if strings.Contains(" "+strings.ToUpper(mechs)+" ", " PLAIN ") || !strings.Contains(strings.ToUpper(mechs), "LOGIN") {
		return c.Auth(sasl.NewPlainClient("", r.Username, r.Password))
	}
	return c.Auth(sasl.NewLoginClient(r.Username, r.Password))
}

// send runs one mail transaction. It reports whether the handoff happened and whether the
// connection can carry the next message.
func (r *Relay) send(ctx context.Context, rc *relayConn, env Envelope, raw []byte, handoff func() error) (res Result, handed, keep bool) {
	c := rc.c
	// Before the handoff, a stopping server may simply hang up: the relay drops an
	// unfinished transaction. After it, the answer is worth a short wait (finalGrace).
	var mu sync.Mutex
	afterHandoff := false
	stop := onDone(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if afterHandoff {
			rc.conn.SetDeadline(time.Now().Add(finalGrace))
		} else {
			rc.conn.Close()
		}
	})
	defer stop()

	size := int64(len(raw))
	if !endsWithCRLF(raw) {
		size += 2 // the line end written before the dot
	}
	opts := &smtp.MailOptions{Size: size}
	if !isASCII(env.From) || !isASCII(env.To) {
		if ok, _ := c.Extension("SMTPUTF8"); !ok {
			return Result{Outcome: Bounced, Code: "553", Enhanced: "5.6.7",
				Reason: "the relay does not support SMTPUTF8, which this non-ASCII address needs"}, false, true
		}
		opts.UTF8 = true
	}
	if err := c.Mail(env.From, opts); err != nil {
		return transportError(err, "MAIL FROM"), false, reusable(err, c)
	}
	if err := c.Rcpt(env.To, nil); err != nil {
		return transportError(err, "RCPT TO"), false, reusable(err, c)
	}
	w, err := c.Data()
	if err != nil {
		return transportError(err, "DATA"), false, reusable(err, c)
	}
	rc.conn.SetWriteDeadline(time.Now().Add(r.DataTimeout))
	if _, err := w.Write(raw); err != nil {
		return transportError(err, "sending the message"), false, false
	}
	if !endsWithCRLF(raw) {
		if _, err := w.Write([]byte("\r\n")); err != nil {
			return transportError(err, "sending the message"), false, false
		}
	}
	if err := handoff(); err != nil {
		// Never finish a transaction we cannot record: hang up before the dot.
		return Result{Outcome: Abandoned, Reason: err.Error()}, false, false
	}
	mu.Lock()
	afterHandoff = true
	if ctx.Err() != nil {
		rc.conn.SetDeadline(time.Now().Add(finalGrace))
	}
	mu.Unlock()
	resp, err := w.CloseWithResponse()
	if err == nil {
		text := ""
		if resp != nil {
			text = resp.StatusText
		}
		return Result{Outcome: Delivered, Code: "250", Enhanced: "2.0.0", Reason: text}, true, ctx.Err() == nil
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return transportError(err, "end of data"), true, se.Code != 421 && ctx.Err() == nil
	}
	if errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		// The relay closed the connection without a word of an answer. One that took the
		// message answers 250 before it closes, and that answer would have arrived first:
		// it did not take it (it failed, or hung up before the end of data), so it is sent
		// again, like the transactions that failed before the dot.
		return Result{Outcome: Deferred, Reason: "the relay closed the connection without answering the end of data"}, true, false
	}
	// The relay may hold the whole message; its answer is lost.
	return Result{Outcome: Uncertain, Reason: "no answer after the end of data: " + err.Error()}, true, false
}

// finalGrace is how long a stopping server still waits for the relay's answer to a message
// it handed off.
const finalGrace = 10 * time.Second

// transportError classifies a failure before or at the end of a transaction: a 5xx answer
// is permanent, a 4xx answer or a broken connection temporary.
func transportError(err error, step string) Result {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		res := Result{Code: strconv.Itoa(se.Code), Reason: se.Message}
		if se.EnhancedCode != smtp.EnhancedCodeNotSet && se.EnhancedCode != smtp.NoEnhancedCode {
			res.Enhanced = fmt.Sprintf("%d.%d.%d", se.EnhancedCode[0], se.EnhancedCode[1], se.EnhancedCode[2])
		}
		if se.Code >= 500 {
			res.Outcome = Bounced
		} else {
			res.Outcome = Deferred
		}
		return res
	}
	return Result{Outcome: Deferred, Reason: step + ": " + err.Error()}
}

// reusable reports whether the connection is still in a known state after err: the relay
// answered, so a RSET puts it back to the start.
func reusable(err error, c *smtp.Client) bool {
	var se *smtp.SMTPError
	if !errors.As(err, &se) || se.Code == 421 {
		return false
	}
	return c.Reset() == nil
}

// onDone runs f if ctx ends before stop is called; once stop returns, f has either run to
// completion or will never run.
func onDone(ctx context.Context, f func()) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			f()
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func endsWithCRLF(b []byte) bool {
	return len(b) >= 2 && b[len(b)-2] == '\r' && b[len(b)-1] == '\n'
}
