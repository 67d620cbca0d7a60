// Command etcdgo drives etcd with etcd's own Go client (go.etcd.io/etcd/clientv3, etcd 3.4), the
// strongest form of the peer the cluster benchmark compares our cluster with. One process, one
// client (one set of gRPC connections to the given endpoints) shared by every goroutine, as a Go
// service would hold it. Modes:
//
//	lock    N lockers; each holds one session (one lease, kept alive by the session) for the whole
//	        run and loops concurrency.NewMutex(session, name).Lock(ctx) then .Unlock(ctx) on a name
//	        of its own: the calls `etcdctl lock` makes, without the lease grant and revoke that
//	        etcdctl pays once per invocation. Uncontended, a cycle is two commits (the Txn that
//	        creates the waiter key, the Delete). Latency: one whole cycle.
//	put     N writers, each Put-ting a value of -value-bytes to a key of its own, closed loop: what
//	        etcd commits at that concurrency with no recipe on top. Latency: one Put.
//	serial  one writer, serial Puts: etcd's commit latency with nothing else in flight.
//	handoff one try per -delays entry (handoff.go): an owner holds concurrency.Mutex on a name, a
//	        waiter queues behind it, the owner Unlocks after the delay; how long until the
//	        waiter's Lock returned (told) and until the command it then runs, sh -c 'date +%s%N',
//	        read the clock (ran). Owner and waiter each have their own client: the owner's to the
//	        first endpoint, the waiter's to the second (the first when there is one).
//
// lock, put and serial print "measuring" on stderr when the measured window opens and "measured"
// when it closes (so the caller can read the members' CPU over the same window), then one JSON
// object on stdout; handoff prints one JSON object on stdout.
// Built by scripts/benchmark/cluster/etcdGo.ts in GOPATH mode from Debian's golang-go and
// golang-etcd-server-dev; see scripts/benchmark/README.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

type latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

type result struct {
	Mode        string `json:"mode"`
	Concurrency int    `json:"concurrency"`
	ValueBytes  int    `json:"valueBytes,omitempty"`
	WarmupMs    int64  `json:"warmupMs"`
	DurationMs  int64  `json:"durationMs"`
	// SetupMs: connecting and (lock mode) granting every session's lease, before the warmup.
	SetupMs int64 `json:"setupMs"`
	// Cycles: completed lock+unlock cycles (lock) or Puts (put, serial) that ended in the window.
	Cycles          int64   `json:"cycles"`
	CyclesPerSecond float64 `json:"cyclesPerSecond"`
	// OpsPerSecond: 2 per lock cycle (acquire and release, as our load generator counts a request
	// and its release), 1 per Put.
	OpsPerSecond float64 `json:"opsPerSecond"`
	// LatencyMs: of a whole cycle (lock) or of one Put.
	LatencyMs latency `json:"latencyMs"`
	// Errors: calls that failed or timed out (the cycle is then not counted); LastError the last one.
	Errors    int64  `json:"errors"`
	LastError string `json:"lastError,omitempty"`
	// ClientCpuCores: share of one core this process used in the window.
	ClientCpuCores float64 `json:"clientCpuCores"`
	GoMaxProcs     int     `json:"goMaxProcs"`
}

// worker is one goroutine's tally; only it writes to it until the run ends.
type worker struct {
	samples []time.Duration
	errors  int64
	last    error
}

// fail counts an error and backs off a little, so that an unreachable etcd is not spun on.
func (w *worker) fail(err error) {
	w.errors++
	w.last = err
	time.Sleep(errorPause)
}

const errorPause = 10 * time.Millisecond

// done records one cycle that began at started, if it ended inside the measured window [from, until).
func (w *worker) done(started, from, until time.Time) {
	ended := time.Now()
	if !ended.Before(from) && ended.Before(until) {
		w.samples = append(w.samples, ended.Sub(started))
	}
}

func cpuTime() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// percentile of sorted samples by nearest rank, in ms.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return ms(sorted[rank-1])
}

func goMaxProcs() int { return runtime.GOMAXPROCS(0) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fatal(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "etcdgo: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:2379", "etcd client URLs, comma-separated")
	mode := flag.String("mode", "lock", "lock, put or serial")
	workers := flag.Int("concurrency", 48, "lockers (lock) or writers (put); serial always uses 1")
	warmup := flag.Duration("warmup", time.Second, "unmeasured time before the window")
	duration := flag.Duration("duration", 3*time.Second, "measured window")
	valueBytes := flag.Int("value-bytes", 64, "size of each Put's value (put, serial)")
	prefix := flag.String("prefix", "", "key prefix (default: etcdgo/<pid>-<time>)")
	callTimeout := flag.Duration("call-timeout", 10*time.Second, "longest one call may take before it counts as an error")
	ttl := flag.Int("ttl", 60, "lease TTL in seconds of each locker's session (lock, handoff)")
	delays := flag.String("delays", "500ms", "handoff: comma-separated delays from the waiter queued to the owner's Unlock, one try each")
	flag.Parse()

	switch *mode {
	case "lock", "put":
	case "serial":
		*workers = 1
	case "handoff":
	default:
		fatal("unknown -mode %q (lock, put, serial or handoff)", *mode)
	}
	if *workers < 1 {
		fatal("-concurrency must be at least 1")
	}
	if *prefix == "" {
		*prefix = fmt.Sprintf("etcdgo/%d-%d", os.Getpid(), time.Now().UnixNano())
	}

	if *mode == "handoff" {
		runHandoff(strings.Split(*endpoints, ","), *delays, *prefix, *ttl, *callTimeout)
		return
	}

	setupStart := time.Now()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 10 * time.Second,
	})
	if err != nil {
		fatal("connecting to %s: %v", *endpoints, err)
	}
	defer client.Close()

	// Every goroutine gets ready (its session granted, in lock mode) before the clock starts.
	type body func(w *worker, from, until time.Time)
	bodies := make([]body, *workers)
	value := strings.Repeat("v", *valueBytes)
	var setup sync.WaitGroup
	setupErrors := make(chan error, *workers)
	for i := 0; i < *workers; i++ {
		i := i
		switch *mode {
		case "lock":
			setup.Add(1)
			go func() {
				defer setup.Done()
				session, err := concurrency.NewSession(client, concurrency.WithTTL(*ttl))
				if err != nil {
					setupErrors <- err
					return
				}
				name := fmt.Sprintf("%s/lock/%d", *prefix, i)
				bodies[i] = func(w *worker, from, until time.Time) {
					lockLoop(client, session, name, *ttl, *callTimeout, w, from, until)
				}
			}()
		default:
			key := fmt.Sprintf("%s/put/%d", *prefix, i)
			bodies[i] = func(w *worker, from, until time.Time) {
				putLoop(client, key, value, *callTimeout, w, from, until)
			}
		}
	}
	setup.Wait()
	close(setupErrors)
	for err := range setupErrors {
		fatal("creating a session: %v", err)
	}
	setupMs := time.Since(setupStart).Milliseconds()

	start := time.Now()
	from := start.Add(*warmup)
	until := from.Add(*duration)
	tallies := make([]worker, *workers)
	var done sync.WaitGroup
	for i := range bodies {
		done.Add(1)
		go func(i int) {
			defer done.Done()
			bodies[i](&tallies[i], from, until)
		}(i)
	}
	time.Sleep(time.Until(from))
	fmt.Fprintln(os.Stderr, "measuring")
	cpuFrom := cpuTime()
	time.Sleep(time.Until(until))
	cpuUntil := cpuTime()
	fmt.Fprintln(os.Stderr, "measured")
	done.Wait()

	var samples []time.Duration
	var errors int64
	var last error
	for i := range tallies {
		samples = append(samples, tallies[i].samples...)
		errors += tallies[i].errors
		if tallies[i].last != nil {
			last = tallies[i].last
		}
	}
	sort.Slice(samples, func(a, b int) bool { return samples[a] < samples[b] })
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	seconds := duration.Seconds()
	out := result{
		Mode:            *mode,
		Concurrency:     *workers,
		WarmupMs:        warmup.Milliseconds(),
		DurationMs:      duration.Milliseconds(),
		SetupMs:         setupMs,
		Cycles:          int64(len(samples)),
		CyclesPerSecond: float64(len(samples)) / seconds,
		Errors:          errors,
		ClientCpuCores:  (cpuUntil - cpuFrom).Seconds() / seconds,
		GoMaxProcs:      goMaxProcs(),
	}
	if *mode != "lock" {
		out.ValueBytes = *valueBytes
	}
	out.OpsPerSecond = out.CyclesPerSecond
	if *mode == "lock" {
		out.OpsPerSecond = 2 * out.CyclesPerSecond
	}
	if len(samples) > 0 {
		out.LatencyMs = latency{
			P50:  percentile(samples, 50),
			P99:  percentile(samples, 99),
			P999: percentile(samples, 99.9),
			Mean: ms(sum) / float64(len(samples)),
			Max:  ms(samples[len(samples)-1]),
		}
	}
	if last != nil {
		out.LastError = last.Error()
	}
	// Our own keys go: they would otherwise weigh on whatever runs on this etcd next.
	ctx, cancel := context.WithTimeout(context.Background(), *callTimeout)
	client.Delete(ctx, *prefix+"/", clientv3.WithPrefix())
	cancel()
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fatal("writing the result: %v", err)
	}
}

// lockLoop: Lock then Unlock of the locker's own name until the window closes. A cycle counts
// when it ends inside the window. Should the session's lease be lost, a new session replaces it.
func lockLoop(client *clientv3.Client, session *concurrency.Session, name string, ttl int, callTimeout time.Duration, w *worker, from, until time.Time) {
	defer func() { session.Close() }()
	for time.Now().Before(until) {
		select {
		case <-session.Done():
			fresh, err := concurrency.NewSession(client, concurrency.WithTTL(ttl))
			if err != nil {
				w.fail(err)
				continue
			}
			session = fresh
		default:
		}
		started := time.Now()
		mutex := concurrency.NewMutex(session, name)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := mutex.Lock(ctx)
		cancel()
		if err != nil {
			w.fail(err)
			continue
		}
		ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
		err = mutex.Unlock(ctx)
		cancel()
		if err != nil {
			w.fail(err)
			continue
		}
		w.done(started, from, until)
	}
}

// putLoop: Puts to the writer's own key until the window closes.
func putLoop(client *clientv3.Client, key, value string, callTimeout time.Duration, w *worker, from, until time.Time) {
	for time.Now().Before(until) {
		started := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_, err := client.Put(ctx, key, value)
		cancel()
		if err != nil {
			w.fail(err)
			continue
		}
		w.done(started, from, until)
	}
}
