package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
)

// Sign returns the Standard Webhooks signature of a delivery: "v1," and the base64
// HMAC-SHA256, keyed with the secret's decoded bytes (db.WebhookKey), of
// "<id>.<timestamp>.<body>".
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	// One buffer for the signed prefix, then the MAC and its base64 after it: every
	// attempt signs, and the body is written as it is, never copied.
	var buf [128]byte
	b := append(buf[:0], id...)
	b = append(b, '.')
	b = strconv.AppendInt(b, timestamp, 10)
	b = append(b, '.')
	mac.Write(b)
	mac.Write(body)
	var sum [sha256.Size]byte
	b = base64.StdEncoding.AppendEncode(append(b[:0], "v1,"...), mac.Sum(sum[:0]))
	return string(b)
}

// The headers of a delivery as the transport writes them (canonical), so that setting
// them canonicalizes nothing per attempt.
var (
	idHeaders        = [2]string{"Webhook-Id", "Svix-Id"}
	timestampHeaders = [2]string{"Webhook-Timestamp", "Svix-Timestamp"}
	signatureHeaders = [2]string{"Webhook-Signature", "Svix-Signature"}
	jsonType         = []string{"application/json"}
	userAgent        = []string{"inboxd-webhooks"}
)

// setHeaders sets the headers of a delivery: the Standard Webhooks ones, and the same
// values under Svix's names, so either library verifies them unchanged.
func setHeaders(h http.Header, id string, timestamp int64, signature string) {
	vals := [3][]string{{id}, {strconv.FormatInt(timestamp, 10)}, {signature}}
	for i := range idHeaders {
		h[idHeaders[i]] = vals[0]
		h[timestampHeaders[i]] = vals[1]
		h[signatureHeaders[i]] = vals[2]
	}
	h["Content-Type"] = jsonType // the transport only reads a request's headers
	h["User-Agent"] = userAgent
}
