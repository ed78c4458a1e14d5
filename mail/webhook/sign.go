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
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// setHeaders sets the headers of a delivery: the Standard Webhooks ones, and the same
// values under Svix's names, so either library verifies them unchanged.
func setHeaders(h http.Header, id string, timestamp int64, signature string) {
	ts := strconv.FormatInt(timestamp, 10)
	for _, prefix := range []string{"webhook-", "svix-"} {
		h.Set(prefix+"id", id)
		h.Set(prefix+"timestamp", ts)
		h.Set(prefix+"signature", signature)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "inboxd-webhooks")
}
