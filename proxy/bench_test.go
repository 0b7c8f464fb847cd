package proxy

import (
	"context"
	"crypto/tls"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkIntercept compares HTTPS through the intercepting proxy, over
// HTTP/1.1 and (-h2) HTTP/2 to the proxy, with the same requests made
// directly, in interleaved pairs, in one run
// (target: ≤ 0.2 ms added median latency per keep-alive request, ≥ 60 %
// of direct throughput).
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
	viaProxy := func(h2 bool) *http.Client {
		return &http.Client{Transport: &http.Transport{
			Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: e.httpAddr}),
			TLSClientConfig:   &tls.Config{RootCAs: pool(e.ca)},
			ForceAttemptHTTP2: h2,
			// DATA frames of 16 KiB, the protocol's default, which
			// curl keeps: the proxy's cost per frame shows.
			HTTP2: &http.HTTP2Config{MaxReadFrameSize: 16 << 10},
		}}
	}
	// The upstream server speaks HTTP/1.1 only: the HTTP/2 client speaks
	// HTTP/2 to the proxy alone.
	proxied, proxied2 := viaProxy(false), viaProxy(true)
	fetch := func(c *http.Client, size int) (time.Duration, int64) {
		start := time.Now()
		resp, err := c.Get("https://allowed.test/?size=" + strconv.Itoa(size))
		if err != nil {
			b.Fatal(err)
		}
		if want := map[bool]int{true: 2, false: 1}[c == proxied2]; resp.ProtoMajor != want {
			b.Fatalf("the answer came over HTTP/%d, want HTTP/%d", resp.ProtoMajor, want)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(size) {
			b.Fatalf("read %d of %d bytes: %v", n, size, err)
		}
		return time.Since(start), n
	}

	for _, v := range []struct {
		name    string
		proxied *http.Client
	}{{"", proxied}, {"-h2", proxied2}} {
		b.Run("latency"+v.name, func(b *testing.B) {
			fetch(direct, 100) // connections and certificates are set up once,
			fetch(v.proxied, 100)
			small := func(c *http.Client) func() float64 {
				return func() float64 { t, _ := fetch(c, 100); return µs(t) }
			}
			var p samplePairs
			for b.Loop() {
				p.run(latencyPairs, small(direct), small(v.proxied))
			}
			p.reportLatency(b, "direct", "proxied")
		})
		b.Run("download-64MB"+v.name, func(b *testing.B) {
			const size = 64 << 20
			rate := func(c *http.Client) func() float64 {
				return func() float64 { t, n := fetch(c, size); return float64(n) / t.Seconds() / 1e6 }
			}
			var p samplePairs
			for b.Loop() {
				p.run(downloadPairs, rate(direct), rate(v.proxied))
			}
			p.reportThroughput(b, "direct", "proxied")
		})
	}
}

// Pairs per benchmark iteration: `make bench` runs a few iterations, so
// that the medians stand on hundreds of samples (a dozen for downloads).
const (
	latencyPairs  = 200
	downloadPairs = 4
)

func µs(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// samplePairs are measurements of two variants taken in pairs, the order
// within a pair alternating, so that a drift of the machine's speed
// falls on both alike.
type samplePairs struct{ a, b []float64 }

// run takes n pairs.
func (p *samplePairs) run(n int, a, b func() float64) {
	for i := 0; i < n; i++ {
		if len(p.a)%2 == 0 {
			x := a()
			p.a, p.b = append(p.a, x), append(p.b, b())
		} else {
			y := b()
			p.a, p.b = append(p.a, a()), append(p.b, y)
		}
	}
}

// reportLatency reports each variant's median and quartiles in µs and
// the median of the pairs' differences (b − a) with its 95 % confidence
// interval: a difference whose interval holds zero is noise, whatever
// its sign.
func (p *samplePairs) reportLatency(b *testing.B, na, nb string) {
	diffs := make([]float64, len(p.a))
	for i := range p.a {
		diffs[i] = p.b[i] - p.a[i]
	}
	for _, v := range []struct {
		name string
		xs   []float64
	}{{na, p.a}, {nb, p.b}} {
		b.ReportMetric(quantile(v.xs, 0.5), v.name+"-µs")
		b.ReportMetric(quantile(v.xs, 0.25), v.name+"-p25-µs")
		b.ReportMetric(quantile(v.xs, 0.75), v.name+"-p75-µs")
	}
	lo, mid, hi := medianCI(diffs)
	b.ReportMetric(mid, "added-µs")
	b.ReportMetric(lo, "added-ci95-lo-µs")
	b.ReportMetric(hi, "added-ci95-hi-µs")
	b.ReportMetric(float64(len(diffs)), "pairs")
}

// reportThroughput reports each variant's median MB/s and the median of
// the pairs' ratios (b / a, in %) with its quartiles.
func (p *samplePairs) reportThroughput(b *testing.B, na, nb string) {
	ratios := make([]float64, len(p.a))
	for i := range p.a {
		ratios[i] = 100 * p.b[i] / p.a[i]
	}
	b.ReportMetric(quantile(p.a, 0.5), na+"-MB/s")
	b.ReportMetric(quantile(p.b, 0.5), nb+"-MB/s")
	b.ReportMetric(quantile(ratios, 0.5), "%-of-direct")
	b.ReportMetric(quantile(ratios, 0.25), "%-p25")
	b.ReportMetric(quantile(ratios, 0.75), "%-p75")
	b.ReportMetric(float64(len(ratios)), "pairs")
}

// quantile is the q-quantile of xs, interpolated between neighbours.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := int(pos)
	if lo+1 >= len(s) {
		return s[lo]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

// medianCI is the median of xs and its distribution-free 95 % confidence
// interval: the order statistics n/2 ∓ 0.98·√n.
func medianCI(xs []float64) (lo, mid, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	half := 0.98 * math.Sqrt(float64(n))
	l, h := int(math.Floor(float64(n)/2-half)), int(math.Ceil(float64(n)/2+half))
	return s[max(l, 0)], quantile(s, 0.5), s[min(h, n-1)]
}

// BenchmarkInject compares keep-alive HTTPS requests that carry
// placeholders in header fields (x-api-key, Authorization) and a JSON
// body of 2, 8 and 20 KiB (a prompt with code in it, and a placeholder the
// binding keeps out of bodies) through a proxy that injects the secrets
// with the same requests through a proxy without secrets, in one run
// (target: ≤ 0.1 ms added median latency). What is measured includes the
// search for every spelling of every real value in the header fields,
// the URL and the body, and the redaction of the JSON response. Each
// iteration is injectPairs pairs of requests.
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

// compareInject times injectPairs pairs of requests per iteration,
// alternating which goes first, and reports both medians with their
// quartiles and the median difference with its confidence interval.
func compareInject(b *testing.B, fetch func(*http.Client) time.Duration, plain, inj *http.Client) {
	var p samplePairs
	for b.Loop() {
		p.run(injectPairs, func() float64 { return µs(fetch(plain)) }, func() float64 { return µs(fetch(inj)) })
	}
	p.reportLatency(b, "intercepted", "injected")
}

const injectPairs = 200

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
