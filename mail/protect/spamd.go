package protect

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/inboxd/inboxd/db"
)

// spamd is a client of SpamAssassin's spamd (the SPAMD protocol of spamc): one REPORT
// request per message over a fresh TCP connection.
type spamd struct {
	addr    string
	timeout time.Duration
}

// spamdResult is what spamd said of one message.
type spamdResult struct {
	spam     bool    // spamd's own verdict, at its own required score
	score    float64 // the score
	required float64
	rules    []db.SpamRule
}

// maxSpamdReply bounds what we read back: a report is a few kilobytes.
const maxSpamdReply = 1 << 20

var (
	spamHeaderRE = regexp.MustCompile(`^(?i)spam:\s*(true|false|yes|no)\s*;\s*(-?[0-9.]+)\s*/\s*(-?[0-9.]+)`)
	reportLineRE = regexp.MustCompile(`^\s*(-?[0-9]+(?:\.[0-9]+)?)\s+([A-Z0-9_]+)\s*(.*)$`)
)

// check sends raw to spamd and parses its report. Any failure to talk to spamd (refused,
// timed out, not a SPAMD answer, an EX_ error code) is an error: the caller fails closed.
func (c *spamd) check(ctx context.Context, raw []byte) (*spamdResult, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "REPORT SPAMC/1.5\r\nContent-length: %d\r\n\r\n", len(raw))
	w.Write(raw)
	if err := w.Flush(); err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	r := bufio.NewReader(io.LimitReader(conn, maxSpamdReply))
	status, err := r.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("spamd: reading the status line: %w", err)
	}
	parts := strings.Fields(status)
	if len(parts) < 3 || !strings.HasPrefix(parts[0], "SPAMD/") {
		return nil, fmt.Errorf("spamd: not a SPAMD answer: %q", clip(status, 100))
	}
	if parts[1] != "0" {
		return nil, fmt.Errorf("spamd: error %s %s", parts[1], clip(strings.Join(parts[2:], " "), 100))
	}
	res := &spamdResult{}
	found := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("spamd: reading headers: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if m := spamHeaderRE.FindStringSubmatch(line); m != nil {
			found = true
			v := strings.ToLower(m[1])
			res.spam = v == "true" || v == "yes"
			res.score, _ = strconv.ParseFloat(m[2], 64)
			res.required, _ = strconv.ParseFloat(m[3], 64)
		}
	}
	if !found {
		return nil, fmt.Errorf("spamd: the answer has no Spam header")
	}
	body, _ := io.ReadAll(r)
	res.rules = parseReport(string(body))
	res.score = round1(res.score)
	return res, nil
}

// parseReport reads the rule table at the end of a SpamAssassin report:
//
//	 pts rule name              description
//	---- ---------------------- ------------------------------------
//	 2.7 MISSING_DATE           Missing Date: header
func parseReport(report string) []db.SpamRule {
	rules := []db.SpamRule{}
	table := false
	for _, line := range strings.Split(report, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(line, "----") {
			table = true
			continue
		}
		if !table {
			continue
		}
		m := reportLineRE.FindStringSubmatch(line)
		if m == nil {
			if strings.HasPrefix(line, " ") && len(rules) > 0 && strings.TrimSpace(line) != "" {
				// A description continued on the next line.
				last := &rules[len(rules)-1]
				last.Description = clip(strings.TrimSpace(last.Description+" "+strings.TrimSpace(line)), 300)
			}
			continue
		}
		score, _ := strconv.ParseFloat(m[1], 64)
		rules = append(rules, db.SpamRule{Name: m[2], Score: score, Description: clip(strings.TrimSpace(m[3]), 300)})
		if len(rules) >= 100 {
			break
		}
	}
	return rules
}
