// Package scenario generates Kubernetes scenarios from one seed: nodes, pods, priority
// classes, disruption budgets and kubelet stats, stored as the API server would store them,
// for judges that run upstream's own code and nodewarden on the same inputs. Every case is
// a pure function of its seed, so a disagreement reproduces from one number.
//
// The building blocks serve every judge:
//   - Gen (objects.go): Node (capacity, allocatable, labels, taints), PriorityClasses (ties,
//     negative values, a global default, preemptionPolicy Never, the built-in classes),
//     PodDisruptionBudgets (overlapping selectors), RawPod (QoS class asked for; container,
//     init-container, sidecar and pod-level requests and limits; overhead; critical pods;
//     tolerations; node selectors), and the states a pod can be in: Running (with in-place
//     resizes: Deferred, Infeasible, InProgress), Nominated, Terminating;
//   - CreatePod (apiserver.go): what the API server does to a pod it creates (defaults, the
//     Priority admission plugin, PrepareForCreate, validation);
//   - Case (casefile.go): a nodewarden snapshot plus the judge's member, read and written
//     as one file;
//   - kubeletview.go and steps.go: what one node's kubelet is given (its active pods in
//     their allocated state, its eviction configuration) and what an eviction changes.
//
// Eviction (eviction.go) composes them into the eviction judge's cases; a scheduler judge
// composes the same blocks over several nodes.
package scenario

import (
	"math/rand/v2"
)

// Rand is the only source of randomness of a scenario: a PCG stream seeded from one number.
type Rand struct {
	r *rand.Rand
}

// NewRand returns the stream of `seed`. The second PCG word is fixed, so the seed alone
// names the stream.
func NewRand(seed uint64) *Rand {
	return &Rand{r: rand.New(rand.NewPCG(seed, 0x6e6f64657761726e))} // "nodewarn"
}

// Intn returns a number in [0, n).
func (g *Rand) Intn(n int) int { return g.r.IntN(n) }

// Between returns a number in [lo, hi].
func (g *Rand) Between(lo, hi int64) int64 { return lo + g.r.Int64N(hi-lo+1) }

// Chance is true with probability p.
func (g *Rand) Chance(p float64) bool { return g.r.Float64() < p }

// Float returns a number in [0, 1).
func (g *Rand) Float() float64 { return g.r.Float64() }

// Pick returns one of the items, each equally likely.
func Pick[T any](g *Rand, items ...T) T { return items[g.r.IntN(len(items))] }

// Weighted returns the index of one weight, chosen in proportion to the weights.
func (g *Rand) Weighted(weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := g.r.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

// Shuffle permutes n items through swap.
func (g *Rand) Shuffle(n int, swap func(i, j int)) { g.r.Shuffle(n, swap) }
