package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// The kubelet's eviction manager (k8s.io/kubernetes/pkg/kubelet/eviction), built by its
// exported NewManager and run by its own Start loop, with everything around it the test's:
// the summary provider, the active pods function, the clock (k8s.io/utils/clock/testing's
// fake clock), the kill function and the event recorder.
//
// Stepping it cycle by cycle without real-time sleeps: the loop of Start calls synchronize,
// which calls the active pods function once at its start (eviction_manager.go: `activePods
// := podFunc()`, then summaryProvider.Get). That function blocks until the judge hands it
// the cycle's pods, having set the fake clock and the summary first; so when it is called,
// the previous cycle is over and the manager's state (its node conditions, read by Admit and
// IsUnder*Pressure) is settled. After a kill the loop waits for the pod's cleanup on the
// clock's ticker (waitForPodsCleanup: a 30 s timer, a 1 s ticker); the clock wrapper says
// when the ticker exists, and the judge steps the clock by one second, which fires it. When
// nothing was killed the loop waits `monitoringInterval` of real time: 1 ns here.
type kubelet struct {
	manager eviction.Manager
	admit   lifecycle.PodAdmitHandler
	clock   *stepClock
	cancel  context.CancelFunc

	called  chan struct{}  // the active pods function was called: a cycle starts
	release chan []*v1.Pod // the judge's pods for that cycle
	ticker  chan struct{}  // waitForPodsCleanup made its ticker

	mu      sync.Mutex
	summary *statsapi.Summary
	kills   []kill
	events  []event
	// thresholds the manager acts on in the current cycle (its debug log "thresholds -
	// updated stats"): the set it picks one threshold from.
	eligible []evictionapi.Signal
}

// kill is one call of the kill function.
type kill struct {
	pod     *v1.Pod
	evicted bool
	grace   int64
	status  v1.PodStatus // what the manager's status function wrote
}

type event struct {
	node    bool
	reason  string
	message string
}

// stepClock is the fake clock, telling the judge when the cleanup ticker is registered.
type stepClock struct {
	*testingclock.FakeClock
	tickers chan<- struct{}
}

func (c *stepClock) NewTicker(d time.Duration) clock.Ticker {
	t := c.FakeClock.NewTicker(d)
	c.tickers <- struct{}{}
	return t
}

type diskInfo struct{ dedicatedImageFs bool }

func (d diskInfo) HasDedicatedImageFs(context.Context) (bool, error)     { return d.dedicatedImageFs, nil }
func (d diskInfo) HasDedicatedContainerFs(context.Context) (bool, error) { return false, nil }

type noGC struct{}

func (noGC) DeleteUnusedImages(context.Context) error        { return nil }
func (noGC) DeleteAllUnusedContainers(context.Context) error { return nil }

type summaryProvider struct{ k *kubelet }

func (s summaryProvider) Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error) {
	s.k.mu.Lock()
	defer s.k.mu.Unlock()
	return s.k.summary, nil
}

func (s summaryProvider) GetCPUAndMemoryStats(context.Context) (*statsapi.Summary, error) {
	return s.Get(context.Background(), false)
}

// recorder keeps the events the manager records.
type recorder struct{ k *kubelet }

func (r recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.record(obj, reason, message)
}
func (r recorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...interface{}) {
	r.record(obj, reason, fmt.Sprintf(format, args...))
}
func (r recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...interface{}) {
	r.record(obj, reason, fmt.Sprintf(format, args...))
}
func (r recorder) record(obj runtime.Object, reason, message string) {
	_, isRef := obj.(*v1.ObjectReference)
	r.k.mu.Lock()
	r.k.events = append(r.k.events, event{node: isRef, reason: reason, message: message})
	r.k.mu.Unlock()
}

// logSink reads the manager's own account of the thresholds it acts on; everything else it
// logs is dropped.
type logSink struct{ k *kubelet }

func (s logSink) Init(logr.RuntimeInfo)                  {}
func (s logSink) Enabled(level int) bool                 { return level <= 3 }
func (s logSink) Error(error, string, ...interface{})    {}
func (s logSink) WithValues(...interface{}) logr.LogSink { return s }
func (s logSink) WithName(string) logr.LogSink           { return s }
func (s logSink) Info(level int, msg string, kv ...interface{}) {
	if msg != "Eviction manager: threshold observed resource" {
		return
	}
	var prefix string
	var signal evictionapi.Signal
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "log":
			prefix, _ = kv[i+1].(string)
		case "signal":
			signal, _ = kv[i+1].(evictionapi.Signal)
		}
	}
	if prefix == "thresholds - updated stats" {
		s.k.mu.Lock()
		s.k.eligible = append(s.k.eligible, signal)
		s.k.mu.Unlock()
	}
}

// startKubelet makes the manager with the case's configuration and starts its loop at
// `start`; it returns once the loop waits for its first cycle.
func startKubelet(cfg eviction.Config, dedicatedImageFs bool, nodeName string, start time.Time) (*kubelet, error) {
	k := &kubelet{
		called:  make(chan struct{}),
		release: make(chan []*v1.Pod),
		ticker:  make(chan struct{}, 1),
	}
	k.clock = &stepClock{FakeClock: testingclock.NewFakeClock(start), tickers: k.ticker}
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: "node-uid", Namespace: ""}
	killPod := func(pod *v1.Pod, evicted bool, grace *int64, fn func(*v1.PodStatus)) error {
		var status v1.PodStatus
		fn(&status)
		g := int64(-1)
		if grace != nil {
			g = *grace
		}
		k.mu.Lock()
		k.kills = append(k.kills, kill{pod: pod, evicted: evicted, grace: g, status: status})
		k.mu.Unlock()
		return nil
	}
	k.manager, k.admit = eviction.NewManager(summaryProvider{k}, cfg, killPod, noGC{}, noGC{}, recorder{k}, nodeRef, k.clock, true)
	ctx, cancel := context.WithCancel(context.Background())
	ctx = klog.NewContext(ctx, logr.New(logSink{k}))
	k.cancel = cancel
	podFunc := func() []*v1.Pod {
		select {
		case k.called <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		select {
		case pods := <-k.release:
			return pods
		case <-ctx.Done():
			return nil
		}
	}
	cleanedUp := func(*v1.Pod) bool { return true }
	k.manager.Start(ctx, diskInfo{dedicatedImageFs}, podFunc, cleanedUp, time.Nanosecond)
	if err := k.awaitCycleStart(); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

// awaitCycleStart returns when the loop waits for the pods of its next cycle, stepping the
// clock past each cleanup wait on the way.
func (k *kubelet) awaitCycleStart() error {
	limit := time.NewTimer(60 * time.Second) // a bound, not a wait: each step takes microseconds
	defer limit.Stop()
	for {
		select {
		case <-k.called:
			return nil
		case <-k.ticker:
			k.clock.Step(time.Second)
		case <-limit.C:
			return fmt.Errorf("the eviction manager's loop did not come back to its next cycle within 60 s")
		}
	}
}

// cycleResult is what one synchronize did.
type cycleResult struct {
	kills    []kill
	events   []event
	eligible []evictionapi.Signal
	// ranked is the manager's ranking of the pods (its rank function sorts the slice it was
	// given, in place); nil when it ranked none.
	ranked     []*v1.Pod
	conditions []v1.NodeConditionType
}

// cycle runs one synchronize at `at` over `pods` (the active pods, in their allocated state)
// and `summary`, and returns what it did, the manager's node conditions after it included.
func (k *kubelet) cycle(at time.Time, pods []*v1.Pod, summary *statsapi.Summary) (cycleResult, error) {
	if at.Before(k.clock.Now()) {
		return cycleResult{}, fmt.Errorf("cycle at %v is before the clock's %v", at, k.clock.Now())
	}
	k.clock.SetTime(at)
	k.mu.Lock()
	k.summary = summary
	k.kills, k.events, k.eligible = nil, nil, nil
	k.mu.Unlock()
	given := append([]*v1.Pod(nil), pods...)
	k.release <- given
	if err := k.awaitCycleStart(); err != nil {
		return cycleResult{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	r := cycleResult{kills: k.kills, events: k.events, eligible: k.eligible}
	for _, e := range k.events {
		if e.node && e.reason == "EvictionThresholdMet" {
			r.ranked = given // ranked in place before any kill was tried
		}
	}
	if k.manager.IsUnderMemoryPressure() {
		r.conditions = append(r.conditions, v1.NodeMemoryPressure)
	}
	if k.manager.IsUnderDiskPressure() {
		r.conditions = append(r.conditions, v1.NodeDiskPressure)
	}
	if k.manager.IsUnderPIDPressure() {
		r.conditions = append(r.conditions, v1.NodePIDPressure)
	}
	return r, nil
}

// admitPod asks the manager's admission handler, between cycles.
func (k *kubelet) admitPod(pod *v1.Pod, others []*v1.Pod) lifecycle.PodAdmitResult {
	return k.admit.Admit(context.Background(), &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others})
}

// stop ends the loop: it is waiting for pods, and leaves once the context is done.
func (k *kubelet) stop() { k.cancel() }

func discardLogger() logr.Logger { return logr.Discard() }
