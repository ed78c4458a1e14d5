package db

// UncertainReason is recorded for a recipient whose message was handed to the relay when
// the server stopped (or the connection broke) before the relay answered: it may have been
// accepted, so it is not sent again.
const UncertainReason = "the relay received the whole message but its answer was lost; not resent, to avoid delivering it twice"

// OutboundRecovery is what RecoverOutbound found after a restart.
type OutboundRecovery struct {
	Requeued  int // attempting, relay or parked rows made ready again (to be routed anew)
	Uncertain int // handed-off rows recorded `accepted` and not resent
}
