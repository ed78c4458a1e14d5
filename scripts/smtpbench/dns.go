package main

import (
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeDNS answers the server's SPF, DKIM and DMARC queries the way a local caching
// resolver in front of a real MX would: at once. The benchmark's senders publish SPF
// (allowing 127.0.0.1) and a DMARC policy; every other name does not exist. Without it
// the benchmark would measure the sandbox's upstream DNS, not inboxd.
func fakeDNS() (addr string, stop func(), err error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out := answer(buf[:n]); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String(), func() { pc.Close() }, nil
}

var txtRecords = map[string]string{
	"customer.example.":        "v=spf1 ip4:127.0.0.1 -all",
	"_dmarc.customer.example.": "v=DMARC1; p=none",
}

func answer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil {
		return nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	name := strings.ToLower(qs[0].Name.String())
	txt, ok := txtRecords[name]
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(qs[0])
	b.StartAnswers()
	if ok && qs[0].Type == dnsmessage.TypeTXT {
		b.TXTResource(dnsmessage.ResourceHeader{Name: qs[0].Name, Class: dnsmessage.ClassINET, TTL: 300}, dnsmessage.TXTResource{TXT: []string{txt}})
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
