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

// BenchmarkInject compares keep-alive HTTPS requests that carry two
// placeholders in header fields through a proxy that injects both
// secrets with the same requests through a proxy without secrets, in one
// run (target: ≤ 0.2 ms added median latency). The responses are
// textual, so the injecting proxy also redacts them.
//
//	go test -run '^$' -bench Inject ./proxy/
func BenchmarkInject(b *testing.B) {
	upCA := memCA(b)
	const keyVal, tokVal = "sk-ant-api03-0123456789abcdefghijklmnopqrstuvwxyz", "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	up := newUpstream(b, upCA, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_01","content":[{"type":"text","text":"hi"}]}`)
	})
	rules := Rules{Allow: []string{"allowed.test"}, Hosts: map[string]string{"allowed.test": up.addr()}}
	secrets := []Secret{
		{Name: "ANTHROPIC_API_KEY", Placeholder: "jail-secret-ANTHROPIC_API_KEY-Zm9vYmFyYmF6", Value: keyVal, Hosts: []string{"allowed.test"}},
		{Name: "GITHUB_TOKEN", Placeholder: "jail-secret-GITHUB_TOKEN-cXV1eHF1dXg", Value: tokVal, Hosts: []string{"allowed.test"}},
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
		req, _ := http.NewRequest("POST", "https://allowed.test/v1/messages", r)
		req.Header.Set("x-api-key", secrets[0].Placeholder)
		req.Header.Set("Authorization", "Bearer "+secrets[1].Placeholder)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
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
	for _, bench := range []struct{ name, body string }{
		{"headers", ""},
		{"headers+json-body", `{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":"say hi"}],"metadata":{"token":"` +
			secrets[1].Placeholder + `"},"pad":"` + strings.Repeat("x", 2000) + `"}`},
	} {
		b.Run(bench.name, func(b *testing.B) {
			var p, i []time.Duration
			for n := 0; b.Loop(); n++ {
				if n%2 == 0 { // neither goes first always
					p = append(p, fetch(plain, bench.body))
					i = append(i, fetch(inj, bench.body))
				} else {
					i = append(i, fetch(inj, bench.body))
					p = append(p, fetch(plain, bench.body))
				}
			}
			pm, im := median(p), median(i)
			b.ReportMetric(float64(pm.Microseconds()), "intercepted-µs")
			b.ReportMetric(float64(im.Microseconds()), "injected-µs")
			b.ReportMetric(float64((im - pm).Microseconds()), "added-µs")
		})
	}
}
