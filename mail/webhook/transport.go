package webhook

import (
	"net/http"
	"net/url"
	"sync"
)

// newTransport is the worker's own transport: net/http's default one, fitted to what a
// delivery is. Every webhook is posted to again and again, so its connections are kept,
// as many as it may have attempts in flight; an answer's body is read and dropped, so no
// compression is asked for (the transport would otherwise offer gzip and wrap every
// answer in a decompressor); and the proxy the environment names for an endpoint is
// looked up once per endpoint, not per attempt (proxyCache).
func newTransport(perWebhook int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = perWebhook
	t.DisableCompression = true
	t.Proxy = (&proxyCache{lookup: http.ProxyFromEnvironment}).proxy
	return t
}

// proxyCacheMax bounds the endpoints kept; past it the cache starts over.
const proxyCacheMax = 4096

// proxyCache remembers which proxy, if any, the environment names for each scheme and
// host: ProxyFromEnvironment reads the environment once, but matches every request's host
// against NO_PROXY and parses the proxy's URL again each time.
type proxyCache struct {
	lookup func(*http.Request) (*url.URL, error)

	mu     sync.Mutex
	byHost map[string]*url.URL
}

func (c *proxyCache) proxy(r *http.Request) (*url.URL, error) {
	key := r.URL.Scheme + "://" + r.URL.Host
	c.mu.Lock()
	p, ok := c.byHost[key]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := c.lookup(r)
	if err != nil {
		return nil, err // not kept: the next attempt fails the same way, with the reason
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byHost == nil || len(c.byHost) >= proxyCacheMax {
		c.byHost = map[string]*url.URL{}
	}
	c.byHost[key] = p
	return p, nil
}
