package timewheel_test

import (
	"fmt"

	"github.com/hourglass-mq/hourglass/timewheel"
)

// A lease that expires unless renewed: the owner embeds a Timer in its own
// record, so scheduling allocates nothing, and sleeps until NextDeadline.
func Example() {
	type lease struct {
		id    string
		timer timewheel.Timer[*lease]
	}
	w := timewheel.New[*lease](1, 512, 1000) // 1 ms ticks, clock at 1000 ms

	a := &lease{id: "a"}
	a.timer.Value = a
	b := &lease{id: "b"}
	b.timer.Value = b
	w.Add(&a.timer, 1030)
	w.Add(&b.timer, 61_000) // a minute out: an overflow level holds it

	// Renew a: cancel and add again with a later deadline.
	w.Cancel(&a.timer)
	w.Add(&a.timer, 1500)

	for {
		next, ok := w.NextDeadline()
		if !ok {
			break
		}
		w.Advance(next, func(t *timewheel.Timer[*lease]) {
			fmt.Printf("at %d: lease %s expired (deadline %d)\n", w.Now(), t.Value.id, t.Deadline())
		})
	}
	// Output:
	// at 1500: lease a expired (deadline 1500)
	// at 61000: lease b expired (deadline 61000)
}
