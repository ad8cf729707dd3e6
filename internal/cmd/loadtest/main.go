// Command loadtest measures GET /api/status of a real `agentrunner serve`
// while its loop runs cycles back to back, and checks that the load does
// not slow the engine down.
//
// It writes the example workspace into a temporary directory, starts a
// mock Execution Service on loopback, starts the agentrunner binary given
// by -bin with a cycle every second, lets it run -warmup, counts the
// cycles it completes during -d without load and then during -d under
// load, and prints the throughput and latency percentiles. The load comes
// from wrk when -wrk is set (and installed), else from a built-in Go
// client with -c connections.
//
//	go build -o bin/agentrunner ./cmd/agentrunner
//	go run ./internal/cmd/loadtest -bin bin/agentrunner -d 10s -c 64 -wrk
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/execsvc"
)

func main() {
	bin := flag.String("bin", "agentrunner", "the agentrunner binary")
	dur := flag.Duration("d", 10*time.Second, "duration of each measurement")
	warmup := flag.Duration("warmup", 3*time.Second, "time the loop runs before measuring")
	conns := flag.Int("c", 64, "concurrent connections")
	useWrk := flag.Bool("wrk", false, "generate the load with wrk")
	flag.Parse()
	if err := run(*bin, *dur, *warmup, *conns, *useWrk); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(bin string, dur, warmup time.Duration, conns int, useWrk bool) error {
	dir, err := os.MkdirTemp("", "agentrunner-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := crypton.Write(dir, true, ""); err != nil {
		return err
	}
	es := execsvc.NewMock(execsvc.MockOptions{})
	esURL, err := es.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer es.Close()
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "-c", filepath.Join(dir, "agentrunner.yaml"))
	cmd.Env = append(os.Environ(),
		"AGENTRUNNER_SERVER_LISTEN="+addr,
		"AGENTRUNNER_EXECUTION_SERVICE_URL="+esURL,
		"AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=50ms",
		"AGENTRUNNER_SCHEDULE_EVERY=1s",
		"AGENTRUNNER_SCHEDULE_MIN_CYCLE=1s",
	)
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	base := "http://" + addr
	if err := waitUp(base+"/health/live", 15*time.Second); err != nil {
		return err
	}
	time.Sleep(warmup)

	before, err := completed(base)
	if err != nil {
		return err
	}
	time.Sleep(dur)
	idle, err := completed(base)
	if err != nil {
		return err
	}
	var report string
	if useWrk {
		out, err := exec.Command("wrk", "-t2", fmt.Sprintf("-c%d", conns), "-d"+dur.String(), "--latency", base+"/api/status").CombinedOutput()
		if err != nil {
			return fmt.Errorf("wrk: %v\n%s", err, out)
		}
		report = string(out)
	} else {
		report = goLoad(base+"/api/status", conns, dur)
	}
	loaded, err := completed(base)
	if err != nil {
		return err
	}
	fmt.Print(report)
	quiet, busy := idle[len(before):], loaded[len(idle):]
	fmt.Printf("cycles completed (each 5 agent steps and an execution): %d in %s without load (median %s), %d in %s under load (median %s)\n",
		len(quiet), dur, median(quiet), len(busy), dur, median(busy))
	return nil
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitUp(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("agentrunner serve did not come up; see its log")
}

// completed returns the durations of the completed cycles the API lists
// (up to 500), oldest first.
func completed(base string) ([]time.Duration, error) {
	resp, err := http.Get(base + "/api/cycles?status=completed&limit=500")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Cycles []struct {
			DurationMS int64 `json:"duration_ms"`
		} `json:"cycles"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := len(body.Cycles) - 1; i >= 0; i-- {
		out = append(out, time.Duration(body.Cycles[i].DurationMS)*time.Millisecond)
	}
	return out, nil
}

// median of durations.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// goLoad sends GETs on conns keep-alive connections for dur and reports
// throughput and latency percentiles.
func goLoad(url string, conns int, dur time.Duration) string {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	var mu sync.Mutex
	var lat []time.Duration
	var failed atomic.Int64
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*p))]
	}
	return fmt.Sprintf("%d requests in %s (%d failed): %.0f req/s; latency p50 %s, p90 %s, p99 %s, max %s\n",
		len(lat), dur, failed.Load(), float64(len(lat))/dur.Seconds(), pct(0.50), pct(0.90), pct(0.99), pct(1))
}
