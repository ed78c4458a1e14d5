package protect

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	qt "github.com/frankban/quicktest"
)

// zipOf builds a zip archive of the named files.
func zipOf(t *testing.T, files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(name)
		qt.Assert(t, err, qt.IsNil)
		w.Write(content)
	}
	qt.Assert(t, zw.Close(), qt.IsNil)
	return buf.Bytes()
}

// encryptedZip is a zip whose one entry has the "encrypted" flag (traditional PKWARE
// encryption) set, as a password-protected archive has.
func encryptedZip(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "secret.exe", Method: zip.Store, Flags: 0x1,
		CRC32: 0, CompressedSize64: 12, UncompressedSize64: 0})
	qt.Assert(t, err, qt.IsNil)
	w.Write([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c"))
	qt.Assert(t, zw.Close(), qt.IsNil)
	return buf.Bytes()
}

// bomb is a zip of n entries that each inflate to size zero bytes, compressed once and
// stored n times: a few hundred kilobytes that expand to n*size.
func bomb(t *testing.T, n int, size int64) []byte {
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestCompression)
	crc := crc32.NewIEEE()
	zero := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zero)) {
		chunk := zero[:min(int64(len(zero)), left)]
		fw.Write(chunk)
		crc.Write(chunk)
	}
	fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		w, err := zw.CreateRaw(&zip.FileHeader{Name: "zeros" + string(rune('a'+i%26)) + ".bin", Method: zip.Deflate,
			CRC32: crc.Sum32(), CompressedSize64: uint64(comp.Len()), UncompressedSize64: uint64(size)})
		qt.Assert(t, err, qt.IsNil)
		w.Write(comp.Bytes())
	}
	qt.Assert(t, zw.Close(), qt.IsNil)
	return buf.Bytes()
}

func avScan(t *testing.T, s *Scanner, files ...File) *Verdict {
	t.Helper()
	v, err := s.Scan(context.Background(), Input{Raw: message("a@b.example", "files", "see attached"), Attachments: files})
	qt.Assert(t, err, qt.IsNil)
	checkConsistent(t, v.Protection)
	return v
}

func TestBuiltinAntivirus(t *testing.T) {
	eicarZip := zipOf(t, map[string][]byte{"readme.txt": []byte("hello"), "eicar.com": []byte(EICAR)})
	tests := []struct {
		name    string
		files   []File
		status  string
		sigs    []string
		reasons []string
	}{
		{"clean", []File{{Filename: "notes.txt", Content: []byte("just text")}}, AVClean, []string{}, []string{}},
		{"EICAR attachment", []File{{Filename: "eicar.com", Content: []byte(EICAR + "\r\n")}}, AVInfected, []string{EICARSignature}, []string{ReasonMalware}},
		{"EICAR in a zip", []File{{Filename: "docs.zip", Content: eicarZip}}, AVInfected, []string{EICARSignature}, []string{ReasonMalware}},
		{"EICAR in a zip in a zip", []File{{Filename: "outer.zip", ContentType: "application/zip",
			Content: zipOf(t, map[string][]byte{"inner.zip": eicarZip})}}, AVInfected, []string{EICARSignature}, []string{ReasonMalware}},
		{"zip named otherwise", []File{{Filename: "photo.jpg", Content: eicarZip}}, AVInfected, []string{EICARSignature}, []string{ReasonMalware}},
		{"clean zip", []File{{Filename: "docs.zip", Content: zipOf(t, map[string][]byte{"a.txt": []byte("a"), "dir/": nil})}}, AVClean, []string{}, []string{}},
		{"encrypted zip", []File{{Filename: "secret.zip", Content: encryptedZip(t)}}, AVUnscannable, []string{}, []string{ReasonScanIncomplete}},
		{"broken zip is scanned as bytes", []File{{Filename: "broken.zip", Content: []byte("PK\x03\x04 not really")}}, AVClean, []string{}, []string{}},
		{"infected wins over unscannable", []File{{Filename: "secret.zip", Content: encryptedZip(t)}, {Filename: "eicar.com", Content: []byte(EICAR)}},
			AVInfected, []string{EICARSignature}, []string{ReasonMalware}},
		{"too deep", []File{{Filename: "deep.zip", Content: zipOf(t, map[string][]byte{"1.zip": zipOf(t, map[string][]byte{"2.zip": zipOf(t, map[string][]byte{"3.zip": eicarZip})})})}},
			AVUnscannable, []string{}, []string{ReasonScanIncomplete}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			v := avScan(t, newScanner(t, Config{}), test.files...)
			qt.Assert(t, v.Protection.Antivirus.Status, qt.Equals, test.status, qt.Commentf("%v", v.Detail.AVNotes))
			qt.Assert(t, v.Protection.Antivirus.Signatures, qt.DeepEquals, test.sigs)
			qt.Assert(t, v.Protection.Reasons, qt.DeepEquals, test.reasons)
			qt.Assert(t, v.Detail.AVEngine, qt.Equals, "builtin")
		})
	}
}

// EICAR in the message body itself is found too.
func TestEICARInBody(t *testing.T) {
	s := newScanner(t, Config{})
	v, err := s.Scan(context.Background(), Input{Raw: message("a@b.example", "x", EICAR), Text: EICAR})
	qt.Assert(t, err, qt.IsNil)
	qt.Assert(t, v.Protection.Antivirus.Status, qt.Equals, AVInfected)
}

// A zip bomb (here 40 entries of 16 MiB of zeros: 640 MiB from a few hundred KiB) stops at
// the decompression budget: unscannable, held for review, in bounded time and memory.
func TestZipBomb(t *testing.T) {
	c := qt.New(t)
	b := bomb(t, 40, 16<<20)
	c.Assert(len(b) < 1<<20, qt.IsTrue)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	v := avScan(t, newScanner(t, Config{}), File{Filename: "bomb.zip", Content: b}, File{Filename: "bomb2.zip", Content: b})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	c.Assert(v.Protection.Antivirus.Status, qt.Equals, AVUnscannable)
	c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonScanIncomplete})
	c.Assert(strings.Join(v.Detail.AVNotes, "; "), qt.Contains, "beyond the scan limit")
	c.Assert(elapsed < 20*time.Second, qt.IsTrue, qt.Commentf("took %v", elapsed))
	allocated := after.TotalAlloc - before.TotalAlloc
	c.Assert(allocated < 48<<20, qt.IsTrue, qt.Commentf("allocated %d MiB", allocated>>20))
}

// A zip of more entries than the scan allows is unscannable.
func TestZipTooManyEntries(t *testing.T) {
	files := map[string][]byte{}
	for i := range maxArchiveEntries + 1 {
		files[strings.Repeat("x", 1+i%7)+string(rune('a'+i%26))+strings.Repeat("y", i/26)] = []byte("a")
	}
	v := avScan(t, newScanner(t, Config{}), File{Filename: "many.zip", Content: zipOf(t, files)})
	qt.Assert(t, v.Protection.Antivirus.Status, qt.Equals, AVUnscannable)
}

// fakeClamd speaks clamd's INSTREAM on a unix socket and on TCP. It answers FOUND for
// EICAR and for the marker VIRUS-MARKER (as "Win.Test.Marker"), ERROR past limit bytes,
// else OK.
func fakeClamd(t *testing.T, limit int) (unixAddr, tcpAddr string) {
	sock := filepath.Join(t.TempDir(), "clamd.sock")
	ul, err := net.Listen("unix", sock)
	qt.Assert(t, err, qt.IsNil)
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	t.Cleanup(func() { ul.Close(); tl.Close() })
	for _, ln := range []net.Listener{ul, tl} {
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go serveClamd(conn, limit)
			}
		}()
	}
	return "unix:" + sock, "tcp:" + tl.Addr().String()
}

func serveClamd(conn net.Conn, limit int) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	cmd, err := r.ReadString(0)
	if err != nil || cmd != "zINSTREAM\x00" {
		io.WriteString(conn, "UNKNOWN COMMAND\x00")
		return
	}
	var data []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(size[:])
		if n == 0 {
			break
		}
		if len(data)+int(n) > limit {
			io.WriteString(conn, "INSTREAM size limit exceeded. ERROR\x00")
			return
		}
		chunk := make([]byte, n)
		if _, err := io.ReadFull(r, chunk); err != nil {
			return
		}
		data = append(data, chunk...)
	}
	switch {
	case bytes.Contains(data, []byte("VIRUS-MARKER")):
		io.WriteString(conn, "stream: Win.Test.Marker FOUND\x00")
	case bytes.Contains(data, []byte(EICAR)):
		io.WriteString(conn, "stream: Eicar-Signature FOUND\x00")
	default:
		io.WriteString(conn, "stream: OK\x00")
	}
}

func TestClamdClient(t *testing.T) {
	unixAddr, tcpAddr := fakeClamd(t, 256<<10)
	for _, addr := range []string{unixAddr, tcpAddr} {
		t.Run(addr[:strings.IndexByte(addr, ':')], func(t *testing.T) {
			c := qt.New(t)
			s := newScanner(t, Config{Clamd: addr})
			scanRaw := func(body string, files ...File) *Verdict {
				v, err := s.Scan(context.Background(), Input{Raw: message("a@b.example", "x", body), Attachments: files})
				c.Assert(err, qt.IsNil)
				checkConsistent(t, v.Protection)
				c.Assert(v.Detail.AVEngine, qt.Equals, "builtin+clamd")
				return v
			}
			v := scanRaw("nothing to see")
			c.Assert(v.Protection.Antivirus.Status, qt.Equals, AVClean)

			// clamd finds what the built-in scanner does not know.
			v = scanRaw("carrying VIRUS-MARKER here")
			c.Assert(v.Protection.Antivirus.Signatures, qt.DeepEquals, []string{"Win.Test.Marker"})
			c.Assert(v.Protection.Reasons, qt.DeepEquals, []string{ReasonMalware})

			// Both find EICAR: the signatures are listed once each.
			v = scanRaw(EICAR, File{Filename: "eicar.com", Content: []byte(EICAR)})
			c.Assert(v.Protection.Antivirus.Signatures, qt.DeepEquals, []string{EICARSignature, "Eicar-Signature"})

			// clamd could not scan it: unscannable, scan_incomplete.
			v = scanRaw(strings.Repeat("long line of text\n", 20000))
			c.Assert(v.Protection.Antivirus.Status, qt.Equals, AVUnscannable)
			c.Assert(v.Detail.AVNotes, qt.DeepEquals, []string{"clamd: INSTREAM size limit exceeded. ERROR"})
		})
	}
}

// A configured clamd that is down or silent fails the scan with ErrUnavailable: the SMTP
// layer answers 451, and nothing is ever marked clean without being scanned.
func TestClamdUnavailable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	qt.Assert(t, err, qt.IsNil)
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, conn) // reads everything, never answers
		}
	}()
	for name, addr := range map[string]string{
		"no socket": "unix:" + filepath.Join(t.TempDir(), "missing.sock"),
		"silent":    "tcp:" + silent.Addr().String(),
	} {
		t.Run(name, func(t *testing.T) {
			s := newScanner(t, Config{Clamd: addr, ScannerTimeout: 500 * time.Millisecond})
			_, err := s.Scan(context.Background(), Input{Raw: message("a@b.example", "x", "hello")})
			qt.Assert(t, errors.Is(err, ErrUnavailable), qt.IsTrue, qt.Commentf("%v", err))
		})
	}
}

func TestScannerAddresses(t *testing.T) {
	for _, bad := range []Config{{Clamd: "clamd.sock"}, {Clamd: "tcp:localhost"}, {Clamd: "unix:"}, {Spamd: "localhost"}} {
		_, err := New(bad)
		qt.Assert(t, err, qt.Not(qt.IsNil), qt.Commentf("%+v", bad))
	}
	_, err := New(Config{Clamd: "tcp:127.0.0.1:3310", Spamd: "127.0.0.1:783"})
	qt.Assert(t, err, qt.IsNil)
}

func TestReasonsRule(t *testing.T) {
	tests := []struct {
		spf, dkim, dmarc string
		score            float64
		spamVerdict      bool
		av               string
		want             []string
	}{
		{Pass, Pass, Pass, 0, false, AVClean, []string{}},
		{Pass, Pass, Pass, 6, false, AVClean, []string{ReasonSpam}},
		{Pass, Pass, Pass, 5.9, false, AVClean, []string{}},
		{Pass, Pass, Pass, 1, true, AVClean, []string{ReasonSpam}},
		{Fail, None, None, 0, false, AVClean, []string{ReasonAuthentication}},
		{Fail, Pass, None, 0, false, AVClean, []string{}},
		{Fail, None, Pass, 0, false, AVClean, []string{}},
		{Pass, Pass, Fail, 0, false, AVClean, []string{ReasonAuthentication}},
		{TempError, TempError, TempError, 0, false, AVClean, []string{}},
		{Fail, Fail, Fail, 99, false, AVInfected, []string{ReasonMalware, ReasonSpam, ReasonAuthentication}},
		{Pass, Pass, Pass, 0, false, AVUnscannable, []string{ReasonScanIncomplete}},
	}
	for _, test := range tests {
		got := Reasons(dbAuth(test.spf, test.dkim, test.dmarc), dbSpam(test.score), test.spamVerdict, dbAV(test.av))
		qt.Assert(t, got, qt.DeepEquals, test.want, qt.Commentf("%+v", test))
	}
}
