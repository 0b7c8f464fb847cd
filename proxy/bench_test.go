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
	"testing"
	"time"
)

// BenchmarkIntercept compares HTTPS through the intercepting proxy with
// the same requests made directly, in one run (SPEC §7: ≤ 1 ms added
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
