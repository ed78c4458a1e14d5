package sqlite

import "strings"

// The compression dictionary of the JSON a message row carries (triage, protection, the
// protection detail). Each document is a few hundred bytes of mostly the same keys and
// words, which a compressor alone cannot find in so little text: primed with one document
// of each shape, a row's JSON shrinks to a fraction (packJSON in body.go). zstd frames
// name the dictionary by id, S2 blocks by the column's first byte; a changed dictionary
// must get a new id and byte, and the old one must stay for old rows.
const jsonDictID = 0x1b0c5d01

var jsonDict = []byte(strings.Join([]string{
	`{"status":"pending"}`,
	`{"status":"failed","code":"provider_error","failedAt":"2026-01-01T00:00:00.000Z"}`,
	`{"status":"complete","version":1,"model":"inboxd-lr-1","analyzedAt":"2026-01-01T00:00:00.000Z","durationMs":0,"bodyTruncated":false,` +
		`"usage":{"inputTokens":275,"outputTokens":0},"category":{"value":"other","confidence":0.9338,"probabilities":{"billing":0.0026,` +
		`"notification":0,"other":0.9338,"personal":0.0211,"sales":0.0258,"support":0.0167}},"needsReply":{"value":null,"probability":0.7608},` +
		`"urgency":{"value":"normal","score":1.0917,"confidence":0.5623,"probabilities":{"0":0.1855,"1":0.5623,"2":0.2272,"3":0.025}}}`,
	`{"status":"clean","scannedAt":"2026-01-01T00:00:00.000Z","authentication":{"spf":"pass","dkim":"pass","dmarc":"pass","signingDomains":[]},` +
		`"spam":{"score":0,"threshold":6},"antivirus":{"status":"clean","signatures":[]},"reasons":[]}`,
	`{"status":"quarantined","authentication":{"spf":"fail","dkim":"none","dmarc":"fail","signingDomains":[]},"spam":{"score":7.5,"threshold":6},` +
		`"antivirus":{"status":"infected","signatures":["Eicar-Test-Signature"]},"reasons":["malware","spam","authentication_failed","scan_incomplete"],` +
		`"releasedAt":"","releasedBy":"","status":"released","temperror","permerror","unavailable","softfail","neutral"}`,
	`{"internal":true,"spf":{"result":"pass","domain":"","note":"sent by an inbox of this server"},"dkim":[{"domain":"","result":"pass"}],` +
		`"dkimResult":"none","dmarc":{"result":"pass","domain":"","policy":"none","note":"SPF passed for an aligned domain ()"},` +
		`"dmarc":{"result":"none","note":"the From domain publishes no DMARC policy"},"ignoredAuthResults":1,"spamEngine":"builtin",` +
		`"spamRules":[{"name":"SPAM_PHRASE","score":2.5,"description":"subject or body uses a phrase common in spam"}],"avEngine":"builtin"}`,
}, "\n"))
