package proxy

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSoakIntercepted runs 10,000 HTTPS requests through interception
// over 64 concurrent client connections, each a keep-alive connection of
// its own, and checks that every one is answered and that nothing is left
// running afterwards.
// Not parallel: it counts goroutines.
func TestSoakIntercepted(t *testing.T) {
	check := goroutineBaseline(t)
	const clients, requests = 64, 10000
	f := newFaultEnv(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }, Config{})
	proxyURL := &url.URL{Scheme: "http", Host: f.e.httpAddr}
	var next atomic.Int64
	var failed atomic.Int64
	lat := make([][]time.Duration, clients)
	var trs []*http.Transport
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool(f.e.ca)}, MaxConnsPerHost: 1}
		trs = append(trs, tr)
		c := &http.Client{Transport: tr}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= requests; n = next.Add(1) {
				t0 := time.Now()
				resp, err := c.Get(fmt.Sprintf("https://tls.test/soak/%d", n))
				if err != nil {
					failed.Add(1)
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(b) != "ok" {
					failed.Add(1)
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d requests over %d connections in %v: %.0f requests/s, p50 %v, p99 %v; heap in use %d MiB, tunnels %d",
		len(all), clients, took.Round(time.Millisecond), float64(len(all))/took.Seconds(),
		all[len(all)/2], all[len(all)*99/100], ms.HeapInuse>>20, f.tlsUp.conns.Load())
	if failed.Load() != 0 || len(all) != requests {
		t.Errorf("%d of %d requests failed", failed.Load(), requests)
	}
	if n := f.tlsUp.hits.Load(); n != requests {
		t.Errorf("upstream served %d requests, want %d", n, requests)
	}
	check(func() {
		for _, tr := range trs {
			tr.CloseIdleConnections()
		}
	}, f.close)
}
