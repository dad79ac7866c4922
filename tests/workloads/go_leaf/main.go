// On-CPU Go workload whose hot function keeps no frame: leaf is a loop with nothing spilled, so Go
// sets up no frame pointer in it, and rbp still holds its caller's frame while it runs. A
// frame-pointer walk from leaf skips that caller (burnA or burnB) and reports leaf under main.main.
// burnB calls leaf twice as often as burnA, so its share of leaf's samples is two thirds.
// Expected stacks (leaf first): main.leaf -> main.burnA|burnB -> main.main -> runtime.main ->
// runtime.goexit.
// Usage: go_leaf SECONDS
package main

import (
	"os"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func leaf(n uint64) uint64 {
	x := n
	for i := uint64(0); i < 1<<22; i++ {
		x = x*6364136223846793005 + i
	}
	return x
}

//go:noinline
func burnA(n uint64) { sink += leaf(n) }

//go:noinline
func burnB(n uint64) { sink += leaf(n) }

func main() {
	seconds := 10.0
	if len(os.Args) > 1 {
		seconds, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		burnA(sink)
		burnB(sink)
		burnB(sink)
	}
}
