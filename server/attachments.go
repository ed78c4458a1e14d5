package server

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/inboxd/inboxd/db"
)

// DownloadTTL is how long a download URL stays valid (API-NOTES section 11).
const DownloadTTL = 5 * time.Minute

// downloadSigned is what a download link's signature covers: its path and expiry, so a
// link cannot be altered to reach another attachment or live longer.
func downloadSigned(path string, expires int64) []byte {
	return []byte("attachment\n" + path + "\n" + strconv.FormatInt(expires, 10))
}

// downloadSigner signs download links with the server's secret; the whole MAC is used.
func (s *Server) downloadSigner() db.Signer {
	return db.NewSigner(s.store.DownloadKey(), sha256.Size)
}

// validDownloadSignature reports whether sig is the signature, in lower-case hex as links
// carry it, of path and expires.
func (s *Server) validDownloadSignature(sig, path string, expires int64) bool {
	mac, err := hex.DecodeString(sig)
	return err == nil && hex.EncodeToString(mac) == sig && s.downloadSigner().Verify(mac, downloadSigned(path, expires))
}

func downloadPath(inboxUUID, messageUUID, attachmentID string) string {
	return "/attachments/" + inboxUUID + "/" + messageUUID + "/" + attachmentID
}

// handleAttachmentGet serves GET /v1/inboxes/{inboxId}/messages/{messageId}/attachments/{attachmentId}.
func (s *Server) handleAttachmentGet(w http.ResponseWriter, r *http.Request, c *call) error {
	a, err := s.store.GetAttachment(r.Context(), c.inbox.ID, c.params["messageId"], c.params["attachmentId"])
	if err != nil {
		return err
	}
	if !a.Downloadable() {
		return db.Errorf(db.ECodeMessageQuarantined, "the message is quarantined or failed the antivirus scan; its attachments cannot be downloaded")
	}
	expires := s.now().Add(DownloadTTL)
	path := downloadPath(a.InboxUUID, a.MessageUUID, a.AttachmentID)
	link := s.cfg.BaseURL + path + "?expires=" + strconv.FormatInt(expires.Unix(), 10) + "&signature=" + hex.EncodeToString(s.downloadSigner().Sign(downloadSigned(path, expires.Unix())))
	writeJSON(w, http.StatusOK, map[string]any{
		"downloadUrl":  link,
		"attachmentId": a.AttachmentID,
		"expiresAt":    db.Time{Time: expires}.String(),
		"filename":     a.Filename,
		"contentType":  a.ContentType,
		"size":         a.Size,
	})
	return nil
}

// handleDownload serves GET /attachments/{inbox}/{message}/{attachment}: the signed link,
// usable without a key.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	invalid := db.Errorf(db.ECodeUnauthorized, "Invalid download link")
	ids := [3]string{p.ByName("inbox"), p.ByName("message"), p.ByName("attachment")}
	for _, id := range ids {
		if s.schema.Path("threadId", id) != nil { // the same UUID rule as every other id
			writeError(w, invalid, s.log)
			return
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	exp := q.Get("expires")
	expires, perr := strconv.ParseInt(exp, 10, 64)
	now := s.now().Unix()
	path := downloadPath(ids[0], ids[1], ids[2])
	if err != nil || len(exp) != 10 || perr != nil || expires <= now || expires > now+int64(DownloadTTL/time.Second) ||
		!s.validDownloadSignature(q.Get("signature"), path, expires) {
		writeError(w, invalid, s.log)
		return
	}
	a, body, err := s.store.OpenAttachment(r.Context(), ids[0], ids[1], ids[2])
	if err == nil && !a.Downloadable() {
		err = db.Errorf(db.ECodeNotFound, "attachment not found")
	}
	if err == nil {
		// Read the first chunk now: a storage error is still answered as an error, not
		// as a 200 cut short.
		if _, err = body.Read(nil); err == io.EOF {
			err = nil // an empty attachment
		}
	}
	if err != nil {
		writeError(w, err, s.log)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", "attachment; filename*=UTF-8''"+url.PathEscape(a.Filename))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-store")
	// Streamed a chunk at a time, with Range requests (a broken download resumes) and HEAD.
	http.ServeContent(w, r, "", time.Time{}, body)
}
