package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkIntercept compares HTTPS through the intercepting proxy with
// the same requests made directly, in one run (target: ≤ 1 ms added
// median latency per keep-alive request, ≥ 50 % of direct throughput).
//
//	go test -run '^$' -bench Intercept ./proxy/
func BenchmarkIntercept(b *testing.B) {
	upCA := memCA(b)
	chunk := make([]byte, 64<<10)
	up := newUpstream(b, upCA, func(w http.ResponseWriter, r *http.Request) {
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for size > 0 {
			n, err := w.Write(chunk[:min(size, len(chunk))])
			if err != nil {
				return
			}
			size -= n
		}
	})
	e := newEnv(b, Config{
		Rules:    Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}},
		Upstream: &tls.Config{RootCAs: pool(upCA)},
	})
	direct := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, up.addr())
		},
		TLSClientConfig: &tls.Config{RootCAs: pool(upCA)},
	}}
	proxied := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.httpAddr}),
		TLSClientConfig: &tls.Config{RootCAs: pool(e.ca)},
	}}
	fetch := func(c *http.Client, size int) (time.Duration, int64) {
		start := time.Now()
		resp, err := c.Get("https://allowed.test/?size=" + strconv.Itoa(size))
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(size) {
			b.Fatalf("read %d of %d bytes: %v", n, size, err)
		}
		return time.Since(start), n
	}

	b.Run("latency", func(b *testing.B) {
		fetch(direct, 100) // connections and certificates are set up once,
		fetch(proxied, 100)
		var d, p []time.Duration
		for b.Loop() {
			t, _ := fetch(direct, 100)
			d = append(d, t)
			t, _ = fetch(proxied, 100)
			p = append(p, t)
		}
		dm, pm := median(d), median(p)
		b.ReportMetric(float64(dm.Microseconds()), "direct-µs")
		b.ReportMetric(float64(pm.Microseconds()), "proxied-µs")
		b.ReportMetric(float64((pm - dm).Microseconds()), "added-µs")
	})
	b.Run("download-256MB", func(b *testing.B) {
		const size = 256 << 20
		var d, p time.Duration
		for b.Loop() {
			t, _ := fetch(direct, size)
			d += t
			t, _ = fetch(proxied, size)
			p += t
		}
		b.ReportMetric(float64(size)*float64(b.N)/d.Seconds()/1e6, "direct-MB/s")
		b.ReportMetric(float64(size)*float64(b.N)/p.Seconds()/1e6, "proxied-MB/s")
		b.ReportMetric(100*d.Seconds()/p.Seconds(), "%-of-direct")
	})
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkInject compares keep-alive HTTPS requests that carry
// placeholders in header fields (x-api-key, Authorization) and a JSON
// body of 2, 8 and 20 KiB (a prompt with code in it, and a placeholder the
// binding keeps out of bodies) through a proxy that injects the secrets
// with the same requests through a proxy without secrets, in one run
// (target: ≤ 0.1 ms added median latency). What is measured includes the
// search for every spelling of every real value in the header fields,
// the URL and the body, and the redaction of the JSON response. Each
// iteration is 100 pairs of requests, so that the medians mean something
// at -benchtime 1x.
//
//	go test -run '^$' -bench Inject ./proxy/
func BenchmarkInject(b *testing.B) {
	upCA := memCA(b)
	const keyVal, tokVal = "sk-ant-api03-0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789abcdefghijkl-AAAAA", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	const keyPh, tokPh = "sk-ant-api03-jail456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789abcdefghijkl-AAAAA", "ghp_jailx9y8z7w6v5u4t3s2r1q0p9o8n7m6l5k4"
	reply := `{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"` +
		strings.Repeat("Here is the change you asked for, with a test. ", 16) + `"}],"stop_reason":"end_turn","usage":{"input_tokens":2095,"output_tokens":503}}`
	up := newUpstream(b, upCA, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	})
	rules := Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}}
	secrets := []Secret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: keyPh, Value: keyVal, Hosts: []string{"allowed.test"}, Inject: []string{"header:x-api-key", "header:Authorization"}},
		{Name: "GITHUB_TOKEN", Placeholder: tokPh, Value: tokVal, Hosts: []string{"allowed.test"}, Inject: []string{"header:Authorization"}},
		{Name: "DATABASE_URL", Placeholder: "jail-secret-DATABASE_URL-q1w2e3r4t5y6u7i8", Value: "pg-passw0rd-hunter2", Hosts: []string{"db.test"}},
	}
	plainEnv := newEnv(b, Config{Rules: rules, Upstream: &tls.Config{RootCAs: pool(upCA)}})
	injEnv := newEnv(b, Config{Rules: rules, Upstream: &tls.Config{RootCAs: pool(upCA)}, Secrets: secrets})
	client := func(e *env) *http.Client {
		return &http.Client{Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.httpAddr}),
			TLSClientConfig: &tls.Config{RootCAs: pool(e.ca)},
		}}
	}
	plain, inj := client(plainEnv), client(injEnv)
	fetch := func(c *http.Client, body string) time.Duration {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest("POST", "https://allowed.test/v1/messages?beta=true", r)
		req.Header.Set("x-api-key", keyPh)
		req.Header.Set("Authorization", "Bearer "+tokPh)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("User-Agent", "claude-cli/2.0 (external, cli)")
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		return time.Since(start)
	}
	fetch(plain, "") // connections and certificates are set up once
	fetch(inj, "")
	up.mu.Lock()
	if got := up.last.Header.Get("X-Api-Key"); got != keyVal {
		b.Fatalf("the upstream got x-api-key %q", got)
	}
	up.mu.Unlock()
	b.Run("headers", func(b *testing.B) {
		compareInject(b, func(c *http.Client) time.Duration { return fetch(c, "") }, plain, inj)
	})
	for _, kib := range []int{2, 8, 20} {
		body := promptBody(kib<<10, tokPh)
		b.Run("headers+json-body-"+strconv.Itoa(kib)+"KiB", func(b *testing.B) {
			compareInject(b, func(c *http.Client) time.Duration { return fetch(c, body) }, plain, inj)
		})
	}
}

// compareInject times 100 pairs of requests per iteration, alternating
// which goes first, and reports both medians and their difference.
func compareInject(b *testing.B, fetch func(*http.Client) time.Duration, plain, inj *http.Client) {
	var p, i []time.Duration
	for b.Loop() {
		for n := 0; n < 100; n++ {
			if n%2 == 0 { // neither goes first always
				p = append(p, fetch(plain))
				i = append(i, fetch(inj))
			} else {
				i = append(i, fetch(inj))
				p = append(p, fetch(plain))
			}
		}
	}
	pm, im := median(p), median(i)
	b.ReportMetric(float64(pm.Microseconds()), "intercepted-µs")
	b.ReportMetric(float64(im.Microseconds()), "injected-µs")
	b.ReportMetric(float64((im - pm).Microseconds()), "added-µs")
}

// promptBody is a JSON request of about size bytes like an agent's: a
// conversation with prose and code, and ph in one message.
func promptBody(size int, ph string) string {
	var sb strings.Builder
	sb.WriteString(`{"model":"claude","max_tokens":4096,"stream":false,"system":"You are a coding agent.","messages":[`)
	turn := `{"role":"user","content":"Please fix the failing test in parser.go. Here is the file:\n\nfunc parse(s string) (*Node, error) {\n\tif s == \"\" {\n\t\treturn nil, errors.New(\"empty\")\n\t}\n\treturn &Node{Text: s}, nil\n}\n"},` +
		`{"role":"assistant","content":"I will read the test first, then change the function so that it returns an error for blank input as well."},`
	for sb.Len() < size-200 {
		sb.WriteString(turn)
	}
	sb.WriteString(`{"role":"user","content":"the token is ` + ph + `; do not print it"}]}`)
	return sb.String()
}

// BenchmarkInjectScan is the one pass over a 20 KiB prompt body that
// finds every placeholder and every spelling of every real value (here
// three secrets, about 40 patterns), without the network around it.
func BenchmarkInjectScan(b *testing.B) {
	ss, err := newSecrets([]Secret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: "sk-ant-api03-jailAbcdefghijklmnopqrstuvwxyz0123456789", Value: "sk-ant-api03-REALrealREALrealREALreal+/0123456789xyz", Hosts: []string{"allowed.test"}},
		{Name: "GITHUB_TOKEN", Placeholder: "ghp_jailx9y8z7w6v5u4t3s2r1q0p9o8n7m6l5k4", Value: "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB", Hosts: []string{"allowed.test"}},
		{Name: "DATABASE_URL", Placeholder: "jail-secret-DATABASE_URL-q1w2e3r4t5y6u7i8", Value: "pg-passw0rd-hunter2", Hosts: []string{"db.test"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	h, _ := normalizeHost("allowed.test")
	body := []byte(promptBody(20<<10, "ghp_jailx9y8z7w6v5u4t3s2r1q0p9o8n7m6l5k4"))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		in := ss.begin(h, 443)
		if _, _, err := in.rewriter(place{kind: inBody}, escJSON, modeInject).apply(nil, body, true); err != nil {
			b.Fatal(err)
		}
	}
}
