// On-CPU Go workload: burns CPU in three functions with a 50/30/20 split of the main goroutine's thread
// CPU time (RUSAGE_THREAD, with the goroutine locked to its thread, so other processes do not skew it).
// Each burner runs under pprof labels (endpoint=a|b|c), as a Go service tags its requests. mix is small
// enough for the compiler to inline: its samples are inlined frames of spin. Nothing allocates in the
// loop, so the garbage collector stays idle.
// Expected stacks (leaf first): main.mix (inlined) -> main.spin -> main.burnA|B|C -> main.main.funcN ->
// runtime/pprof.Do -> main.main -> runtime.main -> runtime.goexit.
// Usage: go_split SECONDS [CPU_PROFILE [AFTER [HZ]]]: with CPU_PROFILE, Go's own profiler writes there
// too, from AFTER seconds on (default 0) to the end, so it can cover the same span as another profiler,
// at HZ samples a second (default Go's 100). runtime/pprof has no rate setting: the rate is set first,
// and StartCPUProfile's own attempt at 100 Hz is refused with a line on stderr ("cannot set cpu
// profile rate"); the profile records the rate it was taken at.
package main

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"
)

var sink uint64

func mix(x uint64) uint64 { return (x ^ (x >> 3)) + 0x9e3779b97f4a7c15 }

func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:noinline
func spin(d time.Duration) {
	end := threadCPU() + d
	x := sink
	for threadCPU() < end {
		for i := uint64(0); i < 20000; i++ {
			x = mix(x + i)
		}
	}
	sink = x
}

//go:noinline
func burnA(d time.Duration) { spin(d) }

//go:noinline
func burnB(d time.Duration) { spin(d) }

//go:noinline
func burnC(d time.Duration) { spin(d) }

func main() {
	runtime.LockOSThread()
	seconds := 10.0
	if len(os.Args) > 1 {
		seconds, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	start := time.Now()
	profileAt := time.Duration(-1)
	profileHz := 0
	if len(os.Args) > 4 {
		profileHz, _ = strconv.Atoi(os.Args[4])
	}
	if len(os.Args) > 3 {
		after, _ := strconv.ParseFloat(os.Args[3], 64)
		profileAt = time.Duration(after * float64(time.Second))
	} else if len(os.Args) > 2 {
		profileAt = 0
	}
	var profile *os.File
	ctx := context.Background()
	end := start.Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		if profileAt >= 0 && time.Since(start) >= profileAt {
			var err error
			if profile, err = os.Create(os.Args[2]); err != nil {
				panic(err)
			}
			if profileHz > 0 {
				runtime.SetCPUProfileRate(profileHz)
			}
			if err := pprof.StartCPUProfile(profile); err != nil {
				panic(err)
			}
			profileAt = -1
		}
		pprof.Do(ctx, pprof.Labels("endpoint", "a"), func(context.Context) { burnA(25 * time.Millisecond) })
		pprof.Do(ctx, pprof.Labels("endpoint", "b"), func(context.Context) { burnB(15 * time.Millisecond) })
		pprof.Do(ctx, pprof.Labels("endpoint", "c"), func(context.Context) { burnC(10 * time.Millisecond) })
	}
	if profile != nil {
		pprof.StopCPUProfile()
		if err := profile.Close(); err != nil {
			panic(err)
		}
	}
}
