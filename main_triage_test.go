package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"

	"github.com/inboxd/inboxd/mail/triage"
)

// triageServer is the whole program with SMTP on, driven as a user would: mail goes in
// over SMTP, results come out of the HTTP API.
type triageServer struct {
	c    *qt.C
	m    *Main
	base string
	key  string
}

func startTriageServer(c *qt.C, m *Main) *triageServer {
	var out bytes.Buffer
	m.DBPath = filepath.Join(c.TempDir(), "inboxd.db")
	m.HTTPAddr, m.SMTPAddr, m.Domain, m.DNS, m.Stdout = "127.0.0.1:0", "127.0.0.1:0", "inboxd.test", "off", &out
	c.Assert(m.Run(context.Background()), qt.IsNil)
	c.Cleanup(func() { m.Close() })
	s := &triageServer{c: c, m: m, base: "http://" + m.Addr(), key: keyPattern.FindString(out.String())}
	c.Assert(s.key, qt.Not(qt.Equals), "")
	s.call("POST", "/v1/inboxes", map[string]any{"username": "desk"})
	return s
}

func (s *triageServer) call(method, path string, body any) map[string]any {
	s.c.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	s.c.Assert(err, qt.IsNil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	s.c.Assert(err, qt.IsNil)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	s.c.Assert(res.StatusCode, qt.Equals, 200, qt.Commentf("%s %s: %s", method, path, b))
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 && string(b) != "null" {
		s.c.Assert(json.Unmarshal(b, &out), qt.IsNil)
	}
	return out
}

// send delivers one message over SMTP and returns once the server accepted it (250).
func (s *triageServer) send(id, subject, body string, headers ...string) {
	s.c.Helper()
	msg := "From: Ann Example <ann@example.com>\r\nTo: desk@inboxd.test\r\nSubject: " + subject + "\r\nMessage-ID: " + id +
		"\r\nDate: Tue, 03 Nov 2026 09:00:00 +0000\r\n" + strings.Join(headers, "") + "\r\n" + body + "\r\n"
	s.c.Assert(smtp.SendMail(s.m.SMTPAddrListening(), nil, "ann@example.com", []string{"desk@inboxd.test"}, []byte(msg)), qt.IsNil)
}

func (s *triageServer) message(id string) map[string]any {
	return s.call("GET", "/v1/inboxes/desk%40inboxd.test/messages/"+url.PathEscape(id), nil)
}

func (s *triageServer) triage(id string) map[string]any {
	t, _ := s.message(id)["triage"].(map[string]any)
	return t
}

// ids lists the messageIds (or threads' lastMessageIds) a list query returns.
func (s *triageServer) ids(path, key, field string) []string {
	s.c.Helper()
	var out []string
	for _, it := range s.call("GET", path, nil)[key].([]any) {
		out = append(out, it.(map[string]any)[field].(string))
	}
	slices.Sort(out)
	return out
}

// TestTriageBuiltinOverSMTP: mail accepted over SMTP is triaged by the built-in model,
// with no external service, before it is stored: complete as soon as it is accepted.
func TestTriageBuiltinOverSMTP(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	s := startTriageServer(c, &Main{})
	s.send("<outage@example.com>", "Production outage - checkout down",
		"Hi,\r\n\r\nYour API has been returning 500 errors since 09:14 UTC and our checkout is down.\r\nCan you escalate this to your on-call engineer right away?\r\n\r\nAnn")
	tr := s.triage("<outage@example.com>")
	c.Assert(tr["status"], qt.Equals, "complete")
	c.Assert(tr["version"], qt.Equals, 1.0)
	c.Assert(tr["model"], qt.Equals, triage.ModelName)
	c.Assert(tr["analyzedAt"], qt.Matches, `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	c.Assert(tr["bodyTruncated"], qt.Equals, false)
	probs := tr["category"].(map[string]any)["probabilities"].(map[string]any)
	total := 0.0
	for _, v := range probs {
		total += v.(float64)
	}
	c.Assert(probs, qt.HasLen, 6)
	c.Assert(total > 0.9999 && total < 1.0001, qt.IsTrue, qt.Commentf("%v", probs))
	c.Assert(tr["category"].(map[string]any)["value"], qt.Equals, "support")
}

// TestTriageSignalsOverSMTP: what the built-in model reads besides the words reaches it
// from mail sent over SMTP. The same words read as bulk mail with a newsletter's headers
// (less likely to need a reply), and as an answer to mail the inbox sent they read
// otherwise than as an answer to mail it never saw.
func TestTriageSignalsOverSMTP(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	s := startTriageServer(c, &Main{})
	body := "Hi,\r\n\r\nWe put together a few ideas for your team this month. Have a look when you have a minute.\r\n\r\nThe Kitepost team"
	s.send("<plain@example.com>", "Ideas for this month", body)
	s.send("<bulk@example.com>", "Ideas for this month", body,
		"List-Unsubscribe: <https://example.com/u/1>\r\nList-Id: <ideas.example.com>\r\nPrecedence: bulk\r\n")
	plain, bulk := s.triage("<plain@example.com>"), s.triage("<bulk@example.com>")
	c.Assert(bulkShare(bulk) > bulkShare(plain), qt.IsTrue, qt.Commentf("with bulk headers %v, without %v", bulk, plain))
	c.Assert(replyProbability(bulk) <= replyProbability(plain), qt.IsTrue, qt.Commentf("with bulk headers %v, without %v", bulk, plain))

	sent := s.call("POST", "/v1/inboxes/desk%40inboxd.test/messages/send", map[string]any{
		"to": []string{"ann@example.com"}, "subject": "Your order 1042", "text": "Your order ships tomorrow.", "idempotencyKey": "o1"})
	ours := sent["messageId"].(string)
	reply := "Thanks, that works for me."
	s.send("<r-ours@example.com>", "Re: Your order 1042", reply, "In-Reply-To: "+ours+"\r\nReferences: "+ours+"\r\n")
	s.send("<r-other@example.com>", "Re: Your order 1042", reply, "In-Reply-To: <elsewhere@example.com>\r\nReferences: <elsewhere@example.com>\r\n")
	toOurs, toOther := s.triage("<r-ours@example.com>"), s.triage("<r-other@example.com>")
	c.Assert(toOurs["category"], qt.Not(qt.DeepEquals), toOther["category"], qt.Commentf("an answer to our mail and to unknown mail scored alike"))
}

// bulkShare is the probability a complete triage result gives the categories of mail sent
// to many: notifications, newsletters and the like (other), and sales.
func bulkShare(tr map[string]any) float64 {
	p := tr["category"].(map[string]any)["probabilities"].(map[string]any)
	return p["notification"].(float64) + p["other"].(float64) + p["sales"].(float64)
}

// replyProbability is the needsReply probability of a complete triage result.
func replyProbability(tr map[string]any) float64 {
	return tr["needsReply"].(map[string]any)["probability"].(float64)
}

// answers are the chosen results of the fake LLM, by the subject of the message.
var answers = map[string]string{
	"billing-yes-high":     `{"category":{"billing":0.9,"support":0.02,"sales":0.02,"personal":0.02,"notification":0.02,"other":0.02},"needsReply":0.9,"urgency":{"low":0,"normal":0.1,"high":0.8,"critical":0.1}}`,
	"billing-no-low":       `{"category":{"billing":0.7,"support":0.1,"sales":0.05,"personal":0.05,"notification":0.05,"other":0.05},"needsReply":0.1,"urgency":{"low":0.9,"normal":0.1,"high":0,"critical":0}}`,
	"support-unsure-crit":  `{"category":{"billing":0.05,"support":0.8,"sales":0.05,"personal":0.05,"notification":0.03,"other":0.02},"needsReply":0.5,"urgency":{"low":0,"normal":0,"high":0.3,"critical":0.7}}`,
	"personal-yes-unknown": `{"category":{"billing":0,"support":0,"sales":0,"personal":1,"notification":0,"other":0},"needsReply":0.85,"urgency":{"low":0.25,"normal":0.25,"high":0.25,"critical":0.25}}`,
	"sales-no-normal":      `{"category":{"billing":0.1,"support":0,"sales":0.8,"personal":0,"notification":0,"other":0.1},"needsReply":0.2,"urgency":{"low":0.2,"normal":0.7,"high":0.1,"critical":0}}`,
}

// fakeLLM is an OpenAI-compatible endpoint answering from answers; until released it
// holds every request, so a test can look at pending triage.
type fakeLLM struct {
	*httptest.Server
	release chan struct{}
	once    sync.Once
}

func newFakeLLM(c *qt.C) *fakeLLM {
	f := &fakeLLM{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-f.release:
		case <-r.Context().Done():
			return
		}
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		user := req.Messages[len(req.Messages)-1].Content
		answer := `{"category":{}}` // invalid unless a subject below matches
		for k, v := range answers {
			if strings.Contains(user, `"subject":"`+k) {
				answer = v
			}
		}
		b, _ := json.Marshal(map[string]any{"model": "fake-llm-7b", "choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": answer}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	}))
	c.Cleanup(func() { f.Release(); f.Close() })
	return f
}

func (f *fakeLLM) Release() { f.once.Do(func() { close(f.release) }) }

// TestTriageLLMFilters: with --triage llm, mail over SMTP is pending until the endpoint
// answers, then complete within a second; the category, needsReply and urgency filters of
// listMessages and listThreads return exactly the matching messages and threads.
func TestTriageLLMFilters(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	llm := newFakeLLM(c)
	s := startTriageServer(c, &Main{Triage: "llm", TriageURL: llm.URL + "/v1", TriageModel: "fake-llm", TriageKey: "k"})

	s.send("<m1@example.com>", "billing-yes-high invoice question", "Why was I charged twice?")
	s.send("<m2@example.com>", "billing-no-low receipt", "Thanks for your payment.")
	s.send("<m3@example.com>", "support-unsure-crit outage", "Everything is down.")
	s.send("<m4@example.com>", "personal-yes-unknown dinner", "Dinner on Friday?")
	// m5 answers m2 in the same thread: the thread's triage becomes m5's.
	s.send("<m5@example.com>", "sales-no-normal offer", "A discount for you.", "In-Reply-To: <m2@example.com>\r\nReferences: <m2@example.com>\r\n")
	s.send("<m6@example.com>", "mystery", "The endpoint gives no valid answer for this one.")
	for _, id := range []string{"<m1@example.com>", "<m5@example.com>", "<m6@example.com>"} {
		c.Assert(s.triage(id), qt.DeepEquals, map[string]any{"status": "pending"})
	}
	released := time.Now()
	llm.Release()
	for _, id := range []string{"<m1@example.com>", "<m2@example.com>", "<m3@example.com>", "<m4@example.com>", "<m5@example.com>", "<m6@example.com>"} {
		for s.triage(id)["status"] == "pending" {
			c.Assert(time.Since(released) < time.Second, qt.IsTrue, qt.Commentf("%s still pending", id))
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.Assert(s.triage("<m1@example.com>")["model"], qt.Equals, "fake-llm-7b")
	m6 := s.triage("<m6@example.com>")
	c.Assert(m6["status"], qt.Equals, "failed")
	c.Assert(m6["code"], qt.Equals, "invalid_response")

	const inbox = "/v1/inboxes/desk%40inboxd.test"
	cases := []struct {
		query    string
		messages []string
		threads  []string // by lastMessageId
	}{
		{"category=billing", []string{"<m1@example.com>", "<m2@example.com>"}, []string{"<m1@example.com>"}},
		{"category=support", []string{"<m3@example.com>"}, []string{"<m3@example.com>"}},
		{"category=sales", []string{"<m5@example.com>"}, []string{"<m5@example.com>"}},
		{"category=other", nil, nil},
		{"needsReply=yes", []string{"<m1@example.com>", "<m4@example.com>"}, []string{"<m1@example.com>", "<m4@example.com>"}},
		{"needsReply=no", []string{"<m2@example.com>", "<m5@example.com>"}, []string{"<m5@example.com>"}},
		{"needsReply=uncertain", []string{"<m3@example.com>"}, []string{"<m3@example.com>"}},
		{"urgency=high", []string{"<m1@example.com>"}, []string{"<m1@example.com>"}},
		{"urgency=low", []string{"<m2@example.com>"}, nil},
		{"urgency=normal", []string{"<m5@example.com>"}, []string{"<m5@example.com>"}},
		{"urgency=critical", []string{"<m3@example.com>"}, []string{"<m3@example.com>"}},
		{"category=billing&needsReply=no", []string{"<m2@example.com>"}, nil},
		{"category=personal&urgency=low", nil, nil},
	}
	for _, k := range cases {
		c.Check(s.ids(inbox+"/messages?"+k.query, "messages", "messageId"), qt.DeepEquals, k.messages, qt.Commentf("messages %s", k.query))
		c.Check(s.ids(inbox+"/threads?"+k.query, "threads", "lastMessageId"), qt.DeepEquals, k.threads, qt.Commentf("threads %s", k.query))
	}
	u := s.triage("<m4@example.com>")["urgency"].(map[string]any)
	c.Assert(u["value"], qt.IsNil) // a flat distribution: confidence below 0.5
	c.Assert(fmt.Sprint(u["score"]), qt.Equals, "1.5")
}

// TestTriageOff: with --triage off received mail carries no triage at all.
func TestTriageOff(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	s := startTriageServer(c, &Main{Triage: "off"})
	s.send("<off@example.com>", "Hello", "No triage here.")
	msg := s.message("<off@example.com>")
	_, has := msg["triage"]
	c.Assert(has, qt.IsFalse, qt.Commentf("%v", msg))
	c.Assert(s.ids("/v1/inboxes/desk%40inboxd.test/messages?category=other", "messages", "messageId"), qt.HasLen, 0)
}

func TestTriageFlags(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	for _, k := range []struct {
		m   Main
		err string
	}{
		{Main{Triage: "gpt"}, `--triage "gpt": use builtin, llm or off`},
		{Main{Triage: "llm"}, `--triage llm needs --triage-url and --triage-model`},
		{Main{Triage: "llm", TriageURL: "localhost:11434", TriageModel: "m"}, `.*is not an http\(s\) URL`},
		{Main{TriageURL: "http://localhost:11434/v1"}, `--triage-url, --triage-model and --triage-key need --triage llm`},
		{Main{TriageKey: "secret"}, `--triage-url, --triage-model and --triage-key need --triage llm`},
		{Main{Triage: "off", TriageModel: "m"}, `--triage-url, --triage-model and --triage-key need --triage llm`},
	} {
		m := k.m
		m.DBPath, m.HTTPAddr, m.Domain, m.DNS = filepath.Join(c.TempDir(), "x.db"), "127.0.0.1:0", "inboxd.test", "off"
		c.Check(m.Run(context.Background()), qt.ErrorMatches, k.err)
	}
}

// TestInjectedTriageReplacesTheClassifier: a triage chosen for injected mail is what the
// message keeps, pending included (a test of mail still being analyzed), while mail
// injected without one is classified as usual.
func TestInjectedTriageReplacesTheClassifier(t *testing.T) {
	t.Parallel()
	c := qt.New(t)
	llm := newFakeLLM(c)
	llm.Release()
	s := startTriageServer(c, &Main{Triage: "llm", TriageURL: llm.URL + "/v1", TriageModel: "fake-llm", TriageKey: "k", TestControls: true})
	inject := func(fields map[string]any) string {
		return s.call("POST", "/_inboxd/inboxes/desk%40inboxd.test/messages", fields)["messageId"].(string)
	}
	held := inject(map[string]any{"from": "ann@example.com", "subject": "billing-yes-high stays pending", "text": "x",
		"triage": map[string]any{"status": "pending"}})
	classified := inject(map[string]any{"from": "ann@example.com", "subject": "billing-yes-high classified", "text": "x"})
	for start := time.Now(); s.triage(classified)["status"] == "pending"; time.Sleep(10 * time.Millisecond) {
		c.Assert(time.Since(start) < 5*time.Second, qt.IsTrue, qt.Commentf("never classified"))
	}
	time.Sleep(200 * time.Millisecond) // the worker had the pending one first
	c.Assert(s.triage(held), qt.DeepEquals, map[string]any{"status": "pending"})
}
