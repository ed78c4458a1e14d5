package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	qt "github.com/frankban/quicktest"
)

// TestSMTPSlotLimits: the per-address limit set on Main reaches the listener, refusals
// show in /metrics, and limits that would refuse every client or end every session at
// once are usage errors, from the command line or the environment.
func TestSMTPSlotLimits(t *testing.T) {
	c := qt.New(t)
	m := &Main{DBPath: filepath.Join(t.TempDir(), "inboxd.db"), HTTPAddr: "127.0.0.1:0", SMTPAddr: "127.0.0.1:0",
		Domain: "inboxd.test", Stdout: io.Discard, SMTPMaxPerIP: 1}
	c.Assert(m.Run(context.Background()), qt.IsNil)
	defer m.Close()
	held, err := net.Dial("tcp", m.SMTPAddrListening())
	c.Assert(err, qt.IsNil)
	defer held.Close()
	line, err := bufio.NewReader(held).ReadString('\n')
	c.Assert(err, qt.IsNil)
	c.Assert(line, qt.Matches, "220 .*\r\n")
	refused, err := net.Dial("tcp", m.SMTPAddrListening())
	c.Assert(err, qt.IsNil)
	defer refused.Close()
	line, err = bufio.NewReader(refused).ReadString('\n')
	c.Assert(err, qt.IsNil)
	c.Assert(line, qt.Equals, "421 4.7.0 Too many connections from your address; try again later\r\n")
	status, body := get(t, "http://"+m.Addr()+"/metrics", "")
	c.Assert(status, qt.Equals, 200)
	c.Assert(strings.Split(string(body), "\n"), qt.Contains, `inboxd_smtp_connections_total{result="rejected_per_ip"} 1`)

	for _, bad := range []struct{ flag, env, want string }{
		{"--smtp-max-per-ip=0", "", "--smtp-max-per-ip 0: use at least 1"},
		{"", "INBOXD_SMTP_MAX_PER_IP=-3", "--smtp-max-per-ip -3: use at least 1"},
		{"--smtp-max-session=0s", "", "--smtp-max-session 0s: use a positive duration, such as 10m"},
		{"", "INBOXD_SMTP_MAX_SESSION=-1m", "--smtp-max-session -1m0s: use a positive duration, such as 10m"},
	} {
		t.Run(bad.flag+bad.env, func(t *testing.T) {
			args := []string{"--db", filepath.Join(t.TempDir(), "inboxd.db"), "--http", "127.0.0.1:0"}
			if bad.flag != "" {
				args = append(args, bad.flag)
			}
			if name, value, ok := strings.Cut(bad.env, "="); ok {
				t.Setenv(name, value) // until the end of this case
			}
			err := runServe(context.Background(), args, io.Discard, io.Discard, runtimeTuning{})
			qt.Assert(t, err, qt.ErrorMatches, bad.want)
			qt.Assert(t, err, qt.ErrorAs, new(usageError))
		})
	}
}
