package webhook

import (
	"net/http"
	"net/url"
	"testing"

	qt "github.com/frankban/quicktest"
)

// The proxy of an endpoint is the one the environment names for its scheme and host,
// looked up once for all its attempts.
func TestProxyIsLookedUpOncePerEndpoint(t *testing.T) {
	c := qt.New(t)
	via, _ := url.Parse("http://proxy.test:3128")
	var lookups int
	pc := &proxyCache{lookup: func(r *http.Request) (*url.URL, error) {
		lookups++
		if r.URL.Hostname() == "far.test" {
			return via, nil
		}
		return nil, nil
	}}
	ask := func(raw string) *url.URL {
		r, err := http.NewRequest(http.MethodPost, raw, nil)
		c.Assert(err, qt.IsNil)
		p, err := pc.proxy(r)
		c.Assert(err, qt.IsNil)
		return p
	}
	for range 3 {
		c.Check(ask("https://far.test/hook"), qt.Equals, via)
		c.Check(ask("http://127.0.0.1:8080/hook"), qt.IsNil)
	}
	c.Check(ask("https://far.test:8443/hook"), qt.Equals, via) // another endpoint
	c.Check(lookups, qt.Equals, 3)
}
