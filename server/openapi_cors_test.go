package server_test

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

// A browser page on any origin can load /openapi.json (a viewer given its URL), while the
// API and the other public endpoints stay closed to cross-origin reads.
func TestOpenAPIDocumentIsReadableFromAnyOrigin(t *testing.T) {
	e := newEnv(t)
	for _, method := range []string{"GET", "HEAD"} {
		r := e.do(method, "/openapi.json", "", nil, "Origin", "https://viewer.example")
		qt.Assert(t, r.status, qt.Equals, 200)
		qt.Assert(t, r.header.Get("Access-Control-Allow-Origin"), qt.Equals, "*")
	}
	for _, path := range []string{"/healthz", "/metrics", "/v1/inboxes"} {
		r := e.do("GET", path, e.full, nil, "Origin", "https://viewer.example")
		qt.Assert(t, r.header.Get("Access-Control-Allow-Origin"), qt.Equals, "", qt.Commentf("%s", path))
	}
}
