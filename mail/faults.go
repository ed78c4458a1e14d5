package mail

import (
	"context"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inboxd/inboxd/db"
)

// Fault rules of the test controls (extensions section 6): a CI suite makes the next
// delivery bounce, an SMTP stage answer an error, an API operation fail or slow down, or
// triage fail, to test how its code copes. The rules are kept in the database, shared by
// every process that serves it (controls.go); each process holds them in one Faults,
// shared by its API, SMTP listener, outbound delivery and triage. None is set unless a
// test sets one.

// Fault targets.
const (
	FaultDelivery = "delivery"
	FaultSMTP     = "smtp"
	FaultAPI      = "api"
	FaultTriage   = "triage"
)

// FaultRule is one rule: which cases of a target it matches, what they get instead, how
// likely (Probability, 0-1, nil: always) and how many times (Times, nil: unlimited).
type FaultRule struct {
	Target      string       `json:"target"`
	Match       *FaultMatch  `json:"match,omitempty"`
	Effect      *FaultEffect `json:"effect"`
	Probability *float64     `json:"probability,omitempty"`
	Times       *int         `json:"times,omitempty"`
}

// FaultMatch narrows a rule; an empty field matches anything.
type FaultMatch struct {
	Recipient string `json:"recipient,omitempty"` // delivery, smtp: a glob such as *@bounce.test
	Stage     string `json:"stage,omitempty"`     // smtp: connect, mail, rcpt or data
	Sender    string `json:"sender,omitempty"`    // smtp: a glob of the envelope sender
	Operation string `json:"operation,omitempty"` // api: an operationId
}

// FaultEffect is what a matched case gets.
type FaultEffect struct {
	SMTPCode     int    `json:"smtpCode,omitempty"`     // delivery, smtp
	EnhancedCode string `json:"enhancedCode,omitempty"` // delivery
	Message      string `json:"message,omitempty"`      // delivery, smtp
	Timeout      bool   `json:"timeout,omitempty"`      // delivery: the relay never answers
	Status       int    `json:"status,omitempty"`       // api: an error with this status,
	Code         string `json:"code,omitempty"`         // this code
	Transient    *bool  `json:"transient,omitempty"`    // and this transient flag
	DelayMs      int    `json:"delayMs,omitempty"`      // api: answered this much later
	Failure      string `json:"failure,omitempty"`      // triage: the error code of the failure
}

// FaultCase is one case of a target that a rule may match.
type FaultCase struct {
	Recipient, Stage, Sender, Operation string
}

// Faults holds the rules in force in this process: those of the test controls' state in
// the database, which Controls loads whenever it changes. The zero value has none; a nil
// *Faults fires nothing.
type Faults struct {
	mu       sync.Mutex
	set      int64 // the version the rules were set at (db.ControlState.RulesSet)
	rules    []faultState
	controls *Controls // counts the firings of rules with times, in the database
}

type faultState struct {
	FaultRule
	fired int
}

// load puts rules in force, the rules set at version set, with what each has fired.
func (f *Faults) load(set int64, rules []FaultRule, fired []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = set
	f.rules = make([]faultState, len(rules))
	for i, r := range rules {
		f.rules[i] = faultState{FaultRule: r}
		if i < len(fired) {
			f.rules[i].fired = fired[i]
		}
	}
}

// Rules returns the rules in force, with Times counting down what is left of each.
func (f *Faults) Rules() []FaultRule {
	if f == nil {
		return []FaultRule{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]FaultRule, 0, len(f.rules))
	for _, r := range f.rules {
		rule := r.FaultRule
		if rule.Times != nil {
			left := max(*rule.Times-r.fired, 0)
			rule.Times = &left
		}
		out = append(out, rule)
	}
	return out
}

// Has reports whether a rule of target is in force, so that a caller can skip preparing
// the case.
func (f *Faults) Has(target string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.Target == target {
			return true
		}
	}
	return false
}

// Fire returns the effect of the first rule of target that matches c and fires, nil when
// none does. Its probability is drawn here, for each match; a firing of a rule with times
// is counted in the database (Controls.spend), so that times fire in all, whichever
// processes the matches reach, and a rule another process has spent is passed over.
func (f *Faults) Fire(target string, c FaultCase) *FaultEffect {
	if f == nil {
		return nil
	}
	candidates, controls := f.candidates(target, c)
	for _, r := range candidates {
		if r.Probability != nil && rand.Float64() >= *r.Probability {
			continue
		}
		if r.Times != nil && !controls.spend(r.set, r.index, *r.Times) {
			continue
		}
		e := *r.Effect
		return &e
	}
	return nil
}

// faultCandidate is a rule that may fire, with where it is in the rules set at set.
type faultCandidate struct {
	FaultRule
	set   int64
	index int
}

// candidates are the rules of target that match c and are not spent, in order, and the
// Controls that count their firings. The firing is decided without the lock, since
// counting it takes a round trip.
func (f *Faults) candidates(target string, c FaultCase) ([]faultCandidate, *Controls) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []faultCandidate
	for i, r := range f.rules {
		if r.Target == target && r.matches(c) && (r.Times == nil || r.fired < *r.Times) {
			out = append(out, faultCandidate{FaultRule: r.FaultRule, set: f.set, index: i})
		}
	}
	return out, f.controls
}

func (r *FaultRule) matches(c FaultCase) bool {
	m := r.Match
	if m == nil {
		return true
	}
	return glob(m.Recipient, c.Recipient) && glob(m.Sender, c.Sender) &&
		(m.Stage == "" || m.Stage == c.Stage) && (m.Operation == "" || m.Operation == c.Operation)
}

// glob reports whether s matches pattern (path.Match's * and ?, any case); "" matches all.
func glob(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	ok, _ := path.Match(strings.ToLower(pattern), strings.ToLower(s))
	return ok
}

// triageFailures are the codes a triage fault may fail with.
var triageFailures = map[string]bool{"provider_unavailable": true, "provider_rejected": true, "invalid_response": true}

// CheckFaultRules refuses rules that could never work, naming the field; known says
// whether an operationId exists (for the api target).
//
// Errors: invalid_argument.
func CheckFaultRules(rules []FaultRule, known func(operation string) bool) error {
	for i, r := range rules {
		bad := func(field, why string) error {
			return db.Errorf(db.ECodeInvalidArgument, "rules[%d].%s: %s", i, field, why)
		}
		m, e := r.Match, r.Effect
		if e == nil {
			return bad("effect", "is required")
		}
		if m == nil {
			m = &FaultMatch{}
		}
		if _, err := path.Match(m.Recipient, ""); err != nil {
			return bad("match.recipient", "not a valid glob")
		}
		if _, err := path.Match(m.Sender, ""); err != nil {
			return bad("match.sender", "not a valid glob")
		}
		switch r.Target {
		case FaultDelivery:
			if m.Stage != "" || m.Sender != "" || m.Operation != "" {
				return bad("match", "a delivery rule matches recipient only")
			}
			if e.Timeout == (e.SMTPCode != 0) || e.Status != 0 || e.Code != "" || e.DelayMs != 0 || e.Failure != "" {
				return bad("effect", "a delivery rule answers smtpCode (with enhancedCode and message) or timeout")
			}
			if e.SMTPCode != 0 && (e.SMTPCode < 400 || e.SMTPCode > 599) {
				return bad("effect.smtpCode", "a delivery fault is a 4xx (deferred) or 5xx (bounced) answer")
			}
			if e.EnhancedCode != "" && e.EnhancedCode[:1] != strconv.Itoa(e.SMTPCode/100) {
				return bad("effect.enhancedCode", "its class (the first digit) is the smtpCode's, as a relay answers")
			}
		case FaultSMTP:
			if m.Operation != "" || (m.Stage != "" && !map[string]bool{"connect": true, "mail": true, "rcpt": true, "data": true}[m.Stage]) {
				return bad("match.stage", "an smtp rule matches stage connect, mail, rcpt or data, and sender or recipient")
			}
			switch {
			case m.Stage == "connect" && (m.Sender != "" || m.Recipient != ""):
				return bad("match", "at stage connect neither sender nor recipient is known yet")
			case m.Stage == "mail" && m.Recipient != "":
				return bad("match.recipient", "at stage mail no recipient is known yet")
			}
			if e.SMTPCode < 400 || e.SMTPCode > 599 || e.EnhancedCode != "" || e.Timeout || e.Status != 0 || e.Code != "" || e.DelayMs != 0 || e.Failure != "" {
				return bad("effect", "an smtp rule answers smtpCode (4xx or 5xx) with an optional message")
			}
		case FaultAPI:
			if m.Recipient != "" || m.Stage != "" || m.Sender != "" || (m.Operation != "" && !known(m.Operation)) {
				return bad("match.operation", "an api rule matches an operationId of the API or the extensions")
			}
			isErr := e.Status != 0 || e.Code != "" || e.Transient != nil
			if isErr == (e.DelayMs != 0) || e.SMTPCode != 0 || e.Timeout || e.Failure != "" || e.EnhancedCode != "" || e.Message != "" {
				return bad("effect", "an api rule answers an error {status, code, transient} or a delay {delayMs}")
			}
			if isErr && (e.Status < 400 || e.Status > 599 || e.Code == "" || e.Transient == nil) {
				return bad("effect", "an api error needs status 400-599, code and transient")
			}
		case FaultTriage:
			if *m != (FaultMatch{}) && (m.Stage != "" || m.Sender != "" || m.Operation != "") {
				return bad("match", "a triage rule matches recipient (the inbox) only")
			}
			if !triageFailures[e.Failure] || e.SMTPCode != 0 || e.Status != 0 || e.Code != "" || e.DelayMs != 0 || e.Timeout {
				return bad("effect.failure", "a triage rule fails with provider_unavailable, provider_rejected or invalid_response")
			}
		default:
			return bad("target", "one of delivery, smtp, api, triage")
		}
	}
	return nil
}

// faultOutcome is what a delivery fault rule makes of delivery job j: a 5xx answer
// bounces it (and suppresses a hard bounce's address, as a relay's would), a 4xx answer
// or a timeout defers it to be retried on the usual schedule.
func (s *Service) faultOutcome(cfg OutboundConfig, j db.OutboundJob, now time.Time, e *FaultEffect) db.OutboundOutcome {
	provider := ProviderSink
	if cfg.Transport != nil {
		provider = cfg.Transport.Provider()
	}
	res := Result{Outcome: Deferred, Code: strconv.Itoa(e.SMTPCode), Enhanced: e.EnhancedCode, Reason: e.Message}
	switch {
	case e.Timeout:
		res = Result{Outcome: Deferred, Reason: "timed out (a fault rule of the test controls)"}
	case e.SMTPCode >= 500:
		res.Outcome = Bounced
	}
	if res.Reason == "" {
		res.Reason = "a fault rule of the test controls"
	}
	s.logOutcome(j, provider, res)
	if res.Outcome == Deferred {
		return s.retry(cfg, j, now, provider, res)
	}
	return db.OutboundOutcome{Update: db.RecipientDelivery{Status: db.RecipientBounced, Provider: provider, SMTPStatusCode: res.Code,
		SMTPEnhancedStatusCode: res.Enhanced, Reason: clip(res.Reason), DeliveryEventAt: db.Time{Time: now}.String()},
		Suppress: hardBounce(res.Code, res.Enhanced)}
}

// triageFault is the effect of a triage fault rule on new mail for inbox row inboxID (its
// address is the case's recipient), nil when none fires.
func (s *Service) triageFault(inboxID int64) *FaultEffect {
	if !s.faults.Has(FaultTriage) {
		return nil
	}
	in, err := s.store.InboxByRowID(context.Background(), inboxID)
	if err != nil {
		return nil
	}
	return s.faults.Fire(FaultTriage, FaultCase{Recipient: in.Address})
}
