package benchkit

import (
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// SenderDomain is the domain the ingest mail comes from: the fake DNS publishes SPF for it
// (allowing 127.0.0.1) and a DMARC policy, so the server's checks pass as for real mail.
const SenderDomain = "customer.example"

// FakeDNS answers the server's SPF, DKIM and DMARC queries the way a local caching
// resolver in front of a real MX would: at once. SenderDomain has its records; every other
// name does not exist. Without it a benchmark would measure the machine's upstream DNS,
// not inboxd.
func FakeDNS() (addr string, stop func(), err error) {
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
			if out := dnsAnswer(buf[:n]); out != nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String(), func() { pc.Close() }, nil
}

var txtRecords = map[string]string{
	SenderDomain + ".":             "v=spf1 ip4:127.0.0.1 -all",
	"_dmarc." + SenderDomain + ".": "v=DMARC1; p=none",
}

// dnsAnswer answers one query: its TXT record, an empty answer for another type of a known
// name, NXDOMAIN otherwise; nil for a packet it cannot parse (the client retries).
func dnsAnswer(q []byte) []byte {
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
