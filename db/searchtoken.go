package db

import (
	"crypto/hmac"
	"encoding/base64"
	"encoding/binary"
	"math"
)

// A search page token carries the cursor of a search (SearchCursor) bound to its scope
// (SearchScope): the scope's 9 bytes, the score, timestamp and row id, 33 bytes of
// payload and a 16-byte MAC, 67 characters in all, well under the 200 the API allows.

// searchTokenDomain keeps search tokens from being taken for list page tokens.
const searchTokenDomain = "search\x00"

// SearchToken signs a search cursor for scope.
func (s Signer) SearchToken(scope string, c SearchCursor) string {
	payload := make([]byte, 0, 33)
	sc, _ := base64.RawURLEncoding.DecodeString(scope)
	payload = append(payload, sc...)
	payload = binary.BigEndian.AppendUint64(payload, math.Float64bits(c.Score))
	payload = binary.BigEndian.AppendUint64(payload, uint64(c.TS))
	payload = binary.BigEndian.AppendUint64(payload, uint64(c.ID))
	return s.SealToken(searchTokenDomain, payload)
}

// DecodeSearchToken returns the cursor of a token issued for scope; "" is the first page
// (nil).
//
// Errors: invalid_argument (naming pageToken).
func (s Signer) DecodeSearchToken(token, scope string) (*SearchCursor, error) {
	if token == "" {
		return nil, nil
	}
	bad := Errorf(ECodeInvalidArgument, "pageToken: invalid page token")
	payload, ok := s.OpenToken(searchTokenDomain, token)
	if !ok || len(payload) != 33 {
		return nil, bad
	}
	sc, _ := base64.RawURLEncoding.DecodeString(scope)
	if !hmac.Equal(payload[:9], sc) {
		return nil, bad
	}
	c := &SearchCursor{
		Score: math.Float64frombits(binary.BigEndian.Uint64(payload[9:17])),
		TS:    int64(binary.BigEndian.Uint64(payload[17:25])),
		ID:    int64(binary.BigEndian.Uint64(payload[25:33])),
	}
	if math.IsNaN(c.Score) {
		return nil, bad
	}
	return c, nil
}
