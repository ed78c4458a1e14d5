package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// The flags of trusted proxies are checked before anything opens, whether given on the
// command line or in the environment.
func TestServeLimitFlags(t *testing.T) {
	c := qt.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // a serve that started would run until then
	defer cancel()
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	var stdout, stderr bytes.Buffer
	serve := func(args ...string) error {
		return run(ctx, append([]string{"serve", "--db", dbPath, "--http", "127.0.0.1:0"}, args...), &stdout, &stderr)
	}
	var ue usageError
	err := serve("--trusted-proxy", "10.0.0.0/8,proxy.example")
	c.Assert(err, qt.ErrorMatches, `--trusted-proxy: "proxy.example" is neither an IP address nor a CIDR prefix such as 10.0.0.0/8`)
	c.Assert(errors.As(err, &ue), qt.IsTrue)

	t.Setenv("INBOXD_TRUSTED_PROXY", "127.0.0.1, 10.0.0.300")
	c.Assert(serve(), qt.ErrorMatches, `--trusted-proxy: "10.0.0.300" is neither.*`)
	_, statErr := os.Stat(dbPath)
	c.Assert(os.IsNotExist(statErr), qt.IsTrue)
}
