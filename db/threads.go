package db

// Thread size limits of getThread (API-NOTES section 5).
const (
	MaxThreadMessages  = 500
	MaxThreadBodyBytes = 8 << 20
)

// CheckThreadMessages refuses a thread with too many messages to answer whole. A store
// calls it (and CheckThreadBodies, for a thread with bodies) before it loads the
// messages: the check is there to spare that load, so it runs inside the store's read.
func CheckThreadMessages(messages int) error {
	if messages > MaxThreadMessages {
		return Errorf(ECodeThreadTooLarge, "thread has %d messages, more than %d; page through listMessages instead", messages, MaxThreadMessages)
	}
	return nil
}

// CheckThreadBodies refuses a thread whose bodies are too large to answer whole.
func CheckThreadBodies(bytes int64) error {
	if bytes > MaxThreadBodyBytes {
		return Errorf(ECodeThreadTooLarge, "thread bodies total %d bytes, more than %d; fetch messages one by one", bytes, MaxThreadBodyBytes)
	}
	return nil
}
