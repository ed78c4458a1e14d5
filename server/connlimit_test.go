package server_test

import (
	"testing"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/server"
)

// The HTTP connection cap leaves half the open-file limit to everything else; a cap that
// does not is lowered (and the server says so in its log).
func TestFitHTTPMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		want    int
		nofile  uint64
		got     int
		lowered bool
	}{
		{1000, 1 << 20, 1000, false},
		{1000, 2000, 1000, false},
		{1000, 1024, 512, true}, // a soft limit of 1,024 that Go could not raise
		{5000, 4096, 2048, true},
		{1000, 0, 1000, false}, // unknown
		{1000, 1, 1, true},
	} {
		got, lowered := server.FitHTTPMaxConnections(tc.want, tc.nofile)
		qt.Assert(t, []any{got, lowered}, qt.DeepEquals, []any{tc.got, tc.lowered}, qt.Commentf("%+v", tc))
	}
}
