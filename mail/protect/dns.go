package protect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resolver is the DNS the authentication checks ask. *net.Resolver satisfies it; tests
// pass a fake.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

// SystemResolver is the resolver of /etc/resolv.conf, in pure Go so that its timeouts are
// ours.
func SystemResolver() Resolver { return &net.Resolver{PreferGo: true} }

// ServerResolver asks the DNS server at addr (HOST:PORT) and nothing else: the --dns flag.
func ServerResolver(addr string) (Resolver, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("dns server %q: want HOST:PORT", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("dns server %q: the port must be a number from 1 to 65535", addr)
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}, nil
}

// Limits of one scan's DNS work. Every query has its own short timeout, and one scan makes
// a bounded number of them, so a slow or hostile DNS can delay a message by seconds, not
// stall it.
const (
	defaultQueryTimeout = 3 * time.Second
	maxQueriesPerScan   = 60
	maxTXTBytes         = 16 << 10 // larger answers are treated as broken
)

// errBudget is returned once a scan has used up its queries.
var errBudget = errors.New("dns query budget of this message used up")

// guard wraps a Resolver for one scan: a timeout per query, a budget of queries, a cache
// (DKIM signatures of one domain share a key record), and errors normalised so that
// anything other than "no such name" counts as temporary. The SPF, DKIM and DMARC
// libraries treat a non-temporary error as a permanent failure of the record, but a DNS
// server that times out or answers garbage says nothing about the sender.
type guard struct {
	r       Resolver
	timeout time.Duration

	mu      sync.Mutex
	queries int
	cache   map[string]any

	shared *dnsCache // answers kept across messages; nil keeps none
}

func newGuard(r Resolver, timeout time.Duration) *guard {
	if timeout <= 0 {
		timeout = defaultQueryTimeout
	}
	return &guard{r: r, timeout: timeout, cache: map[string]any{}}
}

type cached[T any] struct {
	v   T
	err error
}

// do runs one query through the cache, budget and timeout.
func do[T any](ctx context.Context, g *guard, kind, name string, q func(ctx context.Context) (T, error)) (T, error) {
	key := kind + "\x00" + strings.ToLower(name)
	g.mu.Lock()
	if c, ok := g.cache[key]; ok {
		g.mu.Unlock()
		c := c.(cached[T])
		return c.v, c.err
	}
	if g.queries >= maxQueriesPerScan {
		g.mu.Unlock()
		var zero T
		return zero, temporary(name, errBudget)
	}
	g.queries++
	g.mu.Unlock()

	if c, ok := g.shared.get(key); ok {
		c := c.(cached[T])
		g.mu.Lock()
		g.cache[key] = c
		g.mu.Unlock()
		return c.v, c.err
	}
	qctx, cancel := context.WithTimeout(ctx, g.timeout)
	v, err := q(qctx)
	cancel()
	err = normalise(name, err)
	g.mu.Lock()
	g.cache[key] = cached[T]{v, err}
	g.mu.Unlock()
	var de *net.DNSError
	if err == nil || (errors.As(err, &de) && de.IsNotFound) {
		g.shared.put(key, cached[T]{v, err}) // temporary failures are asked again
	}
	return v, err
}

// DefaultDNSCacheTTL is how long an answer (or a "no such name") is reused across messages.
// The SPF and DMARC records of a domain that sends a burst of mail are looked up once per
// burst instead of once per message; a changed record is seen within this time.
const DefaultDNSCacheTTL = 30 * time.Second

// dnsCacheMax bounds the cache; past it, it starts over.
const dnsCacheMax = 4096

// dnsCache keeps DNS answers for a short, fixed time, shared by the scans of one Scanner.
type dnsCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]dnsEntry
}

type dnsEntry struct {
	v     any
	until time.Time
}

func newDNSCache(ttl time.Duration) *dnsCache {
	if ttl < 0 {
		return nil
	}
	if ttl == 0 {
		ttl = DefaultDNSCacheTTL
	}
	return &dnsCache{ttl: ttl, m: map[string]dnsEntry{}}
}

func (c *dnsCache) get(key string) (any, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || time.Now().After(e.until) {
		return nil, false
	}
	return e.v, true
}

func (c *dnsCache) put(key string, v any) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= dnsCacheMax {
		clear(c.m)
	}
	c.m[key] = dnsEntry{v: v, until: time.Now().Add(c.ttl)}
}

func temporary(name string, err error) error {
	return &net.DNSError{Err: err.Error(), Name: name, IsTemporary: true, IsTimeout: errors.Is(err, context.DeadlineExceeded)}
}

// normalise keeps "not found" (the name or the record type does not exist) and turns every
// other failure into a temporary DNS error.
func normalise(name string, err error) error {
	if err == nil {
		return nil
	}
	var de *net.DNSError
	if errors.As(err, &de) && de.IsNotFound {
		return &net.DNSError{Err: de.Err, Name: name, IsNotFound: true}
	}
	return temporary(name, err)
}

func (g *guard) LookupTXT(ctx context.Context, name string) ([]string, error) {
	return do(ctx, g, "txt", name, func(ctx context.Context) ([]string, error) {
		txts, err := g.r.LookupTXT(ctx, name)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, t := range txts {
			n += len(t)
		}
		if n > maxTXTBytes {
			return nil, fmt.Errorf("TXT answer of %d bytes is too large", n)
		}
		return txts, nil
	})
}

func (g *guard) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	return do(ctx, g, "mx", name, func(ctx context.Context) ([]*net.MX, error) { return g.r.LookupMX(ctx, name) })
}

func (g *guard) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	return do(ctx, g, "ip", host, func(ctx context.Context) ([]net.IPAddr, error) { return g.r.LookupIPAddr(ctx, host) })
}

func (g *guard) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	return do(ctx, g, "ptr", addr, func(ctx context.Context) ([]string, error) { return g.r.LookupAddr(ctx, addr) })
}

// txtFunc adapts LookupTXT to the context-free callback of go-msgauth.
func (g *guard) txtFunc(ctx context.Context) func(string) ([]string, error) {
	return func(name string) ([]string, error) { return g.LookupTXT(ctx, name) }
}
