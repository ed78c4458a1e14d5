package benchkit

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
)

// Server is an inboxd process a benchmark started, with a client of its API.
type Server struct {
	Cmd     *exec.Cmd
	SMTP    string // the SMTP listener's address
	API     *API
	logFile *os.File
}

var (
	// KeyPattern matches an account key as inboxd prints it.
	KeyPattern = regexp.MustCompile(`bze_[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}`)
	listenRE   = regexp.MustCompile(`listening on (\S+)`)
	smtpRE     = regexp.MustCompile(`SMTP listening on (\S+)`)
)

// StartServer starts bin serving dir/bench.db with an SMTP listener and dns as its DNS
// server, extra appended to its arguments; key is the API key to use when the server
// prints none (an existing database). Its log is dir/server.log.
func StartServer(bin, dir, dns, key string, extra []string) (*Server, error) {
	return StartServerOn(bin, dir, filepath.Join(dir, "bench.db"), dns, key, extra)
}

// StartServerOn is StartServer on the database db (a file or a postgres:// URL); several
// processes on one PostgreSQL database each get a dir of their own for their log and
// --data-dir.
func StartServerOn(bin, dir, db, dns, key string, extra []string) (*Server, error) {
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--db", db, "--http", "127.0.0.1:0", "--smtp", "127.0.0.1:0",
		"--domain", "inboxd.test", "--dns", dns}, extra...)
	cmd := exec.Command(bin, args...)
	DieWithParent(cmd)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Cmd: cmd, logFile: logf, API: &API{Key: key, HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}}
	sc := bufio.NewScanner(out)
	deadline := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	for sc.Scan() {
		line := sc.Text()
		if k := KeyPattern.FindString(line); k != "" {
			s.API.Key = k
		}
		if m := smtpRE.FindStringSubmatch(line); m != nil {
			s.SMTP = m[1]
			break
		}
		if m := listenRE.FindStringSubmatch(line); m != nil {
			s.API.Base = "http://" + m[1]
		}
	}
	deadline.Stop()
	go io.Copy(io.Discard, out)
	if s.SMTP == "" || s.API.Base == "" || s.API.Key == "" {
		s.Stop()
		return nil, fmt.Errorf("server did not start; see %s", logf.Name())
	}
	return s, nil
}

// Stop asks the server to stop (SIGTERM), kills it after 20 s, and waits for it.
func (s *Server) Stop() {
	s.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.Cmd.Process.Kill()
		<-done
	}
	s.logFile.Close()
}
