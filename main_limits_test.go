package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// keepAlive is a client that made one request on its connection and keeps it open, idle.
func keepAlive(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second)) // far below the idle timeout (120 s)
	_, err = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: inboxd\r\n\r\n")
	qt.Assert(t, err, qt.IsNil)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	qt.Assert(t, err, qt.IsNil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	qt.Assert(t, res.StatusCode, qt.Equals, http.StatusOK)
	return conn
}

// closedByServer counts the connections the server has closed: each reads EOF within a
// few seconds. (They are read at once: a read past its deadline fails without looking.)
func closedByServer(conns []net.Conn) int {
	var n atomic.Int32
	var wg sync.WaitGroup
	for _, conn := range conns {
		wg.Go(func() {
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := conn.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return int(n.Load())
}

// At the HTTP connection cap, idle keep-alive connections make room for new clients (the
// longest idle first), and when every connection is busy new clients wait until one ends,
// then are served at once. More connections than the cap are never open. (Before, there was
// no cap: 20,000 idle connections used up the file descriptors.)
func TestHTTPConnectionCap(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	const limit = 4
	m := &Main{DBPath: filepath.Join(t.TempDir(), "inboxd.db"), HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", HTTPMaxConnections: limit}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	defer m.Close()
	base := "http://" + m.Addr()

	// Twice the cap of clients keeping their connections, and one more: each is served,
	// and the server closed idle ones to make room (which ones depends on when each
	// went idle, as the server saw it).
	var idle []net.Conn
	for range 2 * limit {
		idle = append(idle, keepAlive(t, m.Addr()))
	}
	status, _ := get(t, base+"/healthz", "")
	c.Assert(status, qt.Equals, http.StatusOK)
	c.Assert(closedByServer(idle) >= limit, qt.IsTrue)

	// Clients that connect and send nothing are not idle: with every slot theirs, a new
	// client waits (in the kernel's backlog) ...
	var silent []net.Conn
	for range limit {
		conn, err := net.Dial("tcp", m.Addr())
		c.Assert(err, qt.IsNil)
		defer conn.Close()
		silent = append(silent, conn)
	}
	answered := make(chan int, 1)
	go func() {
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 15 * time.Second}
		res, err := client.Get(base + "/healthz")
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	select {
	case s := <-answered:
		c.Fatalf("answered %d while every slot was busy", s)
	case <-time.After(300 * time.Millisecond):
	}
	// ... and is served as soon as one of them goes, well before the server's own
	// header timeout (10 s) would have closed them.
	silent[0].Close()
	select {
	case s := <-answered:
		c.Assert(s, qt.Equals, http.StatusOK)
	case <-time.After(5 * time.Second):
		c.Fatal("not served after a slot freed")
	}
	for _, conn := range silent {
		conn.Close()
	}
	c.Assert(metric(t, base, "inboxd_http_connections_limit"), qt.Equals, float64(limit))
	c.Assert(metric(t, base, "inboxd_http_connections_peak") <= limit, qt.IsTrue)
	c.Assert(metric(t, base, "inboxd_http_connections_idle_closed_total") >= limit, qt.IsTrue)
	c.Assert(metric(t, base, "inboxd_http_connection_waits_total") >= 1, qt.IsTrue)
}

// Many keep-alive clients at once, eight times the cap: every request is answered (a
// client whose idle connection was closed to make room opens another), and no more
// connections than the cap are ever open.
func TestHTTPConnectionCapUnderLoad(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	const limit, clients = 8, 64
	m := &Main{DBPath: filepath.Join(t.TempDir(), "inboxd.db"), HTTPAddr: "127.0.0.1:0", Domain: "inboxd.test", HTTPMaxConnections: limit}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	defer m.Close()
	base := "http://" + m.Addr()
	failed := make(chan error, clients*5)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
			defer client.CloseIdleConnections()
			for range 5 {
				res, err := client.Get(base + "/healthz")
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						err = errors.New(res.Status)
					}
				}
				if err != nil {
					failed <- err
				}
			}
		})
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		c.Error(err)
	}
	c.Assert(metric(t, base, "inboxd_http_connections_peak") <= limit, qt.IsTrue)
}

// The flags of the HTTP cap and of trusted proxies are checked before anything opens,
// whether given on the command line or in the environment.
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
	err = serve("--http-max-connections", "-1")
	c.Assert(err, qt.ErrorMatches, `--http-max-connections -1: give a number of connections, at least 1`)
	c.Assert(errors.As(err, &ue), qt.IsTrue)

	t.Setenv("INBOXD_TRUSTED_PROXY", "127.0.0.1, 10.0.0.300")
	c.Assert(serve(), qt.ErrorMatches, `--trusted-proxy: "10.0.0.300" is neither.*`)
	t.Setenv("INBOXD_TRUSTED_PROXY", "")
	t.Setenv("INBOXD_HTTP_MAX_CONNECTIONS", "many")
	c.Assert(serve(), qt.ErrorMatches, `INBOXD_HTTP_MAX_CONNECTIONS: parse error`)
	_, statErr := os.Stat(dbPath)
	c.Assert(os.IsNotExist(statErr), qt.IsTrue)
}
