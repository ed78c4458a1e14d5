package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// A message's text, HTML and raw RFC 5322 bytes are stored together in messages.body,
// compressed (DESIGN, "Storage and speed"). They are compressed as one zstd frame: the
// text is, most of the time, the raw body again, so the second copy costs a few bytes of
// back-references instead of its size. Messages whose raw bytes are large (attachments)
// keep them in a second frame, so reading the text never inflates the attachments.
//
// Most often the text is the raw body itself, only with its CRLF line ends made LF; then
// the text is not stored at all but derived from the raw bytes when read, which spares
// compressing (and decompressing) it: half of the input zstd sees for plain mail.
//
// Layout, by the first byte:
//
//	0: uncompressed: uvarint len(text) text, uvarint len(html) html, raw
//	1: one zstd frame of the layout of 0
//	2: uvarint len(A), frame A of uvarint len(text) text, uvarint len(html) html; then frame B of raw
//	3: one zstd frame of: uvarint off, uvarint len(html) html, raw; the text is raw[off:]
//	   with CRLF and lone CR made LF (textFromRaw)
//	4: one zstd frame of uvarint len(text) text, uvarint len(html) html; the raw bytes
//	   are in raw_chunks (chunks.go), written since version 12 for every message whose
//	   raw bytes are over splitAbove (layout 2 before)
//
// Readers that need the text (the search indexer, triage) unpack body in Go. (Version 6 of
// the schema had a generated body_text column; SQLite computes a STRICT table's generated
// columns on every write of the row, which cost a decompression per insert and update, so
// version 8 dropped it. inboxd_body_text stays registered for that migration.)
const (
	bodyPlain   = 0
	bodyZstd    = 1
	bodySplit   = 2
	bodyInRaw   = 3
	bodyChunked = 4
	splitAbove  = 64 << 10 // raw bytes past which they get a frame of their own
	minCompress = 64       // smaller bodies are stored as they are
)

// sqlBodyText is inboxd_body_text(body): the text of a packed body ("" for NULL), for
// migration 0006.
func sqlBodyText(v any) (string, error) {
	b, _ := v.([]byte)
	text, _, _, err := unpackBody(b, false)
	return text, err
}

// sqlPackBody is inboxd_pack_body(text, html, raw), for migrating rows written before
// bodies were packed.
func sqlPackBody(text, html string, raw []byte) []byte { return packBody(text, html, raw) }

// codecs are the zstd encoder of bodies and the one decoder (bodies; JSON written before
// jsonS2, with its dictionary).
type codecs struct {
	body *zstd.Encoder
	dec  *zstd.Decoder
}

var zstdCodecs = sync.OnceValue(func() *codecs {
	// The fastest level: ~40 us less server CPU per message than the default level
	// (scripts/smtpbench.sh, runs taken in turns; ~7 us in a benchmark of its own, where
	// the default level's larger match tables stay in the CPU cache), for frames ~4%
	// larger. Those bytes can cost more than their size: a row that no longer fits beside
	// three others starts a new 8 KB page. With the text stored whole (layouts 1 and 2)
	// the bench's 2 KB rows were just too large at the fastest level, and the messages
	// table took 2,452 bytes a message instead of 2,051 (dbstat); with the text derived
	// from the raw bytes (layout 3) they fit again: 2,050 bytes a message, 87 of them free.
	// Windows of 256 KB: a body frame is at most ~64 KB of raw bytes plus the text, and
	// the default (8 MB) costs megabytes of history per encoder for nothing.
	body, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithLowerEncoderMem(true), zstd.WithEncoderConcurrency(2), zstd.WithWindowSize(256<<10))
	if err != nil {
		panic(err) // only bad options fail
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(256<<20),
		zstd.WithDecoderDictRaw(jsonDictID, jsonDict))
	if err != nil {
		panic(err)
	}
	return &codecs{body: body, dec: dec}
})

func codec() (*zstd.Encoder, *zstd.Decoder) {
	c := zstdCodecs()
	return c.body, c.dec
}

// JSON columns (triage, protection, the protection detail, delivery) are stored by their
// first byte as:
//
//	0: the text (under minCompress bytes)
//	1: a zstd frame made with jsonDict (rows written before jsonS2)
//	4: an S2 block made with jsonDict
//
// S2, not zstd: a row's JSON is a few hundred bytes, mostly matches into the dictionary.
// zstd restored its match tables from the dictionary's for every frame, a copy of ~256 KB,
// and S2's are 32 KB; its blocks come out a little smaller too (three documents of a
// clean, triaged message: 327 bytes against 339), and packing and unpacking them took a
// third of the time (6.5 against 18 us). An S2 block does not name its dictionary: a
// changed jsonDict needs a new first byte, and the old dictionary stays for old rows.
const jsonS2 = 4

var jsonS2Dict = s2.MakeDict(jsonDict, []byte(`{"status":"`))

// packJSON returns the stored form of a JSON column (a NULL stays NULL).
func packJSON(s sql.NullString) any {
	if !s.Valid {
		return nil
	}
	if len(s.String) < minCompress {
		return append([]byte{bodyPlain}, s.String...)
	}
	out := make([]byte, 1+s2.MaxEncodedLen(len(s.String)))
	out[0] = jsonS2
	return out[:1+len(jsonS2Dict.Encode(out[1:], []byte(s.String)))]
}

// unpackJSON returns what packJSON stored.
func unpackJSON(b []byte) (string, error) {
	if len(b) == 0 {
		return "", errBody
	}
	switch b[0] {
	case bodyPlain:
		return string(b[1:]), nil
	case bodyZstd:
		out, err := zstdCodecs().dec.DecodeAll(b[1:], nil)
		if err != nil {
			return "", fmt.Errorf("%w: %v", errBody, err)
		}
		return string(out), nil
	case jsonS2:
		out, err := jsonS2Dict.Decode(nil, b[1:])
		if err != nil {
			return "", fmt.Errorf("%w: %v", errBody, err)
		}
		return string(out), nil
	}
	return "", errBody
}

// zjson scans a packed JSON column into sql.NullString's two fields.
type zjson struct {
	String string
	Valid  bool
}

func (z *zjson) Scan(v any) error {
	switch b := v.(type) {
	case nil:
		*z = zjson{}
		return nil
	case []byte:
		s, err := unpackJSON(b)
		z.String, z.Valid = s, err == nil
		return err
	}
	return fmt.Errorf("db: packed JSON column holds %T", v)
}

// sqlPackJSON is inboxd_pack_json(text), for migrating rows written before JSON was packed.
func sqlPackJSON(v any) any {
	b, ok := v.([]byte)
	if v == nil || (ok && b == nil) {
		return nil
	}
	switch t := v.(type) {
	case string:
		return packJSON(sql.NullString{String: t, Valid: true})
	case []byte:
		return packJSON(sql.NullString{String: string(t), Valid: true})
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// packBody returns the stored form of a message's text, HTML and raw bytes.
func packBody(text, html string, raw []byte) []byte {
	enc, _ := codec()
	n := len(text) + len(html) + len(raw)
	if n < minCompress {
		b := make([]byte, 1, n+12)
		b = appendString(appendString(b, text), html)
		return append(b, raw...)
	}
	if len(raw) > splitAbove {
		a := appendString(appendString(make([]byte, 0, len(text)+len(html)+12), text), html)
		fa := enc.EncodeAll(a, nil)
		out := binary.AppendUvarint([]byte{bodySplit}, uint64(len(fa)))
		out = append(out, fa...)
		return enc.EncodeAll(raw, out)
	}
	if off, ok := textInRaw(text, raw); ok {
		plain := binary.AppendUvarint(make([]byte, 0, len(html)+len(raw)+12), uint64(off))
		plain = append(appendString(plain, html), raw...)
		return enc.EncodeAll(plain, []byte{bodyInRaw})
	}
	plain := make([]byte, 0, n+12)
	plain = append(appendString(appendString(plain, text), html), raw...)
	return enc.EncodeAll(plain, []byte{bodyZstd})
}

// packText returns the stored form of a message whose raw bytes go to raw_chunks.
func packText(text, html string) []byte {
	enc, _ := codec()
	a := appendString(appendString(make([]byte, 0, len(text)+len(html)+12), text), html)
	return enc.EncodeAll(a, []byte{bodyChunked})
}

// textInRaw reports whether text is the body of raw (what follows the blank line after
// its header) with its line ends made LF, and where that body starts.
func textInRaw(text string, raw []byte) (int, bool) {
	off := bytes.Index(raw, []byte("\r\n\r\n"))
	if off < 0 {
		return 0, false
	}
	off += 4
	body, i := raw[off:], 0
	for k := 0; k < len(body); i++ {
		var c byte
		c, k = lfByte(body, k)
		if i == len(text) || text[i] != c {
			return 0, false
		}
	}
	return off, i == len(text)
}

// textFromRaw is the text layout 3 keeps in raw[off:].
func textFromRaw(raw []byte, off int) string {
	body := raw[off:]
	if bytes.IndexByte(body, '\r') < 0 {
		return string(body)
	}
	out := make([]byte, 0, len(body))
	for k := 0; k < len(body); {
		var c byte
		c, k = lfByte(body, k)
		out = append(out, c)
	}
	return string(out)
}

// lfByte returns the byte at body[k] with CRLF and a lone CR read as LF, and where the
// next one starts.
func lfByte(body []byte, k int) (byte, int) {
	if body[k] != '\r' {
		return body[k], k + 1
	}
	if k+1 < len(body) && body[k+1] == '\n' {
		return '\n', k + 2
	}
	return '\n', k + 1
}

var errBody = errors.New("db: malformed stored body")

// unpackBody returns what packBody stored; without wantRaw the raw bytes are not inflated
// when they have a frame of their own.
func unpackBody(b []byte, wantRaw bool) (text, html string, raw []byte, err error) {
	if len(b) == 0 {
		return "", "", nil, nil
	}
	_, dec := codec()
	var plain []byte
	switch b[0] {
	case bodyPlain:
		plain = b[1:]
	case bodyZstd, bodyChunked:
		if plain, err = dec.DecodeAll(b[1:], nil); err != nil {
			return "", "", nil, fmt.Errorf("%w: %v", errBody, err)
		}
	case bodySplit:
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > uint64(len(b)-1-k) {
			return "", "", nil, errBody
		}
		fa := b[1+k : 1+k+int(n)]
		if plain, err = dec.DecodeAll(fa, nil); err != nil {
			return "", "", nil, fmt.Errorf("%w: %v", errBody, err)
		}
		if wantRaw {
			if raw, err = dec.DecodeAll(b[1+k+int(n):], nil); err != nil {
				return "", "", nil, fmt.Errorf("%w: %v", errBody, err)
			}
		}
	case bodyInRaw:
		if plain, err = dec.DecodeAll(b[1:], nil); err != nil {
			return "", "", nil, fmt.Errorf("%w: %v", errBody, err)
		}
		off, k := binary.Uvarint(plain)
		if k <= 0 {
			return "", "", nil, errBody
		}
		html, rest, ok := cutString(plain[k:])
		if !ok || off > uint64(len(rest)) {
			return "", "", nil, errBody
		}
		if wantRaw {
			raw = rest
		}
		return textFromRaw(rest, int(off)), html, raw, nil
	default:
		return "", "", nil, errBody
	}
	text, rest, ok := cutString(plain)
	if !ok {
		return "", "", nil, errBody
	}
	html, rest, ok = cutString(rest)
	if !ok {
		return "", "", nil, errBody
	}
	if b[0] != bodySplit && wantRaw && len(rest) > 0 {
		raw = rest
	}
	return text, html, raw, nil
}

func cutString(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// bodySize is what the thread size limit counts of a message: its text and HTML in
// characters, as LENGTH() counted them before bodies were packed.
func bodySize(text, html string) int {
	return utf8.RuneCountInString(text) + utf8.RuneCountInString(html)
}

// bodyTextPrefix is the text of a packed body cut to at most n characters.
func bodyTextPrefix(b []byte, n int) (string, error) {
	text, _, _, err := unpackBody(b, false)
	if err != nil {
		return "", err
	}
	for i := range text {
		if n == 0 {
			return text[:i], nil
		}
		n--
	}
	return text, nil
}
