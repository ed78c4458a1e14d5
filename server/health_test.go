package server_test

import (
	"testing"

	qt "github.com/frankban/quicktest"
)

// /healthz answers GET with its JSON and HEAD with the status alone.
func TestHealthzAnswersGETAndHEAD(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/healthz", "", nil)
	qt.Assert(t, r.status, qt.Equals, 200)
	qt.Assert(t, r.json(t)["status"], qt.Equals, "ok")
	h := e.do("HEAD", "/healthz", "", nil)
	qt.Assert(t, h.status, qt.Equals, 200)
	qt.Assert(t, h.body, qt.HasLen, 0)
}
