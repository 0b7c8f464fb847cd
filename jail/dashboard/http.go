package dashboard

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jailsh/jail/jail/control"
)

//go:embed assets
var assets embed.FS

// CookieName is the dashboard's session cookie.
const CookieName = "jail_dashboard"

// CSRFHeader must carry the page's CSRF value on every POST.
const CSRFHeader = "X-Jail-CSRF"

// maxBody caps a POST body.
const maxBody = 16 << 10

var page = template.Must(template.ParseFS(assets, "assets/index.html"))

// Handler is the dashboard's HTTP handler: every route behind the Host
// check, every route but the token exchange behind the cookie.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /assets/{name}", s.asset)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("POST /api/answer", s.answer)
	mux.HandleFunc("POST /api/rule", s.rule)
	return s.guard(mux)
}

// guard sets the security headers and refuses what is not for this
// dashboard: another Host, no cookie, and on POST no CSRF value, a
// foreign Origin or a body that is not JSON.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !s.hostOK(r.Host) {
			http.Error(w, "dashboard: wrong Host", http.StatusMisdirectedRequest)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/" && r.URL.Query().Has("token") {
			s.exchange(w, r)
			return
		}
		if !s.cookieOK(r) {
			http.Error(w, "dashboard: open the URL jail dashboard printed", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := s.postOK(r); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostOK: the Host header names this dashboard's loopback address, so a
// page on a rebound DNS name cannot reach it.
func (s *Server) hostOK(host string) bool {
	p := strconv.Itoa(s.port)
	return host == "127.0.0.1:"+p || host == "localhost:"+p
}

// exchange trades the URL's token for the session cookie and takes the
// token out of the address bar.
func (s *Server) exchange(w http.ResponseWriter, r *http.Request) {
	if !same(r.URL.Query().Get("token"), s.token) {
		http.Error(w, "dashboard: wrong token", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.cookie, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
	// A page that moves on to / itself rather than a redirect: the
	// navigation it starts comes from the dashboard's own origin, so the
	// SameSite=Strict cookie goes with it even when the URL was opened
	// from another site or from a local file, as jail dashboard --open
	// does; a redirect would carry on the first navigation's site.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, exchangePage)
}

// exchangePage replaces the token's address with / once the cookie is
// set.
const exchangePage = `<!DOCTYPE html>
<meta charset="utf-8">
<meta http-equiv="refresh" content="0;url=/">
<title>jail dashboard</title>
<a href="/">jail dashboard</a>
`

// cookieOK: the request carries the session cookie.
func (s *Server) cookieOK(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	return err == nil && same(c.Value, s.cookie)
}

// postOK checks what a state-changing request must carry besides the
// cookie.
func (s *Server) postOK(r *http.Request) error {
	if !same(r.Header.Get(CSRFHeader), s.csrf) {
		return fmt.Errorf("dashboard: missing or wrong %s header", CSRFHeader)
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return fmt.Errorf("dashboard: foreign Origin %q", o)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return fmt.Errorf("dashboard: the body must be application/json")
	}
	return nil
}

// same compares two secrets in constant time.
func same(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// index serves the page, with the CSRF value in it.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page.Execute(w, map[string]string{"CSRF": s.csrf})
}

// asset serves the page's script and style.
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil || name == "index.html" {
		http.NotFound(w, r)
		return
	}
	if ct := mime.TypeByExtension(name[strings.LastIndexByte(name, '.'):]); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Write(b)
}

// events streams every Event as JSON, a snapshot first.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "dashboard: no streaming", http.StatusInternalServerError)
		return
	}
	ch, cancel := s.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	for _, e := range s.snapshot() {
		sendEvent(w, e)
	}
	fmt.Fprint(w, "event: ready\ndata: {}\n\n")
	fl.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-ch:
			sendEvent(w, e)
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		}
		fl.Flush()
	}
}

// sendEvent writes one server-sent event.
func sendEvent(w http.ResponseWriter, e control.Event) {
	b, err := json.Marshal(e)
	if err == nil {
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
}

// answerBody is the body of POST /api/answer.
type answerBody struct {
	Session string `json:"session"`
	ID      string `json:"id"`
	Allow   bool   `json:"allow"`
	Scope   string `json:"scope"`
}

// ruleBody is the body of POST /api/rule; Session "" means every session.
type ruleBody struct {
	Session string `json:"session"`
	Allow   bool   `json:"allow"`
	Host    string `json:"host"`
	Scope   string `json:"scope"`
}

// answer answers a held request of one session.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var b answerBody
	if !decode(w, r, &b) {
		return
	}
	if !validScope(b.Scope, true) || b.ID == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "dashboard: answer needs an id and a scope of once, session, project or user"})
		return
	}
	c := s.client(b.Session)
	if c == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "dashboard: no such session"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	reply(w, c.Answer(ctx, b.ID, control.Answer{Allow: b.Allow, Scope: b.Scope, By: "dashboard"}))
}

// rule adds a rule to one session or to every session.
func (s *Server) rule(w http.ResponseWriter, r *http.Request) {
	var b ruleBody
	if !decode(w, r, &b) {
		return
	}
	if !validScope(b.Scope, false) || !validHost(b.Host) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "dashboard: rule needs a host and a scope of session, project or user"})
		return
	}
	cs := s.all()
	if b.Session != "" {
		cs = nil
		if c := s.client(b.Session); c != nil {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "dashboard: no such session"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	for _, c := range cs {
		if err := c.Rule(ctx, b.Allow, b.Host, b.Scope); err != nil {
			reply(w, err)
			return
		}
	}
	reply(w, nil)
}

// decode reads a small JSON body into v, refusing unknown fields.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	d := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "dashboard: bad body: " + err.Error()})
		return false
	}
	return true
}

// reply answers a POST with ok or the error.
func reply(w http.ResponseWriter, err error) {
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// validScope: once only for answers.
func validScope(scope string, once bool) bool {
	switch scope {
	case control.ScopeSession, control.ScopeProject, control.ScopeUser:
		return true
	case control.ScopeOnce:
		return once
	}
	return false
}

// validHost: a host pattern of at most 253 characters, printable, no
// spaces.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, r := range h {
		if r <= ' ' || r == 0x7f || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
