package protect

import (
	"math"
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/inboxd/inboxd/db"
)

// DefaultThreshold is the spam score at which mail is quarantined, as on the hosted
// service.
const DefaultThreshold = 6.0

// Rule is one rule of the built-in spam scorer: a name, the points it adds when it fires,
// and what it looks for.
type Rule struct {
	Name        string
	Score       float64
	Description string
	match       func(*spamInput) bool
}

// GTUBE is SpamAssassin's test string: any message carrying it is spam, whichever filter
// runs. It is how you try the spam path on purpose.
const GTUBE = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"

// spamPhrases are matched case-insensitively on the subject and the text body, with runs
// of white space collapsed.
var spamPhrases = []string{
	"you have won", "you've won", "claim your prize", "lottery", "act now", "limited time offer",
	"100% free", "risk-free", "risk free", "wire transfer", "western union", "verify your account",
	"account suspended", "urgent response", "million dollars", "inheritance", "beneficiary",
	"viagra", "cialis", "cheap meds", "weight loss", "work from home", "make money fast",
	"double your money", "crypto giveaway", "bitcoin giveaway", "investment opportunity",
	"no credit check", "click here to claim", "congratulations you", "dear beneficiary",
}

// phrasesByFirst lists the spamPhrases by their first byte, so one pass over a body finds
// every phrase it holds: looking for each phrase in turn scanned the body 31 times, and
// common first letters made each scan stop at nearly every word.
var phrasesByFirst = func() (t [256][]uint8) {
	for i, p := range spamPhrases {
		t[p[0]] = append(t[p[0]], uint8(i))
	}
	return t
}()

// countPhrases returns how many different spam phrases lower (in lower case) holds.
func countPhrases(lower string) int {
	var found [64]bool // more than spamPhrases holds
	n := 0
	for i := 0; i < len(lower); i++ {
		for _, p := range phrasesByFirst[lower[i]] {
			if ph := spamPhrases[p]; !found[p] && strings.HasPrefix(lower[i:], ph) {
				found[p] = true
				n++
			}
		}
	}
	return n
}

var (
	moneyRE     = regexp.MustCompile(`(?i)([$€£]\s?\d{1,3}(,\d{3}){2,})|(\d+(\.\d+)?\s?(million|billion)\s(dollars|usd|euros?|pounds))`)
	ipURLRE     = regexp.MustCompile(`(?i)https?://\d{1,3}(\.\d{1,3}){3}([:/]|\b)`)
	shortURLRE  = regexp.MustCompile(`(?i)https?://(www\.)?(bit\.ly|tinyurl\.com|goo\.gl|t\.co|ow\.ly|is\.gd|buff\.ly|cutt\.ly|rb\.gy|shorturl\.at)/`)
	executables = map[string]bool{
		".exe": true, ".scr": true, ".com": true, ".pif": true, ".bat": true, ".cmd": true, ".vbs": true, ".vbe": true,
		".js": true, ".jse": true, ".wsf": true, ".hta": true, ".msi": true, ".jar": true, ".lnk": true, ".ps1": true,
	}
)

// Rules is the built-in scorer's rule table, documented in the README. A message's score
// is the sum of the rules that fire, rounded to one decimal.
var Rules = []Rule{
	{"GTUBE", 1000, "carries the GTUBE spam test string", func(in *spamInput) bool {
		return strings.Contains(in.body, GTUBE) || strings.Contains(in.in.Subject, GTUBE)
	}},
	{"SPAM_PHRASE", 2.5, "subject or body uses a phrase common in spam", func(in *spamInput) bool { return in.phrases >= 1 }},
	{"SPAM_PHRASES_MANY", 2.5, "three or more different spam phrases", func(in *spamInput) bool { return in.phrases >= 3 }},
	{"SUBJECT_ALL_CAPS", 1.5, "subject is mostly capital letters", func(in *spamInput) bool { return shouting(in.in.Subject) }},
	{"SUBJECT_EXCLAIM", 1.0, "subject has three or more exclamation marks", func(in *spamInput) bool {
		return strings.Count(in.in.Subject, "!") >= 3
	}},
	{"MONEY_AMOUNT", 1.5, "body names a large sum of money", func(in *spamInput) bool {
		// A currency sign or "...illion" must be there before the expression can match.
		// (Three single searches: ContainsAny goes rune by rune when a sign is not ASCII.)
		sign := strings.IndexByte(in.body, '$') >= 0 || strings.Contains(in.body, "€") || strings.Contains(in.body, "£")
		return (sign || strings.Contains(in.lower, "illion")) && moneyRE.MatchString(in.body)
	}},
	{"URL_IP_ADDRESS", 1.5, "a link points at a bare IP address", func(in *spamInput) bool {
		return (in.bodyLinks && ipURLRE.MatchString(in.body)) || (in.htmlLinks && ipURLRE.MatchString(in.in.HTML))
	}},
	{"URL_SHORTENER", 1.0, "a link goes through a URL shortener", func(in *spamInput) bool {
		return (in.bodyLinks && shortURLRE.MatchString(in.body)) || (in.htmlLinks && shortURLRE.MatchString(in.in.HTML))
	}},
	{"EXECUTABLE_ATTACHMENT", 2.5, "an attachment is a program or script", func(in *spamInput) bool {
		for _, a := range in.in.Attachments {
			if executables[strings.ToLower(path.Ext(a.Filename))] {
				return true
			}
		}
		return false
	}},
	{"MISSING_FROM", 1.0, "no From address", func(in *spamInput) bool { return !in.h.has("From") }},
	{"MISSING_DATE", 0.5, "no Date header", func(in *spamInput) bool { return !in.h.has("Date") }},
	{"MISSING_MESSAGE_ID", 0.5, "no Message-ID header", func(in *spamInput) bool { return !in.h.has("Message-ID") }},
	{"SPF_FAIL", 1.0, "SPF says the sending server may not send for the domain", func(in *spamInput) bool {
		return in.auth.SPF == Fail
	}},
	{"DKIM_INVALID", 0.5, "a DKIM signature does not verify", func(in *spamInput) bool { return in.auth.DKIM == Fail }},
	{"DMARC_FAIL", 1.5, "the From domain's DMARC check failed", func(in *spamInput) bool { return in.auth.DMARC == Fail }},
}

type spamInput struct {
	in      *Input
	h       header
	auth    db.Authentication
	body    string // subject and text, white space collapsed
	lower   string // body in lower case
	phrases int    // distinct spam phrases found
	// Whether body and HTML hold "http" in any case: the URL rules match nothing without
	// it, and a regular expression costs far more than this look.
	bodyLinks, htmlLinks bool
}

// hasHTTP reports whether s holds "http" in any mix of cases.
func hasHTTP(s string) bool {
	for i := 0; i+4 <= len(s); i++ {
		if c := s[i]; (c == 'h' || c == 'H') && strings.EqualFold(s[i:i+4], "http") {
			return true
		}
	}
	return false
}

// scoreBuiltin runs the rule table.
func scoreBuiltin(in *Input, h header, auth db.Authentication) (float64, []db.SpamRule) {
	si := &spamInput{in: in, h: h, auth: auth, body: collapseSpace(in.Subject, in.Text)}
	si.lower = strings.ToLower(si.body)
	si.bodyLinks, si.htmlLinks = hasHTTP(si.body), hasHTTP(in.HTML)
	si.phrases = countPhrases(si.lower)
	total := 0.0
	fired := []db.SpamRule{}
	for _, r := range Rules {
		if r.match(si) {
			total += r.Score
			fired = append(fired, db.SpamRule{Name: r.Name, Score: r.Score, Description: r.Description})
		}
	}
	return round1(total), fired
}

// collapseSpace returns the words of a and b (split at Unicode white space, as
// strings.Fields does) joined by single spaces, in one allocation and one pass.
func collapseSpace(a, b string) string {
	var out strings.Builder
	out.Grow(len(a) + len(b) + 1)
	for _, s := range [2]string{a, b} {
		word := -1 // start of the word being read, or -1 between words
		for i := 0; i < len(s); {
			c, size := s[i], 1
			space := asciiSpace[c]
			if c >= utf8.RuneSelf {
				var r rune
				r, size = utf8.DecodeRuneInString(s[i:])
				space = unicode.IsSpace(r)
			}
			switch {
			case space && word >= 0:
				out.WriteString(s[word:i])
				word = -1
			case !space && word < 0:
				if out.Len() > 0 {
					out.WriteByte(' ')
				}
				word = i
			}
			i += size
		}
		if word >= 0 {
			out.WriteString(s[word:])
		}
	}
	return out.String()
}

// asciiSpace marks the ASCII white space of unicode.IsSpace.
var asciiSpace = [256]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// shouting reports a subject of at least eight letters, four in five of them capitals.
func shouting(s string) bool {
	letters, upper := 0, 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			letters++
			if unicode.IsUpper(r) {
				upper++
			}
		}
	}
	return letters >= 8 && upper*5 >= letters*4
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
