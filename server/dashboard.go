package server

import (
	"bytes"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/inboxd/inboxd/db"
)

// The quarantine review dashboard at /dashboard/: server-rendered HTML, embedded assets, no
// script at all. A person logs in, sees the quarantined messages of every account and
// inbox, reads one (headers and text shown as escaped text; HTML never rendered, nothing
// remote fetched), and releases or deletes it. Every action is in the audit log.

//go:embed dashboard/templates/*.html dashboard/static/*
var dashboardFiles embed.FS

// dashboardCSP allows the page its own stylesheet and nothing else: no script, no remote
// image, no frame, no form posting elsewhere.
const dashboardCSP = "default-src 'self'; script-src 'none'; object-src 'none'; img-src 'self'; style-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type dashboard struct {
	s        *Server
	pages    map[string]*template.Template
	static   http.Handler
	throttle *throttle     // login attempts per client (dashboard_throttle.go)
	checks   chan struct{} // password checks under way, at most loginChecks
	logins   loginCounts   // for /metrics
	secure   bool          // cookies only over HTTPS (the base URL is https)

	dummyOnce sync.Once
	dummyHash []byte // compared against when no password is stored

	proxyWarning sync.Once // logged at the first login through a proxy that is not trusted
}

func newDashboard(s *Server) (*dashboard, error) {
	d := &dashboard{s: s, pages: map[string]*template.Template{}, secure: strings.HasPrefix(s.cfg.BaseURL, "https://")}
	d.throttle = &throttle{store: s.store, now: s.now}
	d.checks = make(chan struct{}, loginChecks)
	funcs := template.FuncMap{
		"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"score": func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) },
		"join":  strings.Join,
		"bytes": humanBytes,
		"query": func(kv ...string) string {
			v := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					v.Set(kv[i], kv[i+1])
				}
			}
			if len(v) == 0 {
				return ""
			}
			return "?" + v.Encode()
		},
		"resultClass": func(r string) string {
			switch r {
			case "pass", "clean":
				return "good"
			case "fail", "infected", "quarantined":
				return "bad"
			}
			return "meh"
		},
	}
	for _, page := range []string{"login", "queue", "message", "audit", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(dashboardFiles, "dashboard/templates/layout.html", "dashboard/templates/"+page+".html")
		if err != nil {
			return nil, err
		}
		d.pages[page] = t
	}
	static, err := fs.Sub(dashboardFiles, "dashboard/static")
	if err != nil {
		return nil, err
	}
	d.static = http.StripPrefix("/dashboard/static/", http.FileServer(http.FS(static)))
	return d, nil
}

func (d *dashboard) register(r *httprouter.Router) {
	r.GET("/dashboard", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		http.Redirect(w, req, "/dashboard/", http.StatusSeeOther)
	})
	r.GET("/dashboard/", d.page(d.handleQueue, true))
	r.GET("/dashboard/login", d.page(d.handleLoginForm, false))
	r.POST("/dashboard/login", d.page(d.handleLogin, false))
	r.POST("/dashboard/logout", d.page(d.handleLogout, true))
	r.GET("/dashboard/messages/:id", d.page(d.handleMessage, true))
	r.POST("/dashboard/messages/:id/release", d.page(d.handleRelease, true))
	r.POST("/dashboard/messages/:id/delete", d.page(d.handleDelete, true))
	r.GET("/dashboard/audit", d.page(d.handleAudit, true))
	r.GET("/dashboard/static/*file", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		securityHeaders(w.Header())
		w.Header().Set("Cache-Control", "public, max-age=3600")
		d.static.ServeHTTP(w, req)
	})
}

func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: with no-referrer browsers send "Origin: null" on the
	// page's own forms. No page links elsewhere anyway.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// request is one dashboard request: its session, when logged in.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	ps   httprouter.Params
	sess *session
}

type pageHandler func(q *request) error

// page adapts a handler: security headers, the session (a page that needs one sends
// strangers to the login form), CSRF and origin checks on every POST, and errors shown as
// an error page.
func (d *dashboard) page(h pageHandler, needSession bool) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		securityHeaders(w.Header())
		q := &request{w: w, r: r, ps: ps}
		if c, err := r.Cookie(sessionCookie); err == nil {
			sess, err := d.session(r.Context(), c.Value)
			if err != nil {
				d.failErr(q, err)
				return
			}
			q.sess = sess
		}
		if needSession && q.sess == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/dashboard/login", http.StatusSeeOther)
				return
			}
			d.fail(q, http.StatusForbidden, "forbidden", "Your session has ended. Log in again.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if err := r.ParseForm(); err != nil {
				d.fail(q, http.StatusBadRequest, "invalid_request", "The form could not be read.")
				return
			}
			if !d.sameOrigin(r) {
				d.fail(q, http.StatusForbidden, "forbidden", "The form came from another site.")
				return
			}
			if q.sess != nil && !equalTokens(r.PostForm.Get("csrf"), q.sess.csrf) {
				d.fail(q, http.StatusForbidden, "forbidden", "The form has expired. Go back, reload the page and try again.")
				return
			}
		}
		if err := h(q); err != nil {
			d.failErr(q, err)
		}
	}
}

// sameOrigin refuses a POST that a browser says came from another site: by Origin (sent
// by every current browser), else by Sec-Fetch-Site, else by Referer. The CSRF token is
// the real check; this one costs nothing.
func (d *dashboard) sameOrigin(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		return d.ours(r, origin)
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return false
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		return d.ours(r, ref)
	}
	return true // not told (a privacy setting): the token decides
}

// ours reports whether a URL (an Origin or a Referer) is of this server: the host r was
// sent to, or that of the base URL.
func (d *dashboard) ours(r *http.Request, raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	base, err := url.Parse(d.s.cfg.BaseURL)
	return err == nil && strings.EqualFold(u.Host, base.Host)
}

func (d *dashboard) render(q *request, status int, page string, data map[string]any) error {
	if data == nil {
		data = map[string]any{}
	}
	if q.sess != nil {
		data["Session"] = q.sess
		data["CSRF"] = q.sess.csrf
		data["Operator"] = q.sess.operator
	}
	var buf bytes.Buffer
	if err := d.pages[page].Execute(&buf, data); err != nil {
		return err
	}
	h := q.w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	q.w.WriteHeader(status)
	q.w.Write(buf.Bytes())
	return nil
}

func (d *dashboard) fail(q *request, status int, code, message string) {
	if err := d.render(q, status, "error", map[string]any{"Status": status, "Code": code, "Message": message}); err != nil {
		d.s.log.Error("dashboard: render error page", "err", err)
		http.Error(q.w, message, status)
	}
}

func (d *dashboard) failErr(q *request, err error) {
	var e *db.Error
	if errors.As(err, &e) {
		switch e.Code {
		case db.ECodeNotFound:
			d.fail(q, http.StatusNotFound, e.Code, e.Message)
			return
		case db.ECodeMalwareBlocked:
			d.fail(q, http.StatusForbidden, e.Code, e.Message)
			return
		case db.ECodeInvalidArgument:
			d.fail(q, http.StatusUnprocessableEntity, e.Code, e.Message)
			return
		case db.ECodeUnavailable:
			d.fail(q, http.StatusServiceUnavailable, e.Code, e.Message)
			return
		}
	}
	d.s.log.Error("dashboard: request failed", "method", q.r.Method, "path", q.r.URL.EscapedPath(), "err", err)
	d.fail(q, http.StatusInternalServerError, db.ECodeInternal, "Something went wrong; the server log has the details.")
}

func (d *dashboard) actor(q *request) db.Actor {
	name := ""
	if q.sess != nil {
		name = q.sess.operator
	}
	return db.Actor{Name: name, Remote: d.remote(q.r)}
}

func (d *dashboard) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/dashboard/", MaxAge: maxAge, HttpOnly: true,
		Secure: d.secure, SameSite: http.SameSiteStrictMode}
}

// GET /dashboard/login
func (d *dashboard) handleLoginForm(q *request) error {
	if q.sess != nil {
		http.Redirect(q.w, q.r, "/dashboard/", http.StatusSeeOther)
		return nil
	}
	return d.loginPage(q, http.StatusOK, "")
}

func (d *dashboard) loginPage(q *request, status int, problem string) error {
	// One token per browser, so that two open login tabs both work.
	token := ""
	if c, err := q.r.Cookie(loginCookie); err == nil && tokenPattern.MatchString(c.Value) {
		token = c.Value
	} else {
		token = randomToken()
	}
	http.SetCookie(q.w, d.cookie(loginCookie, token, 3600))
	return d.render(q, status, "login", map[string]any{"LoginCSRF": token, "Problem": problem})
}

// POST /dashboard/login
//
// The attempt is counted before the password is checked, and the check waits (briefly) for
// its turn: dashboard_throttle.go.
func (d *dashboard) handleLogin(q *request) error {
	ctx := q.r.Context()
	c, err := q.r.Cookie(loginCookie)
	if err != nil || !equalTokens(q.r.PostForm.Get("csrf"), c.Value) {
		return d.loginPage(q, http.StatusForbidden, "The login form expired. Please try again.")
	}
	addr := d.s.clientAddr(q.r)
	d.warnUntrustedProxy(q.r)
	key := clientKey(addr)
	no, err := d.throttle.reserve(ctx, key)
	if err != nil {
		return err
	}
	if no.wait > 0 {
		return d.loginRefused(q, addr, no)
	}
	ok, checked, err := d.checkBounded(ctx, q.r.PostForm.Get("password"))
	if ferr := d.throttle.finish(ctx, key, outcomeOf(ok, checked)); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	remote := remoteText(addr, q.r)
	switch {
	case !checked:
		return d.loginBusy(q)
	case !ok:
		d.logins.wrong.Add(1)
		if err := d.s.store.Audit(ctx, db.AuditEntry{Actor: Operator, Action: "login_failed", Remote: remote}); err != nil {
			return err
		}
		return d.loginPage(q, http.StatusUnauthorized, "Wrong password.")
	}
	d.logins.ok.Add(1)
	token, err := d.startSession(ctx, Operator)
	if err != nil {
		return err
	}
	if err := d.s.store.Audit(ctx, db.AuditEntry{Actor: Operator, Action: "login", Remote: remote}); err != nil {
		return err
	}
	http.SetCookie(q.w, d.cookie(loginCookie, "", -1))
	http.SetCookie(q.w, d.cookie(sessionCookie, token, int(sessionLifetime.Seconds())))
	http.Redirect(q.w, q.r, "/dashboard/", http.StatusSeeOther)
	return nil
}

// loginRefused answers an attempt the throttle refused: 429 with how long to wait. The
// audit log gets one row per address and wait, not one per attempt: a flood of refused
// attempts must not become a flood of writes (/metrics counts every one).
func (d *dashboard) loginRefused(q *request, addr netip.Addr, no refusal) error {
	d.logins.limited.Add(1)
	if no.report {
		d.s.store.Audit(q.r.Context(), db.AuditEntry{Actor: Operator, Action: "login_limited", Remote: remoteText(addr, q.r),
			Detail: "told to wait " + waitText(no.wait)})
	}
	q.w.Header().Set("Retry-After", retryAfter(no.wait))
	return d.loginPage(q, http.StatusTooManyRequests,
		"Too many failed attempts from your address. Try again in "+waitText(no.wait)+".")
}

// loginBusy answers an attempt whose password was not checked because no check came free
// in time: 503, come back in a few seconds. It did not count against the address.
func (d *dashboard) loginBusy(q *request) error {
	d.logins.busy.Add(1)
	q.w.Header().Set("Retry-After", retryAfter(loginBusyRetry))
	return d.loginPage(q, http.StatusServiceUnavailable,
		"Many logins are being checked right now. Try again in "+waitText(loginBusyRetry)+".")
}

// warnUntrustedProxy tells the operator, once, when logins come with X-Forwarded-For
// from a peer that is not a --trusted-proxy: if that peer is their reverse proxy, every
// client behind it shares one login throttle and the audit log names the proxy.
func (d *dashboard) warnUntrustedProxy(r *http.Request) {
	if r.Header.Get("X-Forwarded-For") == "" || d.s.trusted(parseHostAddr(r.RemoteAddr)) {
		return
	}
	d.proxyWarning.Do(func() {
		d.s.log.Warn("dashboard login with X-Forwarded-For from a peer that is not a trusted proxy: the header is ignored; "+
			"if the peer is your reverse proxy, name it with --trusted-proxy, or every client behind it shares one login throttle",
			"peer", remoteText(parseHostAddr(r.RemoteAddr), r))
	})
}

// remote is the client address the audit log records for r.
func (d *dashboard) remote(r *http.Request) string { return remoteText(d.s.clientAddr(r), r) }

// POST /dashboard/logout
func (d *dashboard) handleLogout(q *request) error {
	if c, err := q.r.Cookie(sessionCookie); err == nil {
		if err := d.s.store.EndDashboardSession(q.r.Context(), tokenHash(c.Value)); err != nil {
			return err
		}
	}
	http.SetCookie(q.w, d.cookie(sessionCookie, "", -1))
	if err := d.s.store.Audit(q.r.Context(), db.AuditEntry{Actor: q.sess.operator, Action: "logout", Remote: d.remote(q.r)}); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/dashboard/login", http.StatusSeeOther)
	return nil
}

var flashes = map[string]string{
	"released": "Released: the message is in its inbox now, labelled received and unread.",
	"already":  "That message was not in quarantine any more: nothing changed.",
	"deleted":  "Deleted for good.",
}

// GET /dashboard/?account=&inbox=&before=
func (d *dashboard) handleQueue(q *request) error {
	ctx := q.r.Context()
	v := q.r.URL.Query()
	f := db.QuarantineFilter{AccountID: v.Get("account"), Inbox: v.Get("inbox"), Before: v.Get("before"), Limit: 50}
	items, next, err := d.s.store.ListQuarantined(ctx, f)
	if err != nil {
		return err
	}
	counts, err := d.s.store.QuarantineCounts(ctx)
	if err != nil {
		return err
	}
	type account struct {
		ID      string
		Total   int
		Inboxes []db.QuarantineCount
	}
	var accounts []*account
	total := 0
	for _, c := range counts {
		if len(accounts) == 0 || accounts[len(accounts)-1].ID != c.AccountID {
			accounts = append(accounts, &account{ID: c.AccountID})
		}
		a := accounts[len(accounts)-1]
		a.Total += c.Count
		a.Inboxes = append(a.Inboxes, c)
		total += c.Count
	}
	return d.render(q, http.StatusOK, "queue", map[string]any{
		"Items": items, "Next": next, "Filter": f, "Accounts": accounts, "Total": total,
		"Flash": flashes[v.Get("done")],
	})
}

var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func messageUUID(q *request) (string, error) {
	id := q.ps.ByName("id")
	if !uuidPattern.MatchString(id) {
		return "", db.Errorf(db.ECodeNotFound, "no such message")
	}
	return id, nil
}

// GET /dashboard/messages/:id
func (d *dashboard) handleMessage(q *request) error {
	ctx := q.r.Context()
	id, err := messageUUID(q)
	if err != nil {
		return err
	}
	m, err := d.s.store.ReviewMessage(ctx, id)
	if err != nil {
		return err
	}
	if m.Quarantined && !isHead(q.r) {
		// Reading held mail is itself worth a line in the log; a HEAD reads nothing.
		if err := d.s.store.Audit(ctx, db.AuditEntry{Actor: q.sess.operator, Action: "view", AccountID: m.AccountID,
			Inbox: m.Inbox, MessageID: m.MessageID, Remote: d.remote(q.r)}); err != nil {
			return err
		}
	}
	detail := m.Detail
	if detail == nil {
		detail = &db.ProtectionDetail{}
	}
	return d.render(q, http.StatusOK, "message", map[string]any{
		"M": m, "P": m.Protection, "D": detail,
		"Releasable": m.Quarantined && m.Protection.Antivirus.Status == "clean",
		"OverBy":     m.Protection.Spam.Score >= m.Protection.Spam.Threshold,
	})
}

// POST /dashboard/messages/:id/release
func (d *dashboard) handleRelease(q *request) error {
	id, err := messageUUID(q)
	if err != nil {
		return err
	}
	released, err := db.ReleaseMessage(q.r.Context(), d.s.store, id, d.actor(q))
	if err != nil {
		return err
	}
	done := "released"
	if !released {
		done = "already"
	}
	http.Redirect(q.w, q.r, "/dashboard/?done="+done, http.StatusSeeOther)
	return nil
}

// POST /dashboard/messages/:id/delete
func (d *dashboard) handleDelete(q *request) error {
	id, err := messageUUID(q)
	if err != nil {
		return err
	}
	if err := db.DeleteQuarantined(q.r.Context(), d.s.store, id, d.actor(q)); err != nil {
		return err
	}
	http.Redirect(q.w, q.r, "/dashboard/?done=deleted", http.StatusSeeOther)
	return nil
}

// GET /dashboard/audit?before=
func (d *dashboard) handleAudit(q *request) error {
	before, _ := strconv.ParseInt(q.r.URL.Query().Get("before"), 10, 64)
	entries, err := d.s.store.AuditLog(q.r.Context(), 100, before)
	if err != nil {
		return err
	}
	next := ""
	if len(entries) == 100 {
		next = strconv.FormatInt(entries[len(entries)-1].ID, 10)
	}
	return d.render(q, http.StatusOK, "audit", map[string]any{"Entries": entries, "Next": next})
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
