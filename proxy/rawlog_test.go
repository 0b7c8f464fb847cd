package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Learning reads the log to propose allow entries, and a raw stream needs
// one with its port even on 80 or 443: the log marks every raw stream,
// relayed or refused, and nothing else (a plain HTTP request on 80).
func TestRawStreamsMarkedInTheLog(t *testing.T) {
	t.Parallel()
	db := newLineServer(t, "")
	refusedSrv := newLineServer(t, "")
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "web") }))
	t.Cleanup(web.Close)
	e := newEnv(t, Config{Rules: Rules{
		Allow: []string{"db.test:" + db.port(), "any.test", "web.test"},
		Hosts: map[string]string{"db.test": db.addr, "any.test": refusedSrv.addr, "web.test": strings.TrimPrefix(web.URL, "http://")},
	}})

	c, br := openRaw(t, e, "CONNECT", "db.test", db.port(), "")
	io.WriteString(c, "PING\r\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo: PING\r\n" {
		t.Fatalf("raw stream allowed with its port: %q, %v", line, err)
	}
	c.Close()
	en := e.entry(t, func(x Entry) bool { return x.Host == "db.test" })
	if !en.Raw || en.Verdict != verdictAllow {
		t.Errorf("a relayed raw stream: logged %+v, want allow and raw", en)
	}

	c, br = openRaw(t, e, "CONNECT", "any.test", "443", "")
	io.WriteString(c, "PING\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, _ := br.ReadString('\n'); !strings.Contains(line, `add "any.test:443"`) {
		t.Errorf("a raw stream to a host allowed without the port: %q", line)
	}
	en = e.entry(t, func(x Entry) bool { return x.Host == "any.test" })
	if !en.Raw || en.Verdict != verdictDeny {
		t.Errorf("a refused raw stream: logged %+v, want deny and raw", en)
	}

	resp, err := e.client().Get("http://web.test/page")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	en = e.entry(t, func(x Entry) bool { return x.Host == "web.test" })
	if en.Raw || en.Verdict != verdictAllow || en.Path != "/page" {
		t.Errorf("a plain HTTP request: logged %+v, want allow and not raw", en)
	}
	b, err := EntryJSON(en)
	if err != nil || strings.Contains(string(b), `"raw"`) {
		t.Errorf("an entry that is not a raw stream carries a raw field: %s (%v)", b, err)
	}
}
