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

// Participants collects a thread's senders and recipients, each once, in order of first
// appearance: what listThreads shows of a thread, which the stores keep on its row.
type Participants struct {
	Senders, Recipients []string
	seenFrom, seenTo    map[string]bool
}

// Add adds a message's sender and its To and Cc recipients.
func (p *Participants) Add(from string, to, cc []string) {
	if p.seenFrom == nil {
		p.seenFrom, p.seenTo = map[string]bool{}, map[string]bool{}
	}
	if from != "" && !p.seenFrom[from] {
		p.seenFrom[from] = true
		p.Senders = append(p.Senders, from)
	}
	for _, list := range [][]string{to, cc} {
		for _, a := range list {
			if !p.seenTo[a] {
				p.seenTo[a] = true
				p.Recipients = append(p.Recipients, a)
			}
		}
	}
}
