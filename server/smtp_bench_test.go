package server_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/inboxd/inboxd/server"
)

// BenchmarkSMTPIngest measures the whole inbound path in-process over loopback: SMTP
// session, parse, thread, group commit. 8 connections, ~2 KB messages. The figures that
// count are scripts/smtpbench.sh's (the real binary); this one is for profiling:
//
//	go test -tags '...' -run - -bench SMTPIngest -cpuprofile cpu.out ./server
func BenchmarkSMTPIngest(b *testing.B) {
	e := newSMTPEnv(b, server.SMTPConfig{})
	body := strings.Repeat("Some words about an order and its delivery, thank you. ", 32)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", e.addr)
			if err != nil {
				b.Error(err)
				return
			}
			c := smtp.NewClient(nc)
			defer c.Close()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				msg := fmt.Sprintf("From: ann@customer.example\r\nTo: support@inboxd.test\r\nSubject: Order %d\r\nMessage-ID: <b%d@customer.example>\r\n\r\n%s\r\n", i, i, body)
				if err := c.SendMail("ann@customer.example", []string{"support@inboxd.test"}, strings.NewReader(msg)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
