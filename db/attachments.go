package db

// Attachment is one attachment with what decides whether it may be downloaded.
type Attachment struct {
	AttachmentSummary
	InboxUUID   string
	MessageUUID string
	Quarantined bool
	AVClean     bool // no protection verdict, or antivirus status clean
	Retired     bool // the inbox was deleted
}

// Downloadable reports whether the attachment's bytes may leave the server: never from a
// quarantined message or one whose antivirus verdict is not clean.
func (a *Attachment) Downloadable() bool { return !a.Quarantined && a.AVClean && !a.Retired }

// AVCleanVerdict reports whether a message's protection verdict (nil: never scanned) lets
// its attachments be downloaded: no antivirus verdict, or a clean one.
func AVCleanVerdict(p *Protection) bool {
	return p == nil || p.Antivirus.Status == "" || p.Antivirus.Status == "clean"
}
