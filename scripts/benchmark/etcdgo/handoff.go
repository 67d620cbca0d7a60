package main

// The handoff mode: how long etcd's lock takes to pass from an owner that unlocks to the waiter
// queued behind it, with etcd's own Go client (issue 37's measure; see scripts/benchmark/README.md).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

// handoffTry is one try; times in ms from the moment right before the owner's Unlock was sent.
type handoffTry struct {
	DelayMs float64 `json:"delayMs"`
	// QueuedMs: from the waiter's Lock call until its key was seen under the lock's prefix.
	QueuedMs float64 `json:"queuedMs"`
	// ToldMs: until the waiter's Lock returned.
	ToldMs float64 `json:"toldMs"`
	// RanMs: until the command the waiter then ran (sh -c 'date +%s%N') read the clock.
	RanMs float64 `json:"ranMs"`
	// UnlockMs: until the owner's Unlock returned (its Delete committed).
	UnlockMs float64 `json:"unlockMs"`
	Error    string  `json:"error,omitempty"`
}

type handoffResult struct {
	Mode           string       `json:"mode"`
	OwnerEndpoint  string       `json:"ownerEndpoint"`
	WaiterEndpoint string       `json:"waiterEndpoint"`
	SessionTTL     int          `json:"sessionTtl"`
	SetupMs        int64        `json:"setupMs"`
	Tries          []handoffTry `json:"tries"`
}

// How often the waiter's key is looked for, and how long the owner may wait for the waiter's grant.
const (
	queuedPoll   = 5 * time.Millisecond
	grantTimeout = 15 * time.Second
)

func connectOne(endpoint string) *clientv3.Client {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		fatal("connecting to %s: %v", endpoint, err)
	}
	return client
}

func parseDelays(list string) []time.Duration {
	var delays []time.Duration
	for _, item := range strings.Split(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(item))
		if err != nil || d < 0 {
			fatal("-delays: %q is not a duration", item)
		}
		delays = append(delays, d)
	}
	return delays
}

// runHandoff: one owner session and one waiter session, each on a client of its own (owner: the
// first endpoint, waiter: the second), one try per delay on a fresh name; prints the JSON result.
func runHandoff(endpoints []string, delayList, prefix string, ttl int, callTimeout time.Duration) {
	delays := parseDelays(delayList)
	waiterEndpoint := endpoints[0]
	if len(endpoints) > 1 {
		waiterEndpoint = endpoints[1]
	}
	setupStart := time.Now()
	ownerClient := connectOne(endpoints[0])
	defer ownerClient.Close()
	waiterClient := connectOne(waiterEndpoint)
	defer waiterClient.Close()
	ownerSession, err := concurrency.NewSession(ownerClient, concurrency.WithTTL(ttl))
	if err != nil {
		fatal("creating the owner's session: %v", err)
	}
	waiterSession, err := concurrency.NewSession(waiterClient, concurrency.WithTTL(ttl))
	if err != nil {
		fatal("creating the waiter's session: %v", err)
	}
	out := handoffResult{
		Mode:           "handoff",
		OwnerEndpoint:  endpoints[0],
		WaiterEndpoint: waiterEndpoint,
		SessionTTL:     ttl,
		SetupMs:        time.Since(setupStart).Milliseconds(),
	}
	for i, delay := range delays {
		name := fmt.Sprintf("%s/handoff/%d", prefix, i)
		try := handoffOnce(ownerClient, ownerSession, waiterSession, name, delay, callTimeout)
		try.DelayMs = ms(delay)
		out.Tries = append(out.Tries, try)
	}
	// Revoking the leases deletes whatever lock keys are left.
	ownerSession.Close()
	waiterSession.Close()
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fatal("writing the result: %v", err)
	}
}

type grant struct {
	at     time.Time
	dateNs int64
	err    error
}

// dateNow runs sh -c 'date +%s%N', as `etcdctl lock NAME sh -c …` would, and returns what it printed.
func dateNow() (int64, error) {
	printed, err := exec.Command("sh", "-c", "date +%s%N").Output()
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(printed)), 10, 64)
}

func handoffOnce(client *clientv3.Client, ownerSession, waiterSession *concurrency.Session, name string, delay, callTimeout time.Duration) handoffTry {
	owner := concurrency.NewMutex(ownerSession, name)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	err := owner.Lock(ctx)
	cancel()
	if err != nil {
		return handoffTry{Error: fmt.Sprintf("owner's Lock: %v", err)}
	}
	waiter := concurrency.NewMutex(waiterSession, name)
	granted := make(chan grant, 1)
	waitCtx, cancelWait := context.WithTimeout(context.Background(), callTimeout+delay+grantTimeout)
	defer cancelWait()
	started := time.Now()
	go func() {
		err := waiter.Lock(waitCtx)
		at := time.Now()
		if err != nil {
			granted <- grant{at: at, err: err}
			return
		}
		ns, err := dateNow()
		granted <- grant{at: at, dateNs: ns, err: err}
	}()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		owner.Unlock(ctx)
		waiter.Unlock(ctx)
		cancel()
	}()
	// Queued: the waiter's key is under the name's prefix beside the owner's.
	deadline := started.Add(callTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		resp, err := client.Get(ctx, name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count >= 2 {
			break
		}
		if time.Now().After(deadline) {
			return handoffTry{Error: "the waiter's key did not appear"}
		}
		time.Sleep(queuedPoll)
	}
	queued := time.Since(started)
	time.Sleep(delay)
	sent := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
	err = owner.Unlock(ctx)
	unlocked := time.Since(sent)
	cancel()
	if err != nil {
		return handoffTry{QueuedMs: ms(queued), Error: fmt.Sprintf("owner's Unlock: %v", err)}
	}
	select {
	case g := <-granted:
		if g.err != nil {
			return handoffTry{QueuedMs: ms(queued), Error: fmt.Sprintf("waiter: %v", g.err)}
		}
		// time.Unix carries no monotonic reading, so Sub compares wall clocks, as date's is.
		return handoffTry{QueuedMs: ms(queued), ToldMs: ms(g.at.Sub(sent)), RanMs: ms(time.Unix(0, g.dateNs).Sub(sent)), UnlockMs: ms(unlocked)}
	case <-time.After(grantTimeout):
		return handoffTry{QueuedMs: ms(queued), Error: fmt.Sprintf("the waiter was not granted within %v", grantTimeout)}
	}
}
