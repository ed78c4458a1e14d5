package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

var keyPattern = regexp.MustCompile(`bze_[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}`)

func get(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	qt.Assert(t, err, qt.IsNil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	qt.Assert(t, err, qt.IsNil)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestServeFreshDatabase boots the whole program as a new user would: an empty database
// gets an account and one printed key that works; a restart prints no second key.
func TestServeFreshDatabase(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	var out bytes.Buffer
	m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", Stdout: &out}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	base := "http://" + m.Addr()

	status, body := get(t, base+"/healthz", "")
	c.Assert(status, qt.Equals, 200)
	c.Assert(string(body), qt.JSONEquals, map[string]string{"status": "ok", "service": "inboxd"})

	key := keyPattern.FindString(out.String())
	c.Assert(key, qt.Not(qt.Equals), "", qt.Commentf("output: %s", out.String()))
	status, body = get(t, base+"/v1/usage", key)
	c.Assert(status, qt.Equals, 200, qt.Commentf("%s", body))
	var usage map[string]any
	c.Assert(json.Unmarshal(body, &usage), qt.IsNil)
	c.Assert(usage["billing"], qt.Equals, "exempt")

	status, body = get(t, base+"/openapi.json", "")
	c.Assert(status, qt.Equals, 200)
	var doc map[string]any
	c.Assert(json.Unmarshal(body, &doc), qt.IsNil)
	c.Assert(doc["servers"], qt.DeepEquals, []any{map[string]any{"url": base}})
	c.Assert(m.Close(), qt.IsNil)

	out.Reset()
	m2 := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", Stdout: &out}
	c.Assert(m2.Run(context.Background()), qt.IsNil)
	c.Assert(keyPattern.FindString(out.String()), qt.Equals, "")
	status, _ = get(t, "http://"+m2.Addr()+"/v1/inboxes", key)
	c.Assert(status, qt.Equals, 200)
	c.Assert(m2.Close(), qt.IsNil)
}

// TestServeFailureReleases makes Run fail: early (the SMTP address is taken), before the
// database is created, so a first start prints no one-time credentials; late (a fixture
// file that is missing), after it is open. Either way what Run had acquired is released:
// the profile and HTTP listeners, the database (a second Run on it serves).
func TestServeFailureReleases(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	c.Assert(err, qt.IsNil)
	defer taken.Close()
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	var out bytes.Buffer
	m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", SMTPAddr: taken.Addr().String(), PProf: "127.0.0.1:0", Domain: "inboxd.test", Stdout: &out}
	c.Assert(m.Run(context.Background()), qt.ErrorMatches, ".*address already in use")
	c.Assert(m.closers, qt.HasLen, 0)
	c.Assert(keyPattern.FindString(out.String()), qt.Equals, "")
	_, err = os.Stat(dbPath)
	c.Assert(err, qt.ErrorIs, os.ErrNotExist)
	for _, addr := range []string{m.pprofLn.Addr().String(), m.Addr()} {
		ln, err := net.Listen("tcp", addr)
		c.Assert(err, qt.IsNil, qt.Commentf("%s still held", addr))
		ln.Close()
	}

	m = &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0", Domain: "inboxd.test",
		Seeds: []string{filepath.Join(t.TempDir(), "missing.json")}}
	c.Assert(m.Run(context.Background()), qt.ErrorMatches, ".*missing.json.*")
	c.Assert(m.closers, qt.HasLen, 0)
	for _, addr := range []string{m.Addr(), m.smtpLn.Addr().String()} {
		ln, err := net.Listen("tcp", addr)
		c.Assert(err, qt.IsNil, qt.Commentf("%s still held", addr))
		ln.Close()
	}

	m = &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0", Domain: "inboxd.test"}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	status, _ := get(t, "http://"+m.Addr()+"/healthz", "")
	c.Assert(status, qt.Equals, 200)
	c.Assert(m.Close(), qt.IsNil)
	c.Assert(m.Close(), qt.IsNil) // once: a second Close has nothing left to release

	// An empty --http would listen on every interface, at a port nobody chose.
	m = &Main{DBPath: dbPath, HTTPAddr: "", Domain: "inboxd.test"}
	c.Assert(m.Run(context.Background()), qt.ErrorMatches, "--http: name the address.*")
	// STARTTLS certificates without an SMTP listener are refused, and a DNS port is a port.
	for _, bad := range []struct {
		m    Main
		want string
	}{
		{Main{TLSCert: "c.pem", TLSKey: "k.pem"}, "--tls-cert and --tls-key are for SMTP STARTTLS: give --smtp too"},
		{Main{DNS: "127.0.0.1:99999"}, `--dns: dns server "127.0.0.1:99999": the port must be a number from 1 to 65535`},
	} {
		m := bad.m
		m.DBPath, m.HTTPAddr, m.Domain = dbPath, "127.0.0.1:0", "inboxd.test"
		c.Assert(m.Run(context.Background()), qt.ErrorMatches, regexp.QuoteMeta(bad.want))
	}
	// The base URL becomes the server of /openapi.json and the prefix of download links.
	for _, bad := range []string{"notaurl", "ftp://x.example", "https://", "https://x.example/?a=b"} {
		m = &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", BaseURL: bad}
		c.Assert(m.Run(context.Background()), qt.ErrorMatches, "--base-url .*: want the public http:// or https:// URL.*", qt.Commentf("%s", bad))
	}
}

func TestKeysCreate(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	var out bytes.Buffer
	m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", Stdout: &out}
	c.Assert(m.Run(ctx), qt.IsNil)
	c.Assert(m.Close(), qt.IsNil)

	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"keys", "create", "--db", dbPath, "--account", "default", "--scopes", "inboxes:read", "--days", "7"}, &stdout, &stderr)
	c.Assert(err, qt.IsNil, qt.Commentf("%s", stderr.String()))
	key := strings.TrimSpace(stdout.String())
	c.Assert(keyPattern.MatchString(key), qt.IsTrue, qt.Commentf("%q", key))

	err = run(ctx, []string{"keys", "create", "--db", dbPath, "--account", "default"}, &stdout, &stderr)
	c.Assert(err, qt.ErrorMatches, "keys create: give --account and exactly one of --scopes or --inbox")
	err = run(ctx, []string{"keys", "create", "--db", dbPath, "--account", "default", "--scopes", "inboxes:fly"}, &stdout, &stderr)
	c.Assert(err, qt.ErrorMatches, `.*unknown scope "inboxes:fly".*`)
	err = run(ctx, []string{"keys", "create", "--db", dbPath, "--account", "default", "--scopes", "inboxes:read", "extra"}, &stdout, &stderr)
	c.Assert(err, qt.ErrorMatches, `keys create: unexpected argument "extra"`)
	err = run(ctx, []string{"keys", "create", "--db", dbPath, "--account", "default", "--inbox", "x@inboxd.test", "--days", "5"}, &stdout, &stderr)
	c.Assert(err, qt.ErrorMatches, `keys create: --days is for account keys.*`)

	m = &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test"}
	c.Assert(m.Run(ctx), qt.IsNil)
	defer m.Close()
	status, _ := get(t, "http://"+m.Addr()+"/v1/inboxes", key)
	c.Assert(status, qt.Equals, 200)
	status, _ = get(t, "http://"+m.Addr()+"/v1/usage", key)
	c.Assert(status, qt.Equals, 200) // getUsage needs inboxes:read only
}

func TestEnvironmentConfiguresFlags(t *testing.T) {
	c := qt.New(t)
	t.Setenv("INBOXD_DOMAIN", "Mail.Example.Test")
	fs := newFlagSet("serve", io.Discard)
	domain := fs.String("domain", "inboxd.test", "")
	httpAddr := fs.String("http", "127.0.0.1:8080", "")
	c.Assert(parseWithEnv(fs, []string{"--http", "127.0.0.1:0"}), qt.IsNil)
	c.Assert(*domain, qt.Equals, "Mail.Example.Test")
	c.Assert(*httpAddr, qt.Equals, "127.0.0.1:0")
}

// A stop requested while the server starts (here before it opened the database) is not a
// failure: serve says so and exits 0.
func TestServeStoppedWhileStarting(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"serve", "--db", filepath.Join(t.TempDir(), "inboxd.db"), "--http", "127.0.0.1:0"}, &stdout, &stderr)
	c.Assert(err, qt.IsNil)
	c.Assert(stderr.String(), qt.Matches, `(?s).*inboxd: stopped while starting \(.*context canceled.*\)\n`)
}

// seed loads fixture files into a database, and a file that is not there leaves no
// database behind.
func TestSeedCommand(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "inboxd.db")
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"seed", "--db", dbPath, filepath.Join(dir, "missing.json")}, &stdout, &stderr)
	c.Assert(err, qt.ErrorMatches, "seed: .*missing.json: no such file or directory")
	_, err = os.Stat(dbPath)
	c.Assert(err, qt.ErrorIs, os.ErrNotExist)

	err = run(ctx, []string{"seed", "--db", dbPath, "--domain", "inboxd.test", "examples/fixture.json"}, &stdout, &stderr)
	c.Assert(err, qt.IsNil, qt.Commentf("%s", stderr.String()))
	c.Assert(stdout.String(), qt.Equals, "examples/fixture.json: 1 accounts, 2 inboxes, 5 messages, 3 keys\n")
}

// A chosen dashboard password shorter than server.MinOperatorPassword stops serve before
// it opens anything, whether given as a flag or in the environment, and the message does
// not echo it.
func TestServeRefusesShortAdminPassword(t *testing.T) {
	c := qt.New(t)
	// Bounded: a serve that accepted the password would run until the context ends. Not
	// tight: the refusal comes after the database opens, slow on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dbPath := filepath.Join(t.TempDir(), "inboxd.db")
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"serve", "--db", dbPath, "--http", "127.0.0.1:0", "--admin-password", "hunter2"}, &stdout, &stderr)
	c.Assert(err, qt.ErrorMatches, `--admin-password \(or INBOXD_ADMIN_PASSWORD\): 7 characters; use at least 12, or none to have one generated`)
	var ue usageError
	c.Assert(errors.As(err, &ue), qt.IsTrue)

	t.Setenv("INBOXD_ADMIN_PASSWORD", "ünïcödé-pw") // ten characters, fourteen bytes
	err = run(ctx, []string{"serve", "--db", dbPath, "--http", "127.0.0.1:0"}, &stdout, &stderr)
	c.Assert(err, qt.ErrorMatches, `.*: 10 characters; use at least 12.*`)
	_, statErr := os.Stat(dbPath)
	c.Assert(os.IsNotExist(statErr), qt.IsTrue, qt.Commentf("serve created the database before refusing"))

	// A program that runs Main itself gets the same rule from the dashboard's login setup.
	m := &Main{DBPath: dbPath, HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", AdminPassword: "hunter2"}
	if err = m.Run(ctx); err == nil {
		m.Close()
	}
	c.Assert(err, qt.ErrorMatches, `.*operator password: 7 characters; use at least 12.*`)
}
